"""Randomised differential tests: tile sizes, pipeline stages, thread counts and problem
shapes (with tails) are drawn from a seeded generator, and every kernel is checked against
numpy in float64. On the CPU target this exercises the tile-level semantics; on CUDA the
drawn cases cover the mma.sync and SIMT gemm paths, the cp.async pipeline at every depth
and trip count, and reductions over the different fragment layouts.

TILELANG_RANDOM_CASES sets the number of draws per family (default 6); the seed of a
failing draw is in the test id, so a failure replays exactly."""
import os

import ml_dtypes
import numpy as np
import pytest

import tilelang

import kernels

CASES = int(os.environ.get("TILELANG_RANDOM_CASES", "6"))
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int8": np.int8,
      "float8_e4m3": ml_dtypes.float8_e4m3fn}


def _draw_gemm(seed):
    r = np.random.default_rng(seed)
    dtype = str(r.choice(["float32", "float16", "bfloat16", "float16", "bfloat16", "int8", "float8_e4m3"]))
    threads = int(r.choice([64, 128, 256]))
    block_M, block_N = int(r.choice([32, 64, 128])), int(r.choice([32, 64, 128]))
    block_K = int(r.choice([16, 32, 64]))
    stages = int(r.integers(1, 5))
    # Trip counts 0 (K smaller than nothing is impossible, so 1), 1, 2 and many.
    k_tiles = int(r.choice([1, 2, 3, 7]))
    K = k_tiles * block_K - int(r.choice([0, 0, 5]))
    M = int(r.integers(1, 3 * block_M))
    N = int(r.integers(1, 3 * block_N))
    ta, tb = bool(r.integers(0, 2)), bool(r.integers(0, 2))
    if dtype in ("int8", "float8_e4m3"):  # the tensor cores read 8-bit operands K-major
        ta, tb = bool(r.integers(0, 4) == 0), bool(r.integers(0, 4) != 0)
    acc = "int32" if dtype == "int8" else "float32"
    return dict(M=M, N=N, K=max(K, 1), block_M=block_M, block_N=block_N, block_K=block_K, in_dtype=dtype,
                out_dtype=acc, accum_dtype=acc, transpose_A=ta, transpose_B=tb, num_stages=stages,
                threads=threads)


@pytest.mark.parametrize("seed", range(CASES))
def test_random_gemm(target, seed):
    p = _draw_gemm(1000 + seed)
    kernel = tilelang.compile(kernels.gemm.matmul(**p), out_idx=[2], target=target)
    r = np.random.default_rng(seed)
    M, N, K = p["M"], p["N"], p["K"]
    lo, hi = (-128, 128) if p["in_dtype"] == "int8" else (-1, 1)
    draw = r.integers if p["in_dtype"] == "int8" else r.uniform
    a = draw(lo, hi, (K, M) if p["transpose_A"] else (M, K)).astype(NP[p["in_dtype"]])
    b = draw(lo, hi, (N, K) if p["transpose_B"] else (K, N)).astype(NP[p["in_dtype"]])
    c = np.asarray(kernel(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (a64.T if p["transpose_A"] else a64) @ (b64.T if p["transpose_B"] else b64)
    if p["in_dtype"] == "int8":  # exact in int32
        np.testing.assert_array_equal(c, ref.astype(np.int64), err_msg=str(p))
        return
    if p["in_dtype"].startswith("float8") and "wgmma" in kernel.get_lowering_report():
        # Hopper's float8 tensor cores accumulate in reduced precision (test_kernels).
        from test_kernels import assert_fp8_wgmma_close
        assert_fp8_wgmma_close(c, a64.T if p["transpose_A"] else a64, b64.T if p["transpose_B"] else b64)
        return
    # float32 inputs run as exact SIMT products; 16- and 8-bit products are exact in
    # float32, so only the accumulation order differs.
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=2e-4, err_msg=str(p))


@pytest.mark.parametrize("seed", range(CASES))
def test_random_reduction(target, seed):
    r = np.random.default_rng(2000 + seed)
    op = str(r.choice(["sum", "max", "min", "abssum", "absmax"]))
    dim = int(r.integers(0, 2))
    block = int(r.choice([8, 16, 32]))
    threads = int(r.choice([32, 64, 128, 256]))
    M, N = int(r.integers(1, 4 * block)), int(r.choice([16, 32, 64, 128]))
    clear = bool(r.integers(0, 2)) or op == "abssum"  # T.reduce_abssum always clears (as in TileLang)
    kernel = tilelang.compile(kernels.reduction.reduce_tile(M, N, op, dim, clear=clear, block=block, threads=threads),
                              target=target)
    x = r.uniform(-1, 1, (M, N)).astype(np.float32)
    out_shape = (N,) if dim == 0 else (M,)
    init = r.uniform(-1, 1, out_shape).astype(np.float32)
    out = np.zeros(out_shape, np.float32)
    kernel(x, init, out)
    f = {"sum": np.sum, "max": np.max, "min": np.min, "abssum": lambda v, axis: np.abs(v).sum(axis),
         "absmax": lambda v, axis: np.abs(v).max(axis)}[op]
    ref = f(x.astype(np.float64), axis=dim)
    if not clear:
        ref = {"sum": ref + init, "abssum": ref + init, "max": np.maximum(ref, init), "min": np.minimum(ref, init),
               "absmax": np.maximum(ref, init)}[op]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=f"{op} dim={dim} M={M} N={N} block={block} "
                                                                        f"threads={threads} clear={clear}")


@pytest.mark.parametrize("seed", range(CASES))
def test_random_parallel_loop(target, seed):
    r = np.random.default_rng(3000 + seed)
    block_M, block_N = int(r.choice([1, 3, 16, 64])), int(r.choice([2, 7, 32, 128]))
    threads = int(r.choice([32, 96, 128, 256]))
    M, N = int(r.integers(1, 3 * block_M + 2)), int(r.integers(1, 3 * block_N + 2))
    kernel = tilelang.compile(kernels.elementwise.add_broadcast_guarded(M, N, block_M, block_N, threads=threads),
                              out_idx=[2], target=target)
    a = r.uniform(-1, 1, (M, N)).astype(np.float32)
    b = r.uniform(-1, 1, (N,)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(a, b)), a + b[None, :], rtol=1e-6, atol=1e-6,
                               err_msg=f"M={M} N={N} block={block_M}x{block_N} threads={threads}")
