"""RMSNorm: Y[i, j] = X[i, j] / sqrt(mean_j(X[i, :]^2) + eps) * W[j]."""

import tilelang.language as T


def rms_norm(M, N, block_M=8, eps=1e-6, dtype="float", threads=128):
    """dtype "float" is the TileLang alias of float32; 16-bit dtypes are
    computed in float32 and rounded once on the way out."""
    accum_dtype = "float32"

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype),
        W: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_shared = T.alloc_shared((block_M, N), dtype)
            x = T.alloc_fragment((block_M, N), accum_dtype)
            x_sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            inv_rms = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M:(bx + 1) * block_M, :], X_shared)
            T.copy(X_shared, x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                x_sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x_sq, inv_rms, dim=1)
            for i in T.Parallel(block_M):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * inv_rms[i] * w[j]
            T.copy(x, Y[bx * block_M:(bx + 1) * block_M, :])

    return main
