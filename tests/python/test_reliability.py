"""Programs and calls that used to give wrong answers, crash or be accepted silently.

Wrong-answer cases are compared with numpy on random inputs (sizes with tails) on every
target of the suite's fixture; rejected input is checked for its exception type, the
message's fragment and, for compile errors, the file:line of the offending statement
(found through the marker comment ``<<err:NAME>>`` on it).
"""
import os
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import (TileLangBoundsError, TileLangShapeError, TileLangSyntaxError, TileLangTypeError,
                             TileLangUnsupportedError)

F32 = "float32"
CUDA = "cuda -arch=sm_90a"

with open(os.path.abspath(__file__), encoding="utf-8") as _f:
    _SOURCE_LINES = _f.read().splitlines()


def marker_line(name):
    token = "<<err:" + name + ">>"
    hits = [n for n, text in enumerate(_SOURCE_LINES, start=1) if token in text]
    assert len(hits) == 1, f"marker {token} must appear exactly once"
    return hits[0]


def check_located(err, marker, *pieces):
    """err's message starts with this file's name and the marker's line and contains each piece."""
    msg = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
    m = re.match(r"(.+?):(\d+):", msg)
    assert m, f"message does not start with '<file>:<line>:': {msg!r}"
    assert os.path.basename(m.group(1)) == os.path.basename(__file__), msg
    assert int(m.group(2)) == marker_line(marker), msg
    for p in pieces:
        assert p.lower() in msg.lower(), f"{p!r} not in {msg!r}"


def _nvrtc_reason():
    try:
        _C.nvrtc_id()
        return None
    except Exception as e:  # the library is missing or unusable
        return str(e).splitlines()[0]


# ---------------------------------------------------------------- 1. copy regions at a point

def run_into_nan(k, *inputs):
    """k(*inputs, out) with out filled with NaN first, so that an element the kernel does
    not write cannot match by chance (np.empty may hand back a previous result's memory)."""
    out = np.full_like(inputs[0], np.nan)
    k(*inputs, out)
    return out


def copy_tile_2d(M, N, tm, tn, scope):
    """Out = A, through tiles of shape (tm, tn) placed by T.copy(A[i, j], tile)."""
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(A: T.Tensor((M, N), F32), Out: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), threads=32) as (bx, by):
            t = alloc((tm, tn), F32)
            T.copy(A[by * tm, bx * tn], t)
            T.copy(t, Out[by * tm, bx * tn])

    return main


def copy_tile_3d(B, M, N, tb, tm, tn):
    @T.prim_func
    def main(A: T.Tensor((B, M, N), F32), Out: T.Tensor((B, M, N), F32)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), T.ceildiv(B, tb), threads=32) as (bx, by, bz):
            t = T.alloc_shared((tb, tm, tn), F32)
            T.copy(A[bz * tb, by * tm, bx * tn], t)
            T.copy(t, Out[bz * tb, by * tm, bx * tn])

    return main


def copy_tile_into_4d(H, B, M, N):
    """A (4, 1, 8) tile at a point of a 4-D tensor: the region pads a leading 1."""
    @T.prim_func
    def main(A: T.Tensor((H, B, M, N), F32), Out: T.Tensor((H, B, M, N), F32)):
        with T.Kernel(T.ceildiv(N, 8), M, T.ceildiv(B, 4) * H, threads=32) as (bx, by, bz):
            h = bz // T.ceildiv(B, 4)
            b = bz % T.ceildiv(B, 4)
            t = T.alloc_shared((4, 1, 8), F32)
            T.copy(A[h, b * 4, by, bx * 8], t)
            T.copy(t, Out[h, b * 4, by, bx * 8])

    return main


def column_scale(M, N):
    """A column computed in a (8, 1) fragment and stored through a slice region and a point."""
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), Out: T.Tensor((M, N), F32)):
        with T.Kernel(N, T.ceildiv(M, 8), threads=32) as (bx, by):
            s = T.alloc_shared((8, 4), F32)
            f = T.alloc_fragment((8, 1), F32)
            T.clear(s)
            T.copy(A[by * 8, bx], s[0:8, 2])
            for i, j in T.Parallel(8, 1):
                f[i, j] = s[i, 2] * 3.0
            T.copy(f, Out[by * 8, bx])

    return main


@pytest.mark.parametrize("scope", ["shared", "fragment"])
@pytest.mark.parametrize("tm,tn", [(8, 1), (1, 8), (4, 1), (16, 1)])
def test_copy_at_a_point_takes_the_tile_extents_in_order(target, rng, scope, tm, tn):
    M, N = 37, 21
    k = tilelang.compile(copy_tile_2d(M, N, tm, tn, scope), target=target)
    a = rng.standard_normal((M, N)).astype(np.float32)
    np.testing.assert_array_equal(run_into_nan(k, a), a)


@pytest.mark.parametrize("tb,tm,tn", [(4, 1, 8), (1, 8, 1), (2, 1, 1), (4, 8, 1)])
def test_copy_at_a_point_of_a_3d_tensor(target, rng, tb, tm, tn):
    B, M, N = 9, 11, 19
    k = tilelang.compile(copy_tile_3d(B, M, N, tb, tm, tn), target=target)
    a = rng.standard_normal((B, M, N)).astype(np.float32)
    np.testing.assert_array_equal(run_into_nan(k, a), a)


def test_copy_of_a_lower_rank_tile_pads_leading_unit_extents(target, rng):
    H, B, M, N = 2, 6, 3, 13
    k = tilelang.compile(copy_tile_into_4d(H, B, M, N), target=target)
    a = rng.standard_normal((H, B, M, N)).astype(np.float32)
    np.testing.assert_array_equal(run_into_nan(k, a), a)


def test_copy_of_a_column_through_slices_and_fragments(target, rng):
    M, N = 29, 5
    k = tilelang.compile(column_scale(M, N), target=target)
    a = rng.standard_normal((M, N)).astype(np.float32)
    np.testing.assert_allclose(run_into_nan(k, a), a * 3.0, rtol=1e-6)


def test_copy_region_rank_that_cannot_fit_is_a_shape_error():
    with pytest.raises(TileLangShapeError) as e:
        @T.prim_func
        def main(A: T.Tensor((64,), F32)):
            with T.Kernel(1, threads=32):
                t = T.alloc_shared((4, 16), F32)
                T.copy(A[0], t)  # <<err:copy_rank>>
    check_located(e.value, "copy_rank", "starts a region of rank 1", "4 x 16")


# ---------------------------------------------------------------- 2. return in a kernel

def test_return_inside_a_kernel_is_a_syntax_error():
    with pytest.raises(TileLangSyntaxError) as e:
        @T.prim_func
        def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    B[i] = A[i]
                return  # <<err:return_kernel>>
    check_located(e.value, "return_kernel", "'return' inside a kernel body")


def test_return_inside_a_branch_on_a_tensor_value_is_a_syntax_error():
    with pytest.raises(TileLangSyntaxError) as e:
        @T.prim_func
        def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=128):
                if A[0] > 0:
                    return  # <<err:return_branch>>
                for i in T.Parallel(128):
                    B[i] = A[i]
    check_located(e.value, "return_branch", "'return' inside a kernel body")


def test_return_inside_a_macro_branch_is_a_syntax_error():
    @T.macro
    def guarded_copy(A, B):
        if A[0] > 0:
            return  # <<err:return_macro>>
        for i in T.Parallel(128):
            B[i] = A[i]

    with pytest.raises(TileLangSyntaxError) as e:
        @T.prim_func
        def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=128):
                guarded_copy(A, B)
    check_located(e.value, "return_macro", "'return' inside a kernel body")


def test_a_macro_still_returns_a_value(target):
    @T.macro
    def doubled(x):
        return x * 2.0

    @T.prim_func
    def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = doubled(A[i])

    k = tilelang.compile(main, out_idx=[1], target=target)
    a = np.arange(128, dtype=np.float32)
    np.testing.assert_array_equal(k(a), 2 * a)


# ---------------------------------------------------------------- 3. launch shapes and extents

def launch(threads, extent):
    @T.prim_func
    def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
        with T.Kernel(1, threads=threads):  # <<err:launch_kernel>>
            for i in T.Parallel(extent):  # <<err:launch_parallel>>
                B[i] = A[i]

    return main


@pytest.mark.parametrize("threads", [0, -32, [32, 0]])
def test_threads_below_one_is_a_shape_error(target, threads):
    func = launch(threads, 128)
    with pytest.raises(TileLangShapeError) as e:
        tilelang.compile(func, target=target)
    check_located(e.value, "launch_kernel", "threads", "at least one thread")
    with pytest.raises(TileLangShapeError, match="at least one thread"):
        tilelang.lower(func, target=CUDA)


@pytest.mark.parametrize("extent", [0, -4])
def test_parallel_extent_below_one_is_a_shape_error(target, extent):
    func = launch(128, extent)
    with pytest.raises(TileLangShapeError) as e:
        tilelang.compile(func, target=target)
    check_located(e.value, "launch_parallel", f"T.Parallel extent of 'i' is {extent}")
    with pytest.raises(TileLangShapeError, match="T.Parallel extent"):
        tilelang.lower(func, target=CUDA)


@pytest.mark.parametrize("threads,what", [(128.5, "128.5 (float)"), ("n", "a kernel value"), (True, "True")])
def test_threads_that_are_not_ints_are_a_type_error(threads, what):
    with pytest.raises(TileLangTypeError) as e:
        @T.prim_func
        def main(A: T.Tensor((128,), F32), n: T.int32):
            with T.Kernel(1, threads=n if threads == "n" else threads):  # <<err:threads_type>>
                A[0] = 1.0
    check_located(e.value, "threads_type", "threads must be Python ints", what)


# ---------------------------------------------------------------- 5. NaN through max and min

def nan_kernel(M, N, dtype=F32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), Mx: T.Tensor((M,), dtype),
             Mn: T.Tensor((M,), dtype), E: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
            a = T.alloc_fragment((16, N), dtype)
            mx = T.alloc_fragment((16,), dtype)
            mn = T.alloc_fragment((16,), dtype)
            T.copy(A[bx * 16, 0], a)
            T.reduce_max(a, mx, dim=1)
            T.reduce_min(a, mn, dim=1)
            T.copy(mx, Mx[bx * 16])
            T.copy(mn, Mn[bx * 16])
            for i, j in T.Parallel(16, N):
                E[bx * 16 + i, j] = T.max(A[bx * 16 + i, j], B[bx * 16 + i, j]) + \
                    T.min(B[bx * 16 + i, j], A[bx * 16 + i, j]) * 2.0

    return main


def nan_whole_tile(N):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), Out: T.Tensor((2,), F32)):
        with T.Kernel(1, threads=64):
            a = T.alloc_fragment((N,), F32)
            r = T.alloc_fragment((1,), F32)
            T.copy(A, a)
            T.reduce_max(a, r, dim=0)
            T.copy(r, Out[0:1])
            T.reduce_min(a, r, dim=0)
            T.copy(r, Out[1:2])

    return main


def _with_nans(rng, shape, p):
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < p] = np.nan
    return x


def test_nan_propagates_through_max_and_min(target, rng):
    M, N = 40, 24
    k = tilelang.compile(nan_kernel(M, N), out_idx=[2, 3, 4], target=target)
    a, b = _with_nans(rng, (M, N), 0.03), _with_nans(rng, (M, N), 0.03)
    a[5, :] = np.nan  # a row of NaN only
    mx, mn, e = k(a, b)
    assert np.isnan(mx).any() and not np.isnan(mx).all()
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, a.min(axis=1))
    np.testing.assert_allclose(e, np.maximum(a, b) + np.minimum(b, a) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("nan_at", [None, 0, 17, 99])
def test_nan_propagates_through_a_whole_tile_reduction(target, nan_at):
    a = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    if nan_at is not None:
        a[nan_at] = np.nan
    k = tilelang.compile(nan_whole_tile(100), out_idx=[1], target=target)
    np.testing.assert_array_equal(k(a), [a.max(), a.min()])


def test_nan_propagates_through_half_max_and_min(target, rng):
    """float16 on every target (WGSL's NaN test of an f16 once used a bitcast that the
    driver's shader compiler refuses: an internal error on webgpu)."""
    M, N = 32, 16
    k = tilelang.compile(nan_kernel(M, N, "float16"), out_idx=[2, 3, 4], target=target)
    a, b = _with_nans(rng, (M, N), 0.05).astype(np.float16), _with_nans(rng, (M, N), 0.05).astype(np.float16)
    mx, mn, e = k(a, b)
    assert np.isnan(mx).any()
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, a.min(axis=1))
    ref = np.maximum(a, b).astype(np.float32) + np.minimum(b, a).astype(np.float32) * 2.0
    np.testing.assert_allclose(e.astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def test_nan_constants_fold_like_numpy():
    nan, one = T.FloatImm(F32, float("nan")), T.FloatImm(F32, 1.0)
    for x in (T.max(one, nan), T.max(nan, one), T.min(one, nan), T.min(nan, one)):
        assert x.kind == "FloatImm" and np.isnan(x.value)


def test_nan_max_min_compile_for_cuda():
    reason = _nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    from tilelang.jit.kernel import _include_dir
    for func in (nan_kernel(64, 32), nan_kernel(64, 32, "float16"), nan_whole_tile(100)):
        lowered = _C.lower(func.handle, CUDA)
        source = _C.codegen(lowered, CUDA)
        # The NaN-propagating forms, not the comparison alone: max.NaN / min.NaN for float
        # (computed in float for float16 too).
        assert "tl::max_nan(" in source or "tl::min_nan(" in source, source
        cubin = _C.nvrtc_compile(source, "nan.cu", "sm_90a", [_include_dir()])
        assert cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------- 6. call arguments

def scaled_copy(n):
    @T.prim_func
    def main(A: T.Tensor((n,), F32), B: T.Tensor((n,), F32), s: T.int32):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(n):
                B[i] = A[i] * s

    return main


def unsigned_scale(n):
    @T.prim_func
    def main(A: T.Tensor((n,), F32), B: T.Tensor((n,), F32), s: T.uint8):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(n):
                B[i] = A[i] * s

    return main


def test_read_only_outputs_are_rejected(target):
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    out.flags.writeable = False
    for out_idx in (None, [1]):
        k = tilelang.compile(scaled_copy(64), out_idx=out_idx, target=target)
        with pytest.raises(ValueError, match="argument 'B' is a read-only array"):
            k(a, out, 2)
    assert not out.any()


def test_read_only_inputs_are_accepted(target):
    a = np.arange(64, dtype=np.float32)
    a.flags.writeable = False
    k = tilelang.compile(scaled_copy(64), out_idx=[1], target=target)
    np.testing.assert_array_equal(k(a, 3), a * 3)


def test_cumsum_source_is_an_input():
    @T.prim_func
    def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=64):
            T.cumsum(A, B)

    assert main.handle.written_params() == [1]


def test_non_native_byte_order_is_rejected(target):
    k = tilelang.compile(scaled_copy(64), target=target)
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match=r"argument 'A' has non-native byte order.*newbyteorder"):
        k(a.astype(a.dtype.newbyteorder()), out, 2)
    with pytest.raises(ValueError, match="argument 'B' has non-native byte order"):
        k(a, out.astype(out.dtype.newbyteorder()), 2)


@pytest.mark.parametrize("value", [2.5, 2.0, np.float32(2.0)])
def test_float_for_an_int_scalar_is_a_type_error(target, value):
    k = tilelang.compile(scaled_copy(64), out_idx=[1], target=target)
    with pytest.raises(TypeError, match=r"argument 's' is an integer \(int32\) parameter, got the float"):
        k(np.ones(64, np.float32), value)


@pytest.mark.parametrize("value,dtype,lo,hi", [(2 ** 40, "int32", -2 ** 31, 2 ** 31 - 1),
                                               (-2 ** 31 - 1, "int32", -2 ** 31, 2 ** 31 - 1),
                                               (256, "uint8", 0, 255), (-1, "uint8", 0, 255)])
def test_out_of_range_int_scalar_is_a_value_error(target, value, dtype, lo, hi):
    func = scaled_copy(64) if dtype == "int32" else unsigned_scale(64)
    k = tilelang.compile(func, out_idx=[1], target=target)
    with pytest.raises(ValueError, match=rf"argument 's' = {value} is out of range for {dtype} \(from {lo} to {hi}\)"):
        k(np.ones(64, np.float32), value)
    edge = k(np.ones(64, np.float32), np.int64(hi))
    np.testing.assert_array_equal(edge, np.full(64, hi, np.float32))


# ---------------------------------------------------------------- 7. accepted although wrong

@pytest.mark.parametrize("shape", [(0, 4), (16, -2)])
def test_allocation_extent_below_one_is_a_shape_error(target, shape):
    @T.prim_func
    def main(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared(shape, F32)  # <<err:alloc_extent>>
            A[0] = s[0, 0]

    with pytest.raises(TileLangShapeError) as e:
        tilelang.compile(main, target=target)
    check_located(e.value, "alloc_extent", "buffer 's'", "must be at least 1")
    with pytest.raises(TileLangShapeError, match="buffer 's'"):
        tilelang.lower(main, target=CUDA)


@pytest.mark.parametrize("n", [0, -3])
def test_tensor_extent_below_one_is_a_shape_error(n):
    @T.prim_func
    def main(A: T.Tensor((n, 4), F32)):  # <<err:tensor_extent>>
        with T.Kernel(1, threads=32):
            A[0, 0] = 1.0

    with pytest.raises(TileLangShapeError) as e:
        tilelang.compile(main, target="cpu")
    check_located(e.value, "tensor_extent", "tensor 'A'", f"is {n}; it must be at least 1")


def test_float_extents_are_type_errors():
    @T.prim_func
    def grid(A: T.Tensor((64,), F32)):
        with T.Kernel(16.5, threads=32):  # <<err:float_grid>>
            A[0] = 1.0

    @T.prim_func
    def parallel(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(16.5):  # <<err:float_parallel>>
                A[i] = 1.0

    @T.prim_func
    def alloc(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=32):
            s = T.alloc_fragment((16.5,), F32)  # <<err:float_alloc>>
            A[0] = s[0]

    for func, marker in ((grid, "float_grid"), (parallel, "float_parallel"), (alloc, "float_alloc")):
        for target in ("cpu", CUDA):
            with pytest.raises(TileLangTypeError) as e:
                tilelang.lower(func, target=target)
            check_located(e.value, marker, "must be an integer", "16.5")


def pipelined(num_stages=2, order=None, stage=None):
    @T.prim_func
    def main(A: T.Tensor((256,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), F32)
            acc = T.alloc_fragment((64,), F32)
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=num_stages, order=order, stage=stage):  # <<err:pipelined>>
                T.copy(A[k * 64], s)
                for i in T.Parallel(64):
                    acc[i] += s[i]
            T.copy(acc, B)

    return main


def test_pipeline_options_are_checked(target):
    k = tilelang.compile(pipelined(2, [0, 1], [0, 1]), out_idx=[1], target=target)
    a = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(k(a), a.reshape(4, 64).sum(axis=0))
    cases = [({"num_stages": -1}, "num_stages is -1"),
             ({"order": [0, 1, 2], "stage": [0, 0, 1]}, "order has 3 entries but the loop body has 2"),
             ({"order": [0, 1], "stage": [0]}, "order has 2 entries but stage has 1")]
    for kwargs, fragment in cases:
        with pytest.raises(TileLangShapeError) as e:
            tilelang.compile(pipelined(**kwargs), target=target)
        check_located(e.value, "pipelined", fragment)
    with pytest.raises(TileLangTypeError) as e:
        pipelined(2.5)
    check_located(e.value, "pipelined", "num_stages must be Python ints", "2.5")


@pytest.mark.parametrize("operand", ["float", "bool_and_int"])
def test_bit_operators_on_floats_or_bool_and_int_are_type_errors(operand):
    """& | on integers are bitwise and on two bools logical (test_bitwise.py); a float, or a
    bool meeting an integer, is a typed error at the line."""
    with pytest.raises(TileLangTypeError) as e:
        @T.prim_func
        def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    A[i] = (A[i] & 1.0) if operand == "float" else T.if_then_else((B[i] > 0) | B[i], 1.0, 0.0)  # <<err:and_numbers>>
    if operand == "float":
        check_located(e.value, "and_numbers", "operator '&' takes integers, got float32")
    else:
        check_located(e.value, "and_numbers", "operator '|' on a bool and an int32", "T.Cast")


def test_duplicate_and_malformed_out_idx():
    func = scaled_copy(64)
    for out_idx in ([1, 1], [1, -2]):
        with pytest.raises(ValueError, match="out_idx names parameter 'B' twice"):
            tilelang.compile(func, out_idx=out_idx, target="cpu")
    for out_idx in ("1", 1.0, [1.5], [True]):
        with pytest.raises(TypeError, match="out_idx must be an int or a list of ints"):
            tilelang.compile(func, out_idx=out_idx, target="cpu")


def test_pass_configs_are_checked():
    func = scaled_copy(64)
    tilelang.compile(func, target="cpu", pass_configs={"tl.disable_tma_lower": True, "tir.disable_vectorize": True})
    with pytest.raises(ValueError, match="unknown pass config 'tl.disable_warp_specialised'.*did you mean "
                                         "'tl.disable_warp_specialized'"):
        tilelang.compile(func, target="cpu", pass_configs={"tl.disable_warp_specialised": True})
    for bad in ([("tl.disable_tma_lower", True)], "tl.disable_tma_lower"):
        with pytest.raises(TypeError, match="pass_configs must be a dict"):
            tilelang.compile(func, target="cpu", pass_configs=bad)


@pytest.mark.parametrize("text,fragment", [("", "the target string is empty"), ("   ", "the target string is empty"),
                                           ("cpu -mcpu=skylake", "unknown option '-mcpu=skylake'"),
                                           ("cuda -arhc=sm_90a", "unknown option '-arhc=sm_90a'"),
                                           ("cuda -arch=90", "'90' is not a CUDA architecture"),
                                           ("webgpu -fast", "unknown option '-fast'"),
                                           ("cpux", "unknown target 'cpux'")])
def test_bad_targets_are_errors_at_the_compile_call(text, fragment):
    func = scaled_copy(64)
    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.compile(func, target=text)  # <<err:bad_target>>
    check_located(e.value, "bad_target", fragment)


# ---------------------------------------------------------------- 8. messages

def test_reduce_dim_out_of_range_quotes_the_dim_given():
    with pytest.raises(TileLangShapeError) as e:
        @T.prim_func
        def main(A: T.Tensor((16, 16), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=32):
                a = T.alloc_fragment((16, 16), F32)
                b = T.alloc_fragment((16,), F32)
                T.copy(A, a)
                T.reduce_sum(a, b, dim=-3)  # <<err:reduce_dim>>
                T.copy(b, B)
    check_located(e.value, "reduce_dim", "dim -3 out of range", "[-2, 2)")


def test_walrus_binds_a_name(target, rng):
    @T.prim_func
    def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = (t := A[i] * 2.0) + t * t

    k = tilelang.compile(main, out_idx=[1], target=target)
    a = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(k(a), 2 * a + (2 * a) ** 2, rtol=1e-5, atol=1e-6)


def test_webgpu_limit_errors_name_the_kernel_line():
    from conftest import target_unavailable_reason
    reason = target_unavailable_reason("webgpu")
    if reason:
        pytest.skip(f"webgpu not available: {reason}")

    @T.prim_func
    def main(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=[1024, 4]):  # <<err:webgpu_threads>>
            for i in T.Parallel(64):
                A[i] = 1.0

    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.compile(main, target="webgpu")
    check_located(e.value, "webgpu_threads", "not supported on webgpu: 4096 threads per block")


# ---------------------------------------------------------------- 7. (cont.) provable overruns, sizes

def parallel_past_tile(scope, guarded):
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=64):
            s = alloc((32,), F32)
            T.fill(s, 0.0)
            for i in T.Parallel(64):
                if guarded:
                    if i < 32:
                        s[i] = A[i]
                else:
                    s[i] = A[i] * 2.0  # <<err:past_tile>>
            T.copy(s, B[0:32])

    return main


@pytest.mark.parametrize("scope", ["shared", "fragment"])
def test_a_parallel_write_past_a_tile_is_a_bounds_error(target, scope):
    with pytest.raises(TileLangBoundsError) as e:
        tilelang.compile(parallel_past_tile(scope, False), target=target)
    check_located(e.value, "past_tile", "buffer 's' has 32 elements but is written at index i",
                  "runs from 0 to 63")
    with pytest.raises(TileLangBoundsError, match="buffer 's' has 32 elements"):
        tilelang.lower(parallel_past_tile(scope, False), target=CUDA)


@pytest.mark.parametrize("scope", ["shared", "fragment"])
def test_a_guarded_write_into_a_tile_is_accepted(target, scope):
    k = tilelang.compile(parallel_past_tile(scope, True), target=target)
    a = np.arange(64, dtype=np.float32)
    out = np.full(64, np.nan, np.float32)
    k(a, out)
    np.testing.assert_array_equal(out[:32], a[:32])
    assert np.isnan(out[32:]).all()


def test_an_offset_read_past_a_tile_is_a_bounds_error():
    @T.prim_func
    def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((32, 4), F32)
            T.clear(s)
            for i, j in T.Parallel(32, 4):
                B[bx * 32 + i] = s[i, j + bx]  # <<err:offset_read>>

    for target in ("cpu", CUDA):
        with pytest.raises(TileLangBoundsError) as e:
            tilelang.lower(main, target=target)
        check_located(e.value, "offset_read", "has 4 elements in dimension 1 but is read at index j + bx",
                      "runs from 0 to 4")


def big_tile(shape, scope="shared"):
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=32):
            s = alloc(shape, F32)  # <<err:big_tile>>
            s[0, 0] = A[0]
            A[1] = s[0, 0]

    return main


@pytest.mark.parametrize("target_text", ["cpu", "webgpu", CUDA])
def test_a_tile_size_that_overflows_is_a_shape_error(target_text):
    with pytest.raises(TileLangShapeError) as e:
        tilelang.lower(big_tile((2 ** 31, 2 ** 31)), target=target_text)
    check_located(e.value, "big_tile", "of shape 2147483648 x 2147483648 and dtype float32",
                  "more than 2^63 bytes: its size overflows")


@pytest.mark.parametrize("scope", ["shared", "fragment"])
def test_a_block_private_buffer_over_2_gib_is_rejected(scope):
    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.lower(big_tile((2 ** 16, 2 ** 15), scope), target="cpu")
    check_located(e.value, "big_tile", "needs 8589934592 bytes", "at most 2^31 - 1 bytes")


def one_block_per(grid):
    @T.prim_func
    def main(A: T.Tensor((64,), F32)):
        with T.Kernel(*grid, threads=32):  # <<err:grid_limit>>
            A[0] = 1.0

    return main


@pytest.mark.parametrize("target_text,grid,fragment", [
    ("cpu", (2 ** 40,), "grid extent x is 1099511627776 blocks; target cpu allows at most 2147483647"),
    (CUDA, (2 ** 31,), "grid extent x is 2147483648 blocks; sm_90a allows at most 2147483647"),
    (CUDA, (4, 65536), "grid extent y is 65536 blocks; sm_90a allows at most 65535 in that dimension"),
    ("webgpu", (70000,), "not supported on webgpu: grid extent x is 70000 blocks")])
def test_a_grid_over_the_target_limit_is_rejected_at_the_kernel(target_text, grid, fragment):
    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.lower(one_block_per(grid), target=target_text)
    check_located(e.value, "grid_limit", fragment)


# ---------------------------------------------------------------- 8. (cont.) locations

@pytest.mark.parametrize("alloc,target_text,fragment", [
    ("fragment", CUDA, "fragment 's' has a symbolic shape"),
    ("fragment", "webgpu", "fragment 's' has a symbolic shape"),
    ("shared", "webgpu", "buffer 's' of symbolic size")])
def test_a_symbolic_allocation_points_at_the_allocation(alloc, target_text, fragment):
    make = T.alloc_shared if alloc == "shared" else T.alloc_fragment

    @T.prim_func
    def main(A: T.Tensor((64,), F32), n: T.int32):
        with T.Kernel(1, threads=32):
            s = make((n,), F32)  # <<err:symbolic_alloc>>
            A[0] = 1.0
            for i in T.Parallel(32):
                s[i] = A[i]
            A[1] = s[0]

    with pytest.raises(TileLangUnsupportedError) as e:
        if target_text == "webgpu":
            from tilelang.jit.backends import switches  # noqa: F401 - the target needs no device to lower
            _C.codegen_wgsl(_C.lower(main.handle, target_text), target_text, False)
        else:
            tilelang.lower(main, target=target_text)
    check_located(e.value, "symbolic_alloc", fragment)


# ---------------------------------------------------------------- 4. launch budgets of the exact target

def staged_copy(stages, tile, dtype="float16"):
    """A pipelined sum of (tile x tile) tiles: its shared tile is multi-buffered."""
    @T.prim_func
    def main(A: T.Tensor((8 * tile, tile), dtype), B: T.Tensor((tile, tile), "float32")):
        with T.Kernel(1, threads=128):  # <<err:staged>>
            s = T.alloc_shared((tile, tile), dtype)
            t = T.alloc_shared((tile, tile), "float32")
            acc = T.alloc_fragment((tile, tile), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=stages):
                T.copy(A[k * tile, 0], s)
                T.copy(s, t)
                for i, j in T.Parallel(tile, tile):
                    acc[i, j] += t[i, j]
            T.copy(acc, B)

    return main


def test_shared_memory_overrun_lists_each_buffer_and_suggests_fewer_stages():
    # 3 stages of a 128 x 128 float16 tile (96 KiB) and a 64 KiB float32 tile alive with it:
    # over sm_86's 99 KiB.
    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.lower(staged_copy(3, 128), target="cuda -arch=sm_86")
    check_located(e.value, "staged", "the kernel needs",
                  "bytes of shared memory per block; sm_86 allows at most 101376",
                  "s: 3 x 128 x 128 float16 = 98304 bytes (3 pipeline stages)", "t: 128 x 128 float32 = 65536 bytes")
    assert "num_stages=2 saves 32768 bytes" in e.value.hint
    tilelang.lower(staged_copy(3, 128), target=CUDA)  # Hopper's 227 KiB hold it


def test_shared_memory_overrun_on_webgpu_lists_each_buffer():
    from conftest import target_unavailable_reason
    reason = target_unavailable_reason("webgpu")
    if reason:
        pytest.skip(f"webgpu not available: {reason}")
    from tilelang.jit import webgpu
    limit = webgpu.adapter_limits()["max_shared_bytes"]
    tile = 16
    while 2 * tile * tile * 4 <= limit:
        tile *= 2
    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.compile(staged_copy(2, tile, "float32"), target="webgpu")
    check_located(e.value, "staged", f"not supported on webgpu: the kernel needs {2 * tile * tile * 4} bytes",
                  f"allows at most {limit}", f"s: {tile} x {tile} float32 = {tile * tile * 4} bytes")


@pytest.mark.parametrize("threads,fragment", [([32, 2, 65], "threads z is 65; sm_90a allows at most 64"),
                                              ([2048], "threads x is 2048; sm_90a allows at most 1024"),
                                              ([64, 32], "2048 threads per block; sm_90a allows at most 1024")])
def test_threads_over_the_cuda_limits_are_rejected_at_the_kernel(threads, fragment):
    @T.prim_func
    def main(A: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=threads):  # <<err:cuda_threads>>
            A[0] = 1.0

    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.lower(main, target=CUDA)
    check_located(e.value, "cuda_threads", fragment)


def test_webgpu_limits_are_the_adapter_s():
    """tilelang.lower for plain "webgpu" holds the WebGPU specification's default limits
    (256 threads, 16 KiB of workgroup memory); a compile holds the adapter's."""
    @T.prim_func
    def main(A: T.Tensor((512,), F32)):
        with T.Kernel(1, threads=512):  # <<err:webgpu_512>>
            for i in T.Parallel(512):
                A[i] = 1.0

    with pytest.raises(TileLangUnsupportedError) as e:
        tilelang.lower(main, target="webgpu")
    check_located(e.value, "webgpu_512", "not supported on webgpu: threads x is 512",
                  "the WebGPU adapter allows at most 256")
    _C.lower(main.handle, "webgpu", [], {"max_threads_per_block": 1024, "max_threads_per_dim": [1024, 1024, 64]})


def test_kernel_as_one_name_binds_the_list_of_block_indices(target, rng):
    """`with T.Kernel(gx, gy) as ids` binds [bx, by] (as upstream), not bx alone, which gave
    every row of blocks the first row's data."""
    M, N = 12, 20

    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(N, 8), T.ceildiv(M, 4), threads=32) as ids:
            bx, by = ids
            for i, j in T.Parallel(4, 8):
                B[by * 4 + i, bx * 8 + j] = A[by * 4 + i, bx * 8 + j] + 1.0

    k = tilelang.compile(main, target=target)
    a = rng.standard_normal((M, N)).astype(np.float32)
    np.testing.assert_array_equal(run_into_nan(k, a), a + 1)


# ---------------------------------------------------------------- 3. (cont.) no trap, no crash

def int_division(dtype):
    @T.prim_func
    def main(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype), Q: T.Tensor((8,), dtype),
             R: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                Q[i] = A[i] // B[i]
                R[i] = A[i] % B[i]

    return main


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64"])
def test_integer_division_by_zero_gives_numpy_s_zero(target, dtype):
    """A zero divisor known only at run time: the CPU trapped (SIGFPE killed the process);
    every target now gives numpy's 0 for the quotient and the remainder."""
    if target == "webgpu" and dtype == "int64":
        pytest.skip("webgpu has no 64-bit integers")
    info = np.iinfo(dtype)
    signed = info.min < 0
    a = np.array([7, -7 if signed else 9, 0, 5, info.min, info.max, -1 if signed else 1, 3], dtype)
    b = np.array([0, 0, 0, 2, -1 if signed else 1, 0, 3, -2 if signed else 2], dtype)
    k = tilelang.compile(int_division(dtype), out_idx=[2, 3], target=target)
    q, r = k(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)


def test_integer_division_by_zero_compiles_for_cuda():
    reason = _nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    from tilelang.jit.kernel import _include_dir
    for dtype in ("int32", "uint32", "int64", "uint64"):
        source = _C.codegen(_C.lower(int_division(dtype).handle, CUDA), CUDA)
        assert "tl::floordiv(" in source and "tl::floormod(" in source  # the helpers that check for 0
        assert _C.nvrtc_compile(source, "div.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"


def test_integer_division_by_the_constant_zero_is_a_type_error():
    with pytest.raises(TileLangTypeError) as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=8):
                for i in T.Parallel(8):
                    A[i] = A[i] % 0  # <<err:mod_zero>>
    check_located(e.value, "mod_zero", "integer remainder by the constant 0")


@pytest.mark.parametrize("target_text", [CUDA, "webgpu"])
def test_host_level_parallel_loops_and_tile_ops_are_errors_on_gpus(target_text):
    """Host code (allowed on the CPU) has no threads: a T.Parallel loop there crashed the
    CUDA lowering (a null kernel)."""
    @T.prim_func
    def loop(A: T.Tensor((128,), F32)):
        for i in T.Parallel(128):  # <<err:host_parallel>>
            A[i] = 1.0

    @T.prim_func
    def tile(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
        T.copy(A, B)  # <<err:host_copy>>
        with T.Kernel(1, threads=128):
            B[0] = 1.0

    for func, marker in ((loop, "host_parallel"), (tile, "host_copy")):
        with pytest.raises(TileLangUnsupportedError) as e:
            tilelang.lower(func, target=target_text)
        check_located(e.value, marker, "outside T.Kernel, which target")


# ---------------------------------------------------------------- 8. (cont.) silently wrong Python

def test_is_on_kernel_values_is_a_syntax_error():
    """`A[i] is B[i]` compared two IR handles at parse time (always False): the branch
    vanished without a word."""
    with pytest.raises(TileLangSyntaxError) as e:
        @T.prim_func
        def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    if A[i] is B[i]:  # <<err:is_values>>
                        B[i] = 0.0
    check_located(e.value, "is_values", "'is' on kernel values compares Python objects")


def test_float_indices_are_type_errors():
    @T.prim_func
    def main(A: T.Tensor((64,), F32), B: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=64):
            B[A[0]] = 1.0  # <<err:float_index>>

    for target in ("cpu", CUDA):
        with pytest.raises(TileLangTypeError) as e:
            tilelang.lower(main, target=target)
        check_located(e.value, "float_index", "index 0 of buffer 'B' must be an integer", "float32")


def test_a_pipeline_of_one_trip_compiles_for_hopper():
    """A T.Pipelined loop whose constant trip count is 1, in a kernel the TMA producer
    warpgroup would take: the simplifier removed the loop that warp specialisation splits,
    and the CUDA code generator met the roles' placeholders (an internal error, found by the
    fuzzer). Such a loop has nothing to overlap: it is a cp.async pipeline, with the reason."""
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), F32)):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cf = T.alloc_fragment((64, 64), F32)
            T.clear(Cf)
            for k in T.Pipelined(1, num_stages=3):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C)

    lowered = _C.lower(main.handle, CUDA)
    assert "not TMA: the loop runs 1 time(s)" in lowered.lowering_report()
    source = _C.codegen(lowered, CUDA)
    assert "ws_role" not in source
    reason = _nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    from tilelang.jit.kernel import _include_dir
    assert _C.nvrtc_compile(source, "one_trip.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"


@pytest.mark.parametrize("kind", ["sum", "abssum", "max"])
def test_whole_tile_reduction_of_a_replicated_fragment(target, kind):
    """A 1-D fragment that a 2-D loop gives a row-replicated layout (each element held by
    several threads) reduced as a whole: a sum counts each element once, not once per copy
    (it was multiplied by the number of copies on the GPU targets)."""
    reduce = {"sum": T.reduce_sum, "abssum": T.reduce_abssum, "max": T.reduce_max}[kind]

    @T.prim_func
    def main(W: T.Tensor((4,), F32), X: T.Tensor((4, 32), F32), S: T.Tensor((1,), F32), Y: T.Tensor((4, 32), F32)):
        with T.Kernel(1, threads=128) as _:
            w = T.alloc_fragment((4,), F32)
            x = T.alloc_fragment((4, 32), F32)
            total = T.alloc_fragment((1,), F32)
            T.copy(W, w)
            T.copy(X, x)
            reduce(w, total, dim=0)
            for i, j in T.Parallel(4, 32):
                x[i, j] *= w[i]
            T.copy(x, Y)
            T.copy(total, S)

    w = np.array([1, -2, 3, 4], np.float32)
    x = np.ones((4, 32), np.float32)
    s, y = tilelang.compile(main, out_idx=[2, 3], target=target)(w, x)
    expected = {"sum": w.sum(), "abssum": np.abs(w).sum(), "max": w.max()}[kind]
    np.testing.assert_allclose(np.asarray(s), [expected])
    np.testing.assert_allclose(np.asarray(y), x * w[:, None])


def test_rank1_fragment_follows_its_partner_in_a_1d_loop(target):
    """A rank-1 fragment used only in 1-D loops (`d[i] = d[i] + m[i]`, `e[i] = m[i] * 2`)
    takes the layout a reduction gave its partner, instead of a default that puts the
    elements on other threads (a layout error on the GPU targets before)."""
    @T.prim_func
    def main(X: T.Tensor((16, 64), F32), D: T.Tensor((16,), F32), E: T.Tensor((16,), F32)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((16, 64), F32)
            m = T.alloc_fragment((16,), F32)
            d = T.alloc_fragment((16,), F32)
            e = T.alloc_fragment((16,), F32)
            T.copy(X, x)
            T.reduce_max(x, m, dim=1)
            T.clear(d)
            for i in T.Parallel(16):
                d[i] = d[i] + m[i]
            for i in T.Parallel(16):
                e[i] = m[i] * 2.0
            T.copy(d, D)
            T.copy(e, E)

    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    d, e = tilelang.compile(main, out_idx=[1, 2], target=target)(x)
    np.testing.assert_allclose(np.asarray(d), x.max(axis=1))
    np.testing.assert_allclose(np.asarray(e), 2 * x.max(axis=1))


def test_reduce_into_a_local_array_names_the_destination():
    """A reduction into a per-thread array (T.alloc_local) is refused on the GPU targets with
    the destination's scope in the message (it named the valid source before). A shared
    destination is accepted: T.reduce_* stages it through a fragment, as upstream does
    (tests/python/test_reduce_through_shared.py)."""
    @T.prim_func
    def main(X: T.Tensor((64, 64), F32), M: T.Tensor((64,), F32)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_fragment((64, 64), F32)
            m_local = T.alloc_local((64,), F32)
            T.copy(X, s)
            T.reduce_max(s, m_local, dim=1)
            T.copy(m_local, M)

    with pytest.raises(TileLangUnsupportedError, match=r"T.reduce_max on target cuda writes its result to a "
                                                        r"fragment; the destination m_local.* is in scope local"):
        _C.lower(main.handle, CUDA)


def test_a_pipeline_that_runs_in_order_says_why():
    """T.Pipelined with stages whose copy cannot be issued ahead (its tile is read after the
    loop) runs in order: a slower path than the program asked for, named with the copy and
    the reason (it said only "no copy it could issue ahead" before, and did not warn)."""
    @T.prim_func
    def main(K: T.Tensor((16, 64, 64), "float16"), O: T.Tensor((64, 64), F32)):
        with T.Kernel(1, threads=128) as _:
            K_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), F32)
            T.clear(acc)
            for t in T.Pipelined(16, num_stages=2):
                T.copy(K[t, 0:64, 0:64], K_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += K_s[i, j]
            T.copy(K_s, O)

    report = _C.lower(main.handle, "cuda -arch=sm_80").lowering_report()
    assert re.search(r"T.Pipelined\(num_stages=2\) runs in order \[slower path: no copy can be issued ahead: "
                     r"T.copy K -> K_s \(line \d+\): K_s is used outside the loop\]", report), report


@pytest.mark.parametrize("rows, cols", [((0, 4), (0, 64)), ((4, 12), (8, 40)), ((15, 16), (0, 64))])
def test_copy_of_part_of_a_fragment(target, rows, cols):
    """T.copy of a region of a fragment (rows r0:r1, columns c0:c1) into global memory and
    back into part of another fragment: each thread takes what it owns inside the region
    (it was refused on the GPU targets)."""
    (r0, r1), (c0, c1) = rows, cols

    @T.prim_func
    def main(X: T.Tensor((16, 64), F32), Y: T.Tensor((16, 64), F32), Z: T.Tensor((16, 64), F32)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((16, 64), F32)
            z = T.alloc_fragment((16, 64), F32)
            T.copy(X, x)
            T.fill(z, -1.0)
            T.copy(x[r0:r1, c0:c1], Y[r0:r1, c0:c1])
            T.copy(X[r0:r1, c0:c1], z[r0:r1, c0:c1])
            T.copy(z, Z)

    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    y0 = np.full((16, 64), 7.0, np.float32)
    kernel = tilelang.compile(main, target=target)
    y, z = y0.copy(), np.zeros((16, 64), np.float32)
    kernel(x, y, z)
    expected_y, expected_z = y0.copy(), np.full((16, 64), -1.0, np.float32)
    expected_y[r0:r1, c0:c1] = x[r0:r1, c0:c1]
    expected_z[r0:r1, c0:c1] = x[r0:r1, c0:c1]
    np.testing.assert_array_equal(y, expected_y)
    np.testing.assert_array_equal(z, expected_z)


def test_webgpu_counts_float16_shared_tiles_at_two_bytes():
    """A float16 workgroup array takes 2 bytes an element (it was counted at 4, which halved
    the float16 tiles that fit an adapter's shared memory)."""
    def tile_copy(rows):
        @T.prim_func
        def main(A: T.Tensor((rows, 128), "float16"), B: T.Tensor((rows, 128), "float16")):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((rows, 128), "float16")
                T.copy(A, s)
                T.copy(s, B)
        return main

    # Without an adapter, the limit is WebGPU's guaranteed 16 KiB.
    tilelang.lower(tile_copy(64), target="webgpu")  # 16384 bytes: fits
    with pytest.raises(TileLangUnsupportedError, match=r"the kernel needs 24576 bytes .* allows at most 16384"):
        tilelang.lower(tile_copy(96), target="webgpu")


def test_webgpu_float16_tile_over_half_the_limit_runs():
    """On an adapter with shader-f16: a float16 shared tile of more than half the adapter's
    workgroup memory (it would not fit at 4 bytes an element) compiles and copies right."""
    from conftest import target_unavailable_reason
    reason = target_unavailable_reason("webgpu")
    if reason:
        pytest.skip(f"webgpu not available: {reason}")
    from tilelang.jit import webgpu
    limit = webgpu.adapter_limits()["max_shared_bytes"]
    rows = (limit * 3 // 4) // (128 * 2) // 8 * 8  # three quarters of the limit at 2 bytes an element

    @T.prim_func
    def main(A: T.Tensor((rows, 128), "float16"), B: T.Tensor((rows, 128), "float16")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((rows, 128), "float16")
            T.copy(A, s)
            T.copy(s, B)

    try:
        kernel = tilelang.compile(main, out_idx=[1], target="webgpu")
    except TileLangUnsupportedError as e:
        if "shader-f16" in str(e):
            pytest.skip("the webgpu adapter has no shader-f16")
        raise
    a = np.random.default_rng(0).standard_normal((rows, 128)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a)


def test_row_factors_between_tiles_of_different_widths(target):
    """A row vector reduced from a 32 x 32 tile scales a 32 x 64 tile whose rows are spread
    over the threads differently (the SIMT layouts of webgpu and small CUDA tiles): the
    vector reaches that loop through shared memory, reported as a slower path (it was a
    layout error)."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), F32), B: T.Tensor((32, 64), F32), C: T.Tensor((32, 64), F32)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_fragment((32, 32), F32)
            b = T.alloc_fragment((32, 64), F32)
            m = T.alloc_fragment((32,), F32)
            T.copy(A, a)
            T.copy(B, b)
            T.reduce_max(a, m, dim=1)
            for i, j in T.Parallel(32, 64):
                b[i, j] = b[i, j] * m[i]
            T.copy(b, C)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 32)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)
    kernel = tilelang.compile(main, out_idx=[2], target=target)
    np.testing.assert_allclose(np.asarray(kernel(a, b)), b * a.max(axis=1)[:, None], rtol=1e-6)
    if target != "cpu":
        assert "fragment 'm' reaches this T.Parallel loop through shared memory [slower path:" in \
            kernel.get_lowering_report()
    report = _C.lower(main.handle, CUDA).lowering_report()
    assert "fragment 'm' reaches this T.Parallel loop through shared memory" in report


def _butterflies_in_registers():
    """Each thread's 16 values through upstream's in-register Hadamard loop: chunk sizes
    1 << (r + 1), chunk bases j * size (a product of two loop variables)."""

    @T.prim_func
    def main(X: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding(0)
            loc = T.alloc_local((16,), "float32")
            for i in T.serial(16):
                loc[i] = X[tx, i]
            for r in T.serial(4):
                size = 1 << (r + 1)
                for j in T.serial(16 // size):
                    base = j * size
                    for q in T.serial(size // 2):
                        a = loc[base + q]
                        loc[base + q] = a + loc[base + q + size // 2]
                        loc[base + q + size // 2] = a - loc[base + q + size // 2]
            for i in T.serial(16):
                X[tx, i] = loc[i]

    return main


def test_per_thread_index_whose_range_is_not_proven_is_not_refused(target, rng):
    """`loc[j * size + q]` with j < 16 // size: the analyzer's range ([0, 127]) overestimates
    the product of two loop variables; the access is in bounds and the kernel compiles (it
    was refused as an out-of-bounds access: upstream's Hadamard example)."""
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")
    kernel = tilelang.compile(_butterflies_in_registers(), target=target)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    want = x.astype(np.float64)
    for r in range(4):
        size = 1 << (r + 1)
        w = want.reshape(64, 16 // size, 2, size // 2)
        want = np.concatenate([w[:, :, 0] + w[:, :, 1], w[:, :, 0] - w[:, :, 1]], axis=2).reshape(64, 16)
    kernel(x)
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-4)
