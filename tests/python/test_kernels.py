"""Numerical tests of TileLang kernels against numpy, run on every target.

Every case builds a kernel from tests/python/kernels, compiles it once for the
``target`` fixture, runs it on random numpy arrays (fixed seeds) and compares
with a numpy reference computed in float64.

Tolerances (np.testing.assert_allclose, |out - ref| <= atol + rtol * |ref|):

* Exact (assert_array_equal): data movement (transpose), max/min reductions,
  selects, casts, and one rounding of an exactly computable result (an fp16
  sum of two fp16 values).
* float32: rtol=1e-5. atol is sized to the float32 rounding of the
  accumulation: 1e-6 to 1e-7 for results of a few operations; 1e-5 for sums
  of tens of terms (reductions, cumsum, attention); 1e-4 for GEMM (K up to 256)
  and atomics, where the order of additions differs from numpy's.
* 16-bit inputs, float32 results of a GEMM: rtol=1e-5, atol=1e-4. The tile
  operator semantics cast the inputs to the accumulator's dtype before the
  multiply-add, so every product of two fp16/bf16 values is exact in float32
  and only the accumulation rounds.
* 16-bit results: rtol=1e-2, atol=1e-2 (one fp16/bf16 rounding of the output,
  plus fp16 rounding of the probabilities in attention).
"""

import numpy as np
import pytest

import ml_dtypes
import tilelang
from tilelang import _C
import tilelang.language as T

import kernels
from sm90 import hopper_path_forced_off

NP_DTYPE = {
    "float": np.float32,
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int32": np.int32,
}

FP32_TOL = dict(rtol=1e-5, atol=1e-6)
HALF_TOL = dict(rtol=1e-2, atol=1e-2)


def _compile(func, target, out_idx=None):
    return tilelang.compile(func, out_idx=out_idx, target=target)


def _outputs(result):
    """The kernel's return value as a list of arrays."""
    if isinstance(result, (list, tuple)):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _uniform(rng, shape, dtype, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(NP_DTYPE[dtype])


def _normal(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(size=shape) * scale).astype(np.float32).astype(NP_DTYPE[dtype])


# ---------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "variant, dtype",
    [("guarded", "float32"), ("tiled", "float32"), ("tiled", "float16")],
)
def test_elementwise_add_broadcast(target, rng, variant, dtype):
    # 1000 x 300 with 128 x 128 tiles: both dimensions have a partial tile.
    M, N = 1000, 300
    builder = {
        "guarded": kernels.elementwise.add_broadcast_guarded,
        "tiled": kernels.elementwise.add_broadcast_tiled,
    }[variant]
    kernel = _compile(builder(M, N, 128, 128, dtype=dtype), target, out_idx=[2])
    a = _normal(rng, (M, N), dtype)
    b = _normal(rng, (N,), dtype)
    (c,) = _outputs(kernel(a, b))
    assert c.shape == (M, N)
    assert c.dtype == NP_DTYPE[dtype]
    # One rounding of an exact sum: numpy rounds the same way, so the results
    # agree bit for bit (in float32 and in float16).
    np.testing.assert_array_equal(c, a + b[None, :])

    source = kernel.get_kernel_source()
    assert isinstance(source, str) and source.strip()


def test_jit_factory_caches_kernels(target, rng):
    factory = tilelang.jit(out_idx=[-1], target=target)(kernels.elementwise.add_broadcast_tiled)
    first = factory(96, 80, 64, 32)
    again = factory(96, 80, 64, 32)
    assert first is again, "the same arguments must give back the same compiled kernel"
    a = _normal(rng, (96, 80), "float32")
    b = _normal(rng, (80,), "float32")
    (c,) = _outputs(first(a, b))
    np.testing.assert_array_equal(c, a + b[None, :])


# ---------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------

GEMM_SHAPES = [
    pytest.param(128, 128, 64, id="divisible"),
    # M, N, K all leave partial 64 x 64 x 32 tiles.
    pytest.param(200, 136, 72, id="ragged"),
]


def _gemm_reference(a, b, transpose_A, transpose_B):
    a64, b64 = _f64(a), _f64(b)
    if transpose_A:
        a64 = a64.T
    if transpose_B:
        b64 = b64.T
    return a64 @ b64


@pytest.mark.parametrize("M, N, K", GEMM_SHAPES)
@pytest.mark.parametrize("transpose_A, transpose_B", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["nn", "nt", "tn", "tt"])
def test_gemm_fp32(target, rng, M, N, K, transpose_A, transpose_B):
    func = kernels.gemm.matmul(M, N, K, 64, 64, 32, transpose_A=transpose_A, transpose_B=transpose_B)
    kernel = _compile(func, target, out_idx=[2])
    a = _uniform(rng, (K, M) if transpose_A else (M, K), "float32")
    b = _uniform(rng, (N, K) if transpose_B else (K, N), "float32")
    (c,) = _outputs(kernel(a, b))
    assert c.shape == (M, N) and c.dtype == np.float32
    np.testing.assert_allclose(c, _gemm_reference(a, b, transpose_A, transpose_B), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "in_dtype, out_dtype, transpose_B",
    [
        ("float16", "float32", False),
        ("float16", "float16", False),
        ("float16", "float16", True),
        ("bfloat16", "float32", False),
        ("bfloat16", "bfloat16", True),
    ],
)
def test_gemm_16bit(target, rng, in_dtype, out_dtype, transpose_B):
    M, N, K = 200, 136, 72
    func = kernels.gemm.matmul(M, N, K, 64, 64, 32, in_dtype=in_dtype, out_dtype=out_dtype,
                               accum_dtype="float32", transpose_B=transpose_B)
    kernel = _compile(func, target, out_idx=[2])
    a = _uniform(rng, (M, K), in_dtype)
    b = _uniform(rng, (N, K) if transpose_B else (K, N), in_dtype)
    (c,) = _outputs(kernel(a, b))
    assert c.shape == (M, N) and c.dtype == NP_DTYPE[out_dtype]
    ref = _gemm_reference(a, b, False, transpose_B)
    tol = dict(rtol=1e-5, atol=1e-4) if out_dtype == "float32" else HALF_TOL
    np.testing.assert_allclose(_f64(c), ref, **tol)


@pytest.mark.parametrize(
    "block_M, block_N, threads, transpose_B",
    [
        (16, 64, 256, True),   # a decode step's 16 x 64 scores on 8 warps: warp tiles of 16 x 8
        (16, 24, 32, False),   # one warp, three 8-column blocks: a pair and a single one
        (32, 40, 64, True),
    ],
)
def test_gemm_16bit_narrow_warp_tiles(target, rng, block_M, block_N, threads, transpose_B):
    """On CUDA (mma.sync) tiles whose columns do not split 16 to a warp take warp tiles
    8 columns wide; B's odd last block loads alone (ldmatrix.x2)."""
    M, N, K = 2 * block_M, 2 * block_N, 64
    func = kernels.gemm.matmul(M, N, K, block_M, block_N, 32, in_dtype="float16", out_dtype="float32",
                               accum_dtype="float32", transpose_B=transpose_B, threads=threads)
    kernel = _compile(func, target, out_idx=[2])
    if target.startswith("cuda"):
        assert "mma.sync m16n8k16" in kernel.get_lowering_report()
    a = _uniform(rng, (M, K), "float16")
    b = _uniform(rng, (N, K) if transpose_B else (K, N), "float16")
    (c,) = _outputs(kernel(a, b))
    np.testing.assert_allclose(c, _gemm_reference(a, b, False, transpose_B), rtol=1e-5, atol=1e-4)


def test_gemm_dynamic_m(target, rng):
    N, K = 72, 96
    func = kernels.gemm.matmul(T.dynamic("m"), N, K, 64, 64, 32)
    kernel = _compile(func, target, out_idx=[2])
    b = _uniform(rng, (K, N), "float32")
    for m in (1, 37, 130):
        a = _uniform(rng, (m, K), "float32")
        (c,) = _outputs(kernel(a, b))
        assert c.shape == (m, N)
        np.testing.assert_allclose(c, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("panel", [1, 3, 8])
def test_gemm_block_swizzle(target, rng, panel):
    """T.use_swizzle reorders the blocks (panels of 3 leave a short last one): every tile
    is still computed exactly once."""
    M, N, K = 7 * 32, 5 * 32, 64
    func = kernels.gemm.matmul(M, N, K, 32, 32, 32, in_dtype="float16", swizzle_panel=panel)
    kernel = _compile(func, target, out_idx=[2])
    a, b = _uniform(rng, (M, K), "float16"), _uniform(rng, (K, N), "float16")
    (c,) = _outputs(kernel(a, b))
    np.testing.assert_allclose(c, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-4)


def test_annotated_swizzle(target, rng):
    """A shared tile stored swizzled at the user's request (T.annotate_layout), written by
    rows and read by columns: every element lands where it is read back."""
    M, N = 64, 128

    @T.prim_func
    def transpose_swizzled(A: T.Tensor((M, N), "float16"), B: T.Tensor((N, M), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            S = T.alloc_shared((M, N), "float16")
            T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
            T.copy(A, S)
            for i, j in T.Parallel(N, M):
                B[i, j] = S[j, i]

    kernel = _compile(transpose_swizzled, target, out_idx=[1])
    a = _uniform(rng, (M, N), "float16")
    (b,) = _outputs(kernel(a))
    np.testing.assert_array_equal(b, a.T)


def test_gemm_epilogue_through_shared(target, rng):
    """The result goes out through a shared tile that takes the operand tiles' bytes once
    the K loop is over: the barrier between them must be there."""
    M, N, K = 256, 192, 160
    func = kernels.gemm.matmul(M, N, K, 128, 64, 32, in_dtype="float16", out_dtype="float16", num_stages=3,
                               epilogue_shared=True)
    kernel = _compile(func, target, out_idx=[2])
    a, b = _uniform(rng, (M, K), "float16"), _uniform(rng, (K, N), "float16")
    (c,) = _outputs(kernel(a, b))
    np.testing.assert_allclose(_f64(c), _f64(a) @ _f64(b), **HALF_TOL)


@pytest.mark.parametrize("in_dtype", ["int8", "float8_e4m3", "float8_e5m2"])
def test_gemm_8bit(target, rng, in_dtype):
    """8-bit inputs, B stored N x K (the layout the tensor cores read them in): int8
    accumulates exactly in int32; float8 products are exact in float32."""
    M, N, K = 160, 96, 192  # M does not divide the 128-row tile
    acc = "int32" if in_dtype == "int8" else "float32"
    func = kernels.gemm.matmul(M, N, K, 128, 64, 64, in_dtype=in_dtype, out_dtype=acc, accum_dtype=acc,
                               transpose_B=True, num_stages=3)
    kernel = _compile(func, target, out_idx=[2])
    if in_dtype == "int8":
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    else:
        np_t = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[in_dtype]
        a = _uniform(rng, (M, K), "float32").astype(np_t)
        b = _uniform(rng, (N, K), "float32").astype(np_t)
    (c,) = _outputs(kernel(a, b))
    ref = _f64(a) @ _f64(b).T
    if in_dtype == "int8":
        np.testing.assert_array_equal(c, ref.astype(np.int64))
    elif "wgmma" in kernel.get_lowering_report():
        assert_fp8_wgmma_close(c, a, b.T)
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def assert_fp8_wgmma_close(c, a, b):
    """c = a @ b (a: M x K, b: K x N) from Hopper's tensor cores, which add float8 products
    in less than float32 precision (the products are exact; the running sum keeps about 13
    bits past the leading one, as documented for DeepGEMM and CUTLASS): each element stays
    within 2^-10 of the sum of the absolute products, which a wrong product or a lost K
    step would far exceed."""
    ref = _f64(a) @ _f64(b)
    bound = np.abs(_f64(a)) @ np.abs(_f64(b)) * 2.0 ** -10 + 1e-6
    err = np.abs(_f64(c) - ref)
    assert (err <= bound).all(), f"max error / bound {float((err / bound).max()):.2f}"


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_gemm_pipeline_trip_counts(target, rng, num_stages):
    """T.Pipelined over ceildiv(k, 32) steps for a run-time k: trip counts 0, 1, 2 and many,
    each shorter or longer than the pipeline's depth, with a partial last step."""
    M, N = 64, 64
    func = kernels.gemm.matmul(M, N, T.dynamic("k"), 64, 64, 32, in_dtype="float16", num_stages=num_stages)
    kernel = _compile(func, target, out_idx=[2])
    for k in (0, 1, 32, 40, 64, 96, 300):
        a = _uniform(rng, (M, k), "float16")
        b = _uniform(rng, (k, N), "float16")
        (c,) = _outputs(kernel(a, b))
        np.testing.assert_allclose(c, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-4, err_msg=f"k={k}")


# ---------------------------------------------------------------------------
# Softmax and RMSNorm
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("use_exp2,block_M,threads", [(True, 16, 128), (False, 16, 128), (True, 1, 256)],
                         ids=["exp2", "exp", "one-row-tiles"])
def test_softmax(target, rng, use_exp2, block_M, threads):
    # 100 rows in tiles of 16: the last tile is partial. Tiles of one row slice
    # X[bx * 1:(bx + 1) * 1, :], whose extent only simplifies to 1.
    M, N = 100, 300
    kernel = _compile(kernels.softmax.softmax(M, N, block_M=block_M, use_exp2=use_exp2, threads=threads), target,
                      out_idx=[1])
    x = _normal(rng, (M, N), "float32", scale=3.0)
    (y,) = _outputs(kernel(x))
    x64 = _f64(x)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float", "float16"])
def test_rms_norm(target, rng, dtype):
    M, N, eps = 100, 256, 1e-6
    kernel = _compile(kernels.norm.rms_norm(M, N, block_M=8, eps=eps, dtype=dtype), target, out_idx=[2])
    x = _normal(rng, (M, N), dtype)
    w = _uniform(rng, (N,), dtype, 0.5, 1.5)
    (y,) = _outputs(kernel(x, w))
    assert y.dtype == NP_DTYPE[dtype]
    x64 = _f64(x)
    ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * _f64(w)[None, :]
    tol = FP32_TOL if dtype == "float" else HALF_TOL
    np.testing.assert_allclose(_f64(y), ref, **tol)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

REDUCE_CASES = [
    pytest.param(op, dim, clear, id=f"{op}-dim{dim}-{'clear' if clear else 'accumulate'}")
    for op in kernels.reduction.REDUCE_OPS
    for dim in (0, 1)
    # T.reduce_abssum has no `clear` argument in TileLang: it always clears.
    for clear in ((True,) if op == "abssum" else (True, False))
]


def _reduce_reference(x, init, op, dim, clear):
    x64 = _f64(x)
    red = {
        "sum": lambda: x64.sum(axis=dim),
        "max": lambda: x64.max(axis=dim),
        "min": lambda: x64.min(axis=dim),
        "abssum": lambda: np.abs(x64).sum(axis=dim),
        "absmax": lambda: np.abs(x64).max(axis=dim),
    }[op]()
    if clear:
        return red
    i64 = _f64(init)
    if op == "sum":
        return i64 + red
    if op == "min":
        return np.minimum(i64, red)
    return np.maximum(i64, red)  # max, absmax


@pytest.mark.parametrize("op, dim, clear", REDUCE_CASES)
def test_reduce(target, rng, op, dim, clear):
    # 40 rows, 56 columns, tiles of 16 along the kept dimension: both dims
    # end in a partial tile.
    M, N = 40, 56
    func = kernels.reduction.reduce_tile(M, N, op, dim, clear=clear, block=16)
    kernel = _compile(func, target, out_idx=[2])
    x = _normal(rng, (M, N), "float32")
    out_len = M if dim == 1 else N
    # Large enough that the initial value sometimes wins max/min.
    init = _normal(rng, (out_len,), "float32", scale=3.0)
    (out,) = _outputs(kernel(x, init))
    assert out.shape == (out_len,)
    ref = _reduce_reference(x, init, op, dim, clear)
    if op in ("max", "min", "absmax"):
        np.testing.assert_array_equal(_f64(out), ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Atomics
# ---------------------------------------------------------------------------

def test_atomic_add_total_sum(target, rng):
    N = 1000  # 8 blocks of 128, the last one partial
    kernel = _compile(kernels.atomic.atomic_total_sum(N, block=128), target)
    x = _normal(rng, (N,), "float32")
    out = np.zeros((1,), dtype=np.float32)
    kernel(x, out)
    np.testing.assert_allclose(out, [_f64(x).sum()], rtol=1e-5, atol=1e-4)


def test_atomic_add_row_sums(target, rng):
    M, N = 100, 200  # 16 x 32 tiles: partial tiles in both dimensions
    kernel = _compile(kernels.atomic.atomic_row_sum(M, N, block_M=16, block_N=32), target)
    x = _normal(rng, (M, N), "float32")
    out = np.zeros((M,), dtype=np.float32)
    kernel(x, out)
    np.testing.assert_allclose(out, _f64(x).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "lanes, dtype, offset",
    [(2, "float32", 0), (4, "float32", 0), (4, "float32", 1), (2, "float16", 0), (2, "bfloat16", 1)],
    ids=["x2-f32", "x4-f32", "x4-f32-misaligned", "x2-f16", "x2-bf16-misaligned"])
def test_atomic_add_lanes(target, rng, lanes, dtype, offset):
    """T.atomic_addx2 / x4: consecutive elements each added atomically by three blocks (on
    CUDA one vector atomic where aligned, an atomic per element where not)."""
    if target.startswith("webgpu") and dtype != "float32":
        pytest.skip("WGSL's atomics are 32-bit")
    M, N, copies = 16, 32, 3
    kernel = _compile(kernels.atomic.atomic_add_lanes(M, N, lanes, copies, dtype, offset), target)
    a = _uniform(rng, (copies, M, N), dtype)
    b = _uniform(rng, (M, N + offset), dtype)
    want = _f64(b).copy()
    want[:, offset:] += _f64(a).sum(axis=0)
    kernel(a, b)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_f64(b), want, **tol)


def test_atomic_add_lanes_needs_elements():
    """The destination and the value are single elements, the first of their lanes."""
    with pytest.raises(tilelang.errors.TileLangTypeError,
                       match=r"T.atomic_addx2: the destination must be one buffer element, the first of 2 "
                             r"consecutive ones, got Region") as e:
        @T.prim_func
        def bad(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32):
                T.atomic_addx2(B[0:2, 0], A[0, 0])
    assert "test_kernels.py" in str(e.value) and "T.atomic_addx2(B[0:2, 0], A[0, 0])" in str(e.value)


@pytest.mark.parametrize("M, N", [(64, 64), (100, 72)], ids=["divisible", "ragged"])
def test_atomic_add_tile_splitk(target, rng, M, N):
    K, split_k = 256, 4
    func = kernels.atomic.splitk_matmul(M, N, K, split_k=split_k, block_M=32, block_N=32, block_K=32)
    kernel = _compile(func, target)
    a = _uniform(rng, (M, K), "float32")
    b = _uniform(rng, (K, N), "float32")
    c = np.zeros((M, N), dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, _f64(a) @ _f64(b), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------
# Cumulative sum
# ---------------------------------------------------------------------------

def _cumsum_reference(x, dim, reverse):
    x64 = _f64(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x64, axis=dim), axis=dim), axis=dim)
    return np.cumsum(x64, axis=dim)


@pytest.mark.parametrize("scope", ["fragment", "shared"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_cumsum(target, rng, scope, dim, reverse):
    M, N = 40, 48  # the dimension split into tiles of 16 ends in a partial tile
    if dim == 0:
        M, N = 48, 40
    func = kernels.scan.cumsum_tile(M, N, dim, reverse=reverse, scope=scope, block=16)
    kernel = _compile(func, target, out_idx=[1])
    x = _normal(rng, (M, N), "float32")
    (y,) = _outputs(kernel(x))
    np.testing.assert_allclose(y, _cumsum_reference(x, dim, reverse), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Transpose
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_transpose_through_shared(target, rng, dtype):
    M, N = 100, 70  # 32 x 32 tiles: partial tiles in both dimensions
    kernel = _compile(kernels.transpose.transpose(M, N, 32, 32, dtype=dtype), target, out_idx=[1])
    a = _normal(rng, (M, N), dtype)
    (b,) = _outputs(kernel(a))
    assert b.shape == (N, M)
    np.testing.assert_array_equal(b, a.T)


# ---------------------------------------------------------------------------
# FlashAttention forward
# ---------------------------------------------------------------------------

def _attention_reference(q, k, v, is_causal):
    q64, k64, v64 = _f64(q), _f64(k), _f64(v)
    dim = q64.shape[-1]
    scores = np.einsum("bqhd,bkhd->bhqk", q64, k64) / np.sqrt(dim)
    if is_causal:
        seq = q64.shape[1]
        allowed = np.tril(np.ones((seq, seq), dtype=bool))
        scores = np.where(allowed[None, None], scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v64)


@pytest.mark.parametrize(
    "batch, heads, seq_len, dim, is_causal, dtype",
    [
        pytest.param(1, 2, 128, 64, False, "float32", id="fp32"),
        pytest.param(2, 2, 128, 64, True, "float32", id="fp32-causal"),
        # 100 is not a multiple of the 64-wide query and key tiles.
        pytest.param(1, 2, 100, 64, False, "float32", id="fp32-ragged"),
        pytest.param(1, 2, 100, 64, True, "float32", id="fp32-ragged-causal"),
        pytest.param(2, 2, 128, 64, False, "float16", id="fp16"),
        pytest.param(1, 2, 256, 64, True, "float16", id="fp16-causal"),
    ],
)
def test_flash_attention_fwd(target, rng, batch, heads, seq_len, dim, is_causal, dtype):
    func = kernels.attention.flash_attention_fwd(batch, heads, seq_len, dim, is_causal,
                                                 block_M=64, block_N=64, dtype=dtype)
    kernel = _compile(func, target, out_idx=[3])
    shape = (batch, seq_len, heads, dim)
    q = _normal(rng, shape, dtype)
    k = _normal(rng, shape, dtype)
    v = _normal(rng, shape, dtype)
    (o,) = _outputs(kernel(q, k, v))
    assert o.shape == shape and o.dtype == NP_DTYPE[dtype]
    ref = _attention_reference(q, k, v, is_causal)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else HALF_TOL
    np.testing.assert_allclose(_f64(o), ref, **tol)


@pytest.mark.parametrize("tile_order", ["by_head", "longest_first", "head_groups"])
def test_flash_attention_causal_tile_orders(target, rng, tile_order):
    """Every launch order of the causal query tiles computes every tile (3 of 64 rows, the
    last one partial) of every head (head_groups: the 6 (batch, head) pairs in one group)."""
    shape = (2, 160, 3, 64)
    func = kernels.attention.flash_attention_fwd(*shape[:1], shape[2], shape[1], shape[3], True, block_M=64,
                                                 block_N=64, dtype="float32", tile_order=tile_order)
    kernel = _compile(func, target, out_idx=[3])
    q, k, v = (_normal(rng, shape, "float32") for _ in range(3))
    (o,) = _outputs(kernel(q, k, v))
    np.testing.assert_allclose(_f64(o), _attention_reference(q, k, v, True), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Dynamic shapes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("maker", ["dynamic", "symbolic"])
def test_dynamic_leading_dim(target, rng, maker):
    N, alpha, beta = 24, 2.0, 1.0
    func = kernels.dynamic.scale_shift(N, alpha=alpha, beta=beta, block_M=64, maker=maker)
    kernel = _compile(func, target, out_idx=[1])
    source_before = kernel.get_kernel_source()
    for m in (1, 37, 256, 1000):
        x = _normal(rng, (m, N), "float32")
        (y,) = _outputs(kernel(x))
        assert y.shape == (m, N)
        # x * 2 + 1 is exact in float32 for these magnitudes.
        np.testing.assert_allclose(y, _f64(x) * alpha + beta, **FP32_TOL)
    # One compiled kernel serves every size: its source did not change.
    assert kernel.get_kernel_source() == source_before


def test_dynamic_jit_factory_compiles_once(target, rng):
    factory = tilelang.jit(out_idx=[1], target=target)(kernels.dynamic.scale_shift)
    kernel = factory(16)
    for m in (5, 300):
        assert factory(16) is kernel
        x = _normal(rng, (m, 16), "float32")
        (y,) = _outputs(kernel(x))
        np.testing.assert_allclose(y, _f64(x) * 2.0 + 1.0, **FP32_TOL)


# ---------------------------------------------------------------------------
# Macros, Python metaprogramming, scalar code
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_macro_closure_and_python_loop(target, rng, dtype):
    M, N = 70, 50  # 32 x 32 tiles: partial tiles in both dimensions
    coeffs = [0.5, -1.0, 2.0, 0.25]
    alpha = 1.5
    func = kernels.meta.polynomial(M, N, coeffs, alpha, dtype=dtype)
    kernel = _compile(func, target, out_idx=[1])
    x = _uniform(rng, (M, N), dtype, -2.0, 2.0)
    (y,) = _outputs(kernel(x))
    assert y.dtype == NP_DTYPE[dtype]
    ref = alpha * np.polyval(coeffs, _f64(x))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else HALF_TOL
    np.testing.assert_allclose(_f64(y), ref, **tol)


def test_alloc_var_and_scalar_loops(target, rng):
    M, N, block_M = 37, 50, 4  # N is not a multiple of the unroll factor 4
    kernel = _compile(kernels.meta.row_dot(M, N, block_M=block_M, unroll=4), target, out_idx=[2, 3])
    a = _normal(rng, (M, N), "float32")
    x = _normal(rng, (N,), "float32")
    y, npos = _outputs(kernel(a, x))
    np.testing.assert_allclose(y, _f64(a) @ _f64(x), rtol=1e-5, atol=1e-5)
    positive = (a * x[None, :] > 0).sum(axis=1)
    n_blocks = (M + block_M - 1) // block_M
    expected = np.array([positive[b * block_M:(b + 1) * block_M].sum() for b in range(n_blocks)],
                        dtype=np.int32)
    assert npos.dtype == np.int32
    np.testing.assert_array_equal(npos, expected)


def test_if_then_else_cast_min_max(target, rng):
    M, N, lo, hi = 50, 40, -0.5, 0.75
    kernel = _compile(kernels.meta.select_cast_clamp(M, N, lo, hi, negative_slope=0.125), target,
                      out_idx=[1, 2, 3])
    x = _normal(rng, (M, N), "float32")
    leaky, clamped, quant = _outputs(kernel(x))
    np.testing.assert_array_equal(leaky, np.where(x > 0, x, x * np.float32(0.125)))
    np.testing.assert_array_equal(clamped, np.clip(x, np.float32(lo), np.float32(hi)))
    assert quant.dtype == np.int32
    np.testing.assert_array_equal(quant, (x * np.float32(8.0)).astype(np.int32))


def test_infinity_and_min_value(target, rng):
    M, N = 21, 33
    kernel = _compile(kernels.meta.row_extrema(M, N, block_M=8), target, out_idx=[1, 2])
    x = _normal(rng, (M, N), "float32", scale=100.0)
    row_max, row_min = _outputs(kernel(x))
    np.testing.assert_array_equal(row_max, x.max(axis=1))
    np.testing.assert_array_equal(row_min, x.min(axis=1))


# ---------------------------------------------------------------------------
# torch tensors as inputs
# ---------------------------------------------------------------------------

def _import_torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed; this case checks torch CPU tensors as kernel inputs")
    return torch


def test_torch_cpu_tensors(target, rng):
    torch = _import_torch()
    if target != "cpu":
        pytest.skip("this case passes torch CPU tensors, which only the cpu target accepts")
    M, N, K = 200, 136, 72
    gemm = _compile(kernels.gemm.matmul(M, N, K, 64, 64, 32), target, out_idx=[2])
    a = torch.from_numpy(_uniform(rng, (M, K), "float32"))
    b = torch.from_numpy(_uniform(rng, (K, N), "float32"))
    c = gemm(a, b)
    assert isinstance(c, torch.Tensor), "outputs are allocated by the library of the inputs"
    assert tuple(c.shape) == (M, N) and c.dtype == torch.float32
    np.testing.assert_allclose(c.numpy(), _f64(a.numpy()) @ _f64(b.numpy()), rtol=1e-5, atol=1e-4)

    add = _compile(kernels.elementwise.add_broadcast_tiled(1000, 300, 128, 128, dtype="float16"),
                   target, out_idx=[2])
    x = torch.from_numpy(_normal(rng, (1000, 300), "float16"))
    y = torch.from_numpy(_normal(rng, (300,), "float16"))
    z = add(x, y)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.float16
    np.testing.assert_array_equal(z.numpy(), x.numpy() + y.numpy()[None, :])


def test_lowering_report(target):
    """On CUDA the report ends with what the binary uses: registers, spills, shared memory."""
    kernel = _compile(kernels.gemm.matmul(256, 256, 128, 128, 128, 32, in_dtype="float16", num_stages=3), target,
                      out_idx=[2])
    report = kernel.get_lowering_report()
    if target.startswith("cuda") and _C.cuda_device_arch(0) == "sm_90a" and hopper_path_forced_off():
        assert "registers, no spills" in report  # the path the forced switches leave
    elif target.startswith("cuda") and _C.cuda_device_arch(0) == "sm_90a":
        # Hopper: wgmma on tiles a producer warpgroup loads by TMA (the block grows by 128).
        assert "wgmma m64n128k16" in report and "pipelined by a TMA producer warpgroup" in report
        assert "main_kernel: 256x1x1 threads" in report and "registers, no spills" in report
        # The float32 result (64 KB) leaves by TMA store through a staging tile that takes
        # the pipeline's 48 KB once the loop is over, and 16 KB more.
        assert "through a shared tile of its own (65536 bytes), then by TMA store" in report
        assert "shared memory 65536 bytes dynamic" in report
    elif target.startswith("cuda"):
        assert "mma.sync m16n8k16" in report and "pipelined: 2 copies ahead into 3 buffers" in report
        assert "main_kernel: 128x1x1 threads" in report and "registers, no spills" in report
        assert "shared memory 49152 bytes dynamic" in report
    elif target == "webgpu":
        assert "SIMT multiply-adds (target webgpu has no tensor-core path)" in report
    else:
        assert report == ""  # the CPU back end decides nothing worth reporting yet


def test_cuda_dlpack_producer(target, rng):
    """Any DLPack producer of CUDA memory is accepted (read through torch, zero-copy); the
    output comes back as a torch tensor on the same device."""
    if not target.startswith("cuda"):
        pytest.skip("CUDA DLPack tensors need a CUDA target")
    torch = pytest.importorskip("torch")

    class Capsule:  # exposes only the DLPack protocol of a CUDA tensor
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None, **kwargs):
            return self.t.__dlpack__(stream=stream) if stream is not None else self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    M, N = 100, 300
    kernel = _compile(kernels.softmax.softmax(M, N, block_M=16), target, out_idx=[1])
    x = torch.from_numpy(_normal(rng, (M, N), "float32", scale=3.0)).cuda()
    y = kernel(Capsule(x))
    assert isinstance(y, torch.Tensor) and y.device == x.device
    np.testing.assert_allclose(y.cpu().numpy(), torch.softmax(x.double(), dim=1).cpu().numpy(), rtol=1e-5,
                               atol=1e-7)
