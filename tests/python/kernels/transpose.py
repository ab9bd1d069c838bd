"""Matrix transpose through on-chip memory: B = A^T."""

import tilelang.language as T


def transpose(M, N, block_M=32, block_N=32, dtype="float32", threads=128):
    """Load an A tile into shared memory, read it transposed in a parallel loop
    into a (block_N, block_M) tile, and store that tile into B."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), dtype)
            tile_t = T.alloc_fragment((block_N, block_M), dtype)
            T.copy(A[by * block_M, bx * block_N], tile)
            for j, i in T.Parallel(block_N, block_M):
                tile_t[j, i] = tile[i, j]
            T.copy(tile_t, B[bx * block_N, by * block_M])

    return main
