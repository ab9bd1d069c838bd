"""Persistent kernels: a fixed number of blocks, each taking tiles in turn (T.Persistent)."""

import tilelang.language as T


def matmul_persistent(M, N, K, blocks, block_M=128, block_N=128, block_K=64, dtype="float16", out_dtype=None,
                      num_stages=3, threads=256, group_size=8, epilogue_shared=False, transpose_A=False,
                      transpose_B=False):
    """C = A @ B (A stored K x M when transpose_A, B stored N x K when transpose_B) with
    `blocks` blocks taking the output tiles in turn; with epilogue_shared the result goes out
    through a shared tile."""
    out_dtype = out_dtype or dtype
    A_shape = (K, M) if transpose_A else (M, K)
    A_tile = (block_K, block_M) if transpose_A else (block_M, block_K)
    B_shape = (N, K) if transpose_B else (K, N)
    B_tile = (block_N, block_K) if transpose_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(blocks, threads=threads) as block_id:
            A_shared = T.alloc_shared(A_tile, dtype)
            B_shared = T.alloc_shared(B_tile, dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            for bm, bn in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], blocks, block_id, group_size):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    if transpose_A:
                        T.copy(A[k * block_K, bm * block_M], A_shared)
                    else:
                        T.copy(A[bm * block_M, k * block_K], A_shared)
                    if transpose_B:
                        T.copy(B[bn * block_N, k * block_K], B_shared)
                    else:
                        T.copy(B[k * block_K, bn * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local, transpose_A=transpose_A, transpose_B=transpose_B)
                if epilogue_shared:
                    C_shared = T.alloc_shared((block_M, block_N), out_dtype)
                    T.copy(C_local, C_shared)
                    T.copy(C_shared, C[bm * block_M, bn * block_N])
                else:
                    T.copy(C_local, C[bm * block_M, bn * block_N])

    return main


def tile_visits(domain, blocks, group_size=8, threads=32):
    """Counts[t] += 1 for every tile t of a 1-, 2- or 3-D domain that a block visits, and
    Waves[t] = how many tiles the block had visited before: each tile must be visited
    exactly once, block b's k-th tile being tile k * blocks + b in the grouped order."""
    shape = tuple(domain)

    @T.macro
    def visit(Counts, Waves, t, w):
        for i in T.Parallel(1):
            Counts[t] = Counts[t] + 1
            Waves[t] = w[0]
        w[0] = w[0] + 1

    if len(shape) == 1:
        @T.prim_func
        def main(Counts: T.Tensor(shape, "int32"), Waves: T.Tensor(shape, "int32")):
            with T.Kernel(blocks, threads=threads) as block_id:
                w = T.alloc_local((1,), "int32")
                w[0] = 0
                for t0 in T.Persistent([shape[0]], blocks, block_id, group_size):
                    visit(Counts, Waves, t0, w)
    elif len(shape) == 2:
        @T.prim_func
        def main(Counts: T.Tensor(shape, "int32"), Waves: T.Tensor(shape, "int32")):
            with T.Kernel(blocks, threads=threads) as block_id:
                w = T.alloc_local((1,), "int32")
                w[0] = 0
                for t0, t1 in T.Persistent([shape[0], shape[1]], blocks, block_id, group_size):
                    visit(Counts, Waves, (t0, t1), w)
    else:
        @T.prim_func
        def main(Counts: T.Tensor(shape, "int32"), Waves: T.Tensor(shape, "int32")):
            with T.Kernel(blocks, threads=threads) as block_id:
                w = T.alloc_local((1,), "int32")
                w[0] = 0
                for t0, t1, t2 in T.Persistent([shape[0], shape[1], shape[2]], blocks, block_id, group_size):
                    visit(Counts, Waves, (t0, t1, t2), w)
    return main
