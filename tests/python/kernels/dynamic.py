"""Kernels whose leading dimension is only known at call time."""

import tilelang.language as T


def scale_shift(N, alpha=2.0, beta=1.0, block_M=64, dtype="float32", maker="dynamic", threads=128):
    """Y = alpha * X + beta for X of shape (m, N), m a symbolic dimension.

    maker selects the constructor of the symbolic dimension: T.dynamic, or
    its older spelling T.symbolic."""
    m = T.dynamic("m") if maker == "dynamic" else T.symbolic("m")

    @T.prim_func
    def main(X: T.Tensor((m, N), dtype), Y: T.Tensor((m, N), dtype)):
        with T.Kernel(T.ceildiv(m, block_M), threads=threads) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            for i, j in T.Parallel(block_M, N):
                tile[i, j] = tile[i, j] * alpha + beta
            T.copy(tile, Y[bx * block_M, 0])

    return main


def add_shared_dim(N, block_M=32, dtype="float32", threads=128):
    """C = A + B where A, B and C all have shape (m, N) with the same
    symbolic m (used to check that the runtime insists on one value of m)."""
    m = T.dynamic("m")

    @T.prim_func
    def main(
        A: T.Tensor((m, N), dtype),
        B: T.Tensor((m, N), dtype),
        C: T.Tensor((m, N), dtype),
    ):
        with T.Kernel(T.ceildiv(m, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < m:
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

    return main
