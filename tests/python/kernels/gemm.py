"""Tiled matrix multiplication, C = op(A) @ op(B)."""

import tilelang.language as T


def matmul(
    M,
    N,
    K,
    block_M=64,
    block_N=64,
    block_K=32,
    in_dtype="float32",
    out_dtype="float32",
    accum_dtype="float32",
    transpose_A=False,
    transpose_B=False,
    num_stages=2,
    threads=128,
    epilogue_shared=False,
    swizzle_panel=0,
):
    """A is stored (K, M) when transpose_A, else (M, K); B is stored (N, K)
    when transpose_B, else (K, N). M may be a T.dynamic variable. With
    epilogue_shared the result goes out through a shared tile (which can take
    the bytes of the operand tiles once the K loop is over). swizzle_panel > 0
    launches the blocks panel by panel (T.use_swizzle)."""
    A_shape = (K, M) if transpose_A else (M, K)
    B_shape = (N, K) if transpose_B else (K, N)
    A_tile = (block_K, block_M) if transpose_A else (block_M, block_K)
    B_tile = (block_N, block_K) if transpose_B else (block_K, block_N)

    @T.prim_func
    def main(
        A: T.Tensor(A_shape, in_dtype),
        B: T.Tensor(B_shape, in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if swizzle_panel:
                T.use_swizzle(swizzle_panel)
            A_shared = T.alloc_shared(A_tile, in_dtype)
            B_shared = T.alloc_shared(B_tile, in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # transpose_A / transpose_B are Python values: only one branch
                # of each `if` becomes part of the kernel.
                if transpose_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if transpose_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=transpose_A, transpose_B=transpose_B)
            if epilogue_shared:
                C_shared = T.alloc_shared((block_M, block_N), out_dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main
