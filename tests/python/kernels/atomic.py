"""Atomic accumulation across blocks."""

import tilelang.language as T


def atomic_total_sum(N, block=128, dtype="float32", threads=128):
    """Out[0] += sum(X): each block reduces its chunk and adds the partial sum
    atomically. Out must hold 0 before the launch."""

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Out: T.Tensor((1,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            x = T.alloc_fragment((block,), dtype)
            partial = T.alloc_fragment((1,), dtype)
            T.copy(X[bx * block], x)
            T.reduce_sum(x, partial, dim=0)
            # A one-element parallel loop: one thread of the block issues the
            # update.
            for i in T.Parallel(1):
                T.atomic_add(Out[i], partial[i])

    return main


def atomic_row_sum(M, N, block_M=16, block_N=32, dtype="float32", threads=128):
    """Out[i] += sum_j X[i, j]: blocks tile both dimensions; each adds its
    partial row sums with scalar atomics, guarding the row tail."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), dtype)
            row = T.alloc_fragment((block_M,), dtype)
            T.copy(X[by * block_M, bx * block_N], x)
            T.reduce_sum(x, row, dim=1)
            for i in T.Parallel(block_M):
                if by * block_M + i < M:
                    T.atomic_add(Out[by * block_M + i], row[i])

    return main


def splitk_matmul(M, N, K, split_k=4, block_M=32, block_N=32, block_K=32,
                  dtype="float32", accum_dtype="float32", threads=128):
    """Split-K GEMM: the K range is cut into ``split_k`` slices (grid z); each
    block multiplies its slice and adds the tile into C with the tile form of
    T.atomic_add. C must hold 0 before the launch. K must be divisible by
    split_k."""
    assert K % split_k == 0
    K_slice = K // split_k

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K_slice, block_K), num_stages=2):
                k0 = bz * K_slice + ko * block_K
                T.copy(A[by * block_M, k0], A_shared)
                T.copy(B[k0, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], C_local)

    return main


def atomic_add_lanes(M, N, lanes, copies=3, dtype="float32", offset=0, threads=64):
    """B[i, offset + j] += A[c, i, j] for c < copies, lanes consecutive elements at a time
    (T.atomic_addx2 / T.atomic_addx4) from a shared tile, one block per copy: the copies
    meet on B's elements. An odd offset misaligns every vector."""

    @T.prim_func
    def main(A: T.Tensor((copies, M, N), dtype), B: T.Tensor((M, N + offset), dtype)):
        with T.Kernel(copies, threads=threads) as c:
            S = T.alloc_shared((M, N), dtype)
            T.copy(A[c, :, :], S)
            for i, j in T.Parallel(M, N // lanes):
                if lanes == 2:
                    T.atomic_addx2(B[i, offset + j * 2], S[i, j * 2])
                else:
                    T.atomic_addx4(B[i, offset + j * 4], S[i, j * 4])

    return main
