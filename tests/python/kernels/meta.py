"""Python-level metaprogramming and scalar-language features inside kernels:
T.macro, closure constants, Python loops unrolled while the kernel is built,
Python `if` on dtype strings, T.alloc_var, T.serial / T.unroll / range,
T.if_then_else, T.cast, T.max / T.min, T.infinity and T.min_value."""

import tilelang.language as T

# dtype names used in kernel signatures
F32 = "float32"
I32 = "int32"


def polynomial(M, N, coeffs, alpha, dtype="float32", block_M=32, block_N=32, threads=128):
    """Y = alpha * polyval(coeffs, X) (coeffs highest degree first, as numpy).

    * ``coeffs`` and ``alpha`` are closure constants;
    * the Horner steps come from a Python ``for`` over the coefficient list, so
      the kernel holds one parallel loop per coefficient;
    * a T.macro wraps the polynomial evaluation;
    * a Python ``if`` on the dtype string chooses how the input is widened to
      float32.
    """
    coeffs = [float(c) for c in coeffs]
    compute_dtype = "float32"

    @T.macro
    def polyval_tile(dst, src):
        for i, j in T.Parallel(block_M, block_N):
            dst[i, j] = coeffs[0]
        for c in coeffs[1:]:
            for i, j in T.Parallel(block_M, block_N):
                dst[i, j] = dst[i, j] * src[i, j] + c

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), compute_dtype)
            y = T.alloc_fragment((block_M, block_N), compute_dtype)
            if dtype == compute_dtype:
                T.copy(X[by * block_M, bx * block_N], x)
            else:
                x_in = T.alloc_shared((block_M, block_N), dtype)
                T.copy(X[by * block_M, bx * block_N], x_in)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.cast(x_in[i, j], compute_dtype)
            polyval_tile(y, x)
            for i, j in T.Parallel(block_M, block_N):
                y[i, j] = y[i, j] * alpha
            T.copy(y, Y[by * block_M, bx * block_N])

    return main


def row_dot(M, N, block_M=4, unroll=4):
    """y = A @ x written as scalar code: T.alloc_var accumulators, T.serial,
    T.unroll and range loops. Also counts, per block, the positive products
    with an int32 T.alloc_var initialised through ``init``.

    threads=1 because the body is scalar code (no tile operators)."""
    main_len = N - N % unroll
    n_blocks = (M + block_M - 1) // block_M

    @T.prim_func
    def main(
        A: T.Tensor((M, N), F32),
        x: T.Tensor((N,), F32),
        y: T.Tensor((M,), F32),
        npos: T.Tensor((n_blocks,), I32),
    ):
        with T.Kernel(n_blocks, threads=1) as bx:
            acc = T.alloc_var("float32")
            count = T.alloc_var("int32", init=0)
            for r in T.serial(block_M):
                row = bx * block_M + r
                if row < M:
                    acc[0] = 0.0
                    for k0 in range(main_len // unroll):
                        for u in T.unroll(unroll):
                            acc[0] += A[row, k0 * unroll + u] * x[k0 * unroll + u]
                    for k in T.serial(main_len, N):
                        acc[0] += A[row, k] * x[k]
                    for k in range(N):
                        if A[row, k] * x[k] > 0:
                            count[0] += 1
                    y[row] = acc[0]
            npos[bx] = count[0]

    return main


def select_cast_clamp(M, N, lo, hi, negative_slope=0.125, block_M=16, threads=128):
    """Element-wise selects and casts:
        Leaky   = x if x > 0 else negative_slope * x      (T.if_then_else)
        Clamped = max(min(x, hi), lo)                      (T.max / T.min)
        Quant   = int32(x * 8), truncated toward zero      (T.cast)
    """

    @T.prim_func
    def main(
        X: T.Tensor((M, N), F32),
        Leaky: T.Tensor((M, N), F32),
        Clamped: T.Tensor((M, N), F32),
        Quant: T.Tensor((M, N), I32),
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, N):
                row = bx * block_M + i
                if row < M:
                    v = X[row, j]
                    Leaky[row, j] = T.if_then_else(v > 0, v, v * negative_slope)
                    Clamped[row, j] = T.max(T.min(v, hi), lo)
                    Quant[row, j] = T.cast(v * 8.0, "int32")

    return main


def row_extrema(M, N, block_M=8):
    """Row max and min with scalar loops whose accumulators start at
    T.min_value(float32) and T.infinity(float32)."""

    @T.prim_func
    def main(
        X: T.Tensor((M, N), F32),
        RowMax: T.Tensor((M,), F32),
        RowMin: T.Tensor((M,), F32),
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=1) as bx:
            hi = T.alloc_var("float32")
            lo = T.alloc_var("float32")
            for r in T.serial(block_M):
                row = bx * block_M + r
                if row < M:
                    hi[0] = T.min_value("float32")
                    lo[0] = T.infinity("float32")
                    for j in T.serial(N):
                        hi[0] = T.max(hi[0], X[row, j])
                        lo[0] = T.min(lo[0], X[row, j])
                    RowMax[row] = hi[0]
                    RowMin[row] = lo[0]

    return main
