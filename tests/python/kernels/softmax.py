"""Row-wise softmax: Y[i, :] = softmax(X[i, :])."""

import tilelang.language as T

LOG2E = 1.4426950408889634


def softmax(M, N, block_M=16, use_exp2=True, dtype="float32", threads=128):
    """Each block owns block_M full rows. With use_exp2 the exponential is
    computed as exp2((x - max) * log2(e)), otherwise with T.exp."""
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                if use_exp2:
                    x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
                else:
                    x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M:(bx + 1) * block_M, :])

    return main
