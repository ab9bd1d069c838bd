"""Element-wise kernels: C[i, j] = A[i, j] + B[j] (B broadcast over rows)."""

import tilelang.language as T


def add_broadcast_guarded(M, N, block_M=128, block_N=128, dtype="float32", threads=128):
    """Each block handles one block_M x block_N tile, reading and writing global
    memory directly; an ``if`` inside the parallel loop masks the tails when the
    tile does not divide the problem."""

    @T.prim_func
    def main(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((N,), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                if row < M and col < N:
                    C[row, col] = A[row, col] + B[col]

    return main


def add_broadcast_tiled(M, N, block_M=128, block_N=128, dtype="float32", threads=128):
    """The same computation staged through on-chip tiles: the tails are handled
    by T.copy (reads past the end give 0, writes past the end are dropped)."""

    @T.prim_func
    def main(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((N,), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), dtype)
            B_local = T.alloc_fragment((block_N,), dtype)
            C_local = T.alloc_fragment((block_M, block_N), dtype)

            # Point form: the extent comes from the destination tile.
            T.copy(A[by * block_M, bx * block_N], A_shared)
            # Slice form.
            T.copy(B[bx * block_N:(bx + 1) * block_N], B_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = A_shared[i, j] + B_local[j]
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
