"""Bit operations on kernel values, with upstream TileLang's meaning: on integers & | ^ ~ << >>
(and T.bitwise_and/or/xor/not, T.shift_left/right) are C's bitwise operations (>> of a signed
value is arithmetic), on bools & | ^ ~ stay logical. Checked exactly against numpy on random
inputs that include negative values, on every target of the suite."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError

N = 300  # not a multiple of the tile


def random_ints(rng, dtype, n=N):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64).astype(dtype)


def test_int32_elementwise(target, rng):
    @T.prim_func
    def bits(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), S: T.Tensor((N,), "int32"),
             C: T.Tensor((N, 6), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = A[r] & B[r]
                C[r, 1] = A[r] | B[r]
                C[r, 2] = A[r] ^ B[r]
                C[r, 3] = ~A[r]
                C[r, 4] = A[r] << S[r]
                C[r, 5] = A[r] >> S[r]

    k = tilelang.compile(bits, out_idx=[-1], target=target)
    a, b = random_ints(rng, np.int32), random_ints(rng, np.int32)
    a[:4] = [-1, np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0]
    s = rng.integers(0, 32, N).astype(np.int32)
    s[:4] = [31, 31, 1, 0]
    out = k(a, b, s)
    np.testing.assert_array_equal(out[:, 0], a & b)
    np.testing.assert_array_equal(out[:, 1], a | b)
    np.testing.assert_array_equal(out[:, 2], a ^ b)
    np.testing.assert_array_equal(out[:, 3], ~a)
    np.testing.assert_array_equal(out[:, 4], np.left_shift(a, s))   # wraps as int32
    np.testing.assert_array_equal(out[:, 5], np.right_shift(a, s))  # arithmetic


def test_shifts_wrap_like_the_type(target, rng):
    """Bit tricks that rely on int32 wrapping: sign-extending the low byte with << then >>, and
    a floor division of a value shifted into the sign bit."""
    @T.prim_func
    def tricks(A: T.Tensor((N,), "int32"), C: T.Tensor((N, 3), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = (A[r] << 24) >> 24
                C[r, 1] = ((A[r] & 0xFF) << 28) // 16
                C[r, 2] = ((A[r] & 0xFF) << 28) % 1000

    k = tilelang.compile(tricks, out_idx=[-1], target=target)
    a = random_ints(rng, np.int32)
    out = k(a)
    np.testing.assert_array_equal(out[:, 0], (a << 24) >> 24)
    np.testing.assert_array_equal(out[:, 0], a.astype(np.int8).astype(np.int32))
    np.testing.assert_array_equal(out[:, 1], ((a & 0xFF) << 28) // 16)
    np.testing.assert_array_equal(out[:, 2], ((a & 0xFF) << 28) % 1000)


def test_upstream_names_and_python_ints(target, rng):
    @T.prim_func
    def bits(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), S: T.Tensor((N,), "int32"),
             C: T.Tensor((N, 10), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = T.bitwise_and(A[r], B[r])
                C[r, 1] = T.bitwise_or(A[r], B[r])
                C[r, 2] = T.bitwise_xor(A[r], B[r])
                C[r, 3] = T.bitwise_not(A[r])
                C[r, 4] = T.shift_left(A[r], S[r])
                C[r, 5] = T.shift_right(A[r], S[r])
                C[r, 6] = 3 & A[r]
                C[r, 7] = 0x0F0F ^ A[r] | 1
                C[r, 8] = 1 << S[r]
                C[r, 9] = (A[r] >> 4 & 0xFF) + (B[r] & -16)

    k = tilelang.compile(bits, out_idx=[-1], target=target)
    a, b = random_ints(rng, np.int32), random_ints(rng, np.int32)
    s = rng.integers(0, 32, N).astype(np.int32)
    out = k(a, b, s)
    np.testing.assert_array_equal(out[:, 0], a & b)
    np.testing.assert_array_equal(out[:, 1], a | b)
    np.testing.assert_array_equal(out[:, 2], a ^ b)
    np.testing.assert_array_equal(out[:, 3], ~a)
    np.testing.assert_array_equal(out[:, 4], np.left_shift(a, s))
    np.testing.assert_array_equal(out[:, 5], np.right_shift(a, s))
    np.testing.assert_array_equal(out[:, 6], 3 & a)
    np.testing.assert_array_equal(out[:, 7], 0x0F0F ^ a | 1)
    np.testing.assert_array_equal(out[:, 8], np.left_shift(np.int32(1), s))
    np.testing.assert_array_equal(out[:, 9], (a >> 4 & 0xFF) + (b & -16))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "uint32", "int64", "uint64"])
def test_other_integer_dtypes(target, rng, dtype):
    """Each operation in the operands' own type: narrow values wrap, unsigned >> is logical,
    ~ of an unsigned value is its maximum minus the value."""
    if target == "webgpu" and dtype != "uint32":
        pytest.skip("WebGPU's integers are i32 and u32")
    bits_of = np.dtype(dtype).itemsize * 8

    @T.prim_func
    def bits(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), S: T.Tensor((N,), dtype),
             C: T.Tensor((N, 6), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = A[r] & B[r]
                C[r, 1] = A[r] | B[r]
                C[r, 2] = A[r] ^ B[r]
                C[r, 3] = ~A[r]
                C[r, 4] = A[r] << S[r]
                C[r, 5] = A[r] >> S[r]

    k = tilelang.compile(bits, out_idx=[-1], target=target)
    a, b = random_ints(rng, np.dtype(dtype)), random_ints(rng, np.dtype(dtype))
    s = rng.integers(0, bits_of, N).astype(dtype)
    out = k(a, b, s)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out[:, 0], a & b)
    np.testing.assert_array_equal(out[:, 1], a | b)
    np.testing.assert_array_equal(out[:, 2], a ^ b)
    np.testing.assert_array_equal(out[:, 3], ~a)
    np.testing.assert_array_equal(out[:, 4], np.left_shift(a, s))
    np.testing.assert_array_equal(out[:, 5], np.right_shift(a, s))


def test_xor_swizzle_index(target, rng):
    M, K = 32, 64

    @T.prim_func
    def swizzle(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, K):
                B[i, j ^ (i % 8)] = A[i, j]

    k = tilelang.compile(swizzle, out_idx=[-1], target=target)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    want = np.empty_like(a)
    rows, cols = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    want[rows, cols ^ (rows % 8)] = a
    np.testing.assert_array_equal(k(a), want)


def test_shared_tile_with_xor_swizzle(target, rng):
    """A tile stored swizzled in shared memory by hand and read back with the same XOR: the
    analyzer proves the swizzled columns stay inside the tile."""
    M, K = 16, 32

    @T.prim_func
    def roundtrip(A: T.Tensor((M, K), "int32"), B: T.Tensor((M, K), "int32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, K), "int32")
            for i, j in T.Parallel(M, K):
                S[i, j ^ ((i >> 1) & 7)] = A[i, j] ^ 0x55
            for i, j in T.Parallel(M, K):
                B[i, j] = S[i, j ^ ((i >> 1) & 7)] ^ 0x55

    k = tilelang.compile(roundtrip, out_idx=[-1], target=target)
    a = random_ints(rng, np.int32, M * K).reshape(M, K)
    np.testing.assert_array_equal(k(a), a)


def test_bool_operands_stay_logical(target, rng):
    @T.prim_func
    def logic(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), C: T.Tensor((N, 4), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = T.if_then_else((A[r] > 0) & (B[r] > 0), 1, 0)
                C[r, 1] = T.if_then_else((A[r] > 0) | (B[r] > 0), 1, 0)
                C[r, 2] = T.if_then_else((A[r] > 0) ^ (B[r] > 0), 1, 0)
                C[r, 3] = T.if_then_else(~(A[r] > 0), 1, 0)

    k = tilelang.compile(logic, out_idx=[-1], target=target)
    a = rng.integers(-5, 5, N).astype(np.int32)
    b = rng.integers(-5, 5, N).astype(np.int32)
    out = k(a, b)
    np.testing.assert_array_equal(out[:, 0], (a > 0) & (b > 0))
    np.testing.assert_array_equal(out[:, 1], (a > 0) | (b > 0))
    np.testing.assert_array_equal(out[:, 2], (a > 0) ^ (b > 0))
    np.testing.assert_array_equal(out[:, 3], ~(a > 0))


def test_bool_and_int_expressions():
    i = _C.var("i", "int32")
    cond = (i > 0) & (i < 8)
    assert cond.dtype == "bool"
    assert repr(cond) == "i > 0 and i < 8"
    assert repr((i > 0) | (i < -8)) == "i > 0 or i < -8"
    assert repr(~(i > 0)) == "not i > 0"
    assert repr((i > 0) ^ (i < 8)) == "(i > 0) != (i < 8)"
    # Integers: the bit operations, also with the Python int on the left.
    assert (i & 3).dtype == "int32"
    assert repr(i & 3) == "i & 3"
    assert repr(3 & i) == "3 & i"
    assert repr(1 << i) == "1 << i"
    assert repr(6 >> i) == "6 >> i"
    assert repr(5 ^ i | 2) == "5 ^ i | 2"
    assert repr(~i) == "~i"
    assert repr(T.bitwise_not(_C.var("u", "uint8"))) == "~u"
    assert (_C.var("w", "int64") << 3).dtype == "int64"


def test_constant_folding():
    six = T.bitwise_xor(5, 3)
    assert six.kind == "IntImm" and six.dtype == "int32" and six.value == 6
    assert T.bitwise_and(12, 10).value == 8
    assert T.bitwise_or(12, 3).value == 15
    assert T.bitwise_not(0).value == -1
    assert T.bitwise_not(T.uint8(0)).value == 255
    assert T.shift_left(1, 31).value == -(2 ** 31)  # int32 wraps
    assert T.shift_right(-9, 1).value == -5
    assert T.shift_right(T.uint32(0x80000000), 31).value == 1
    assert T.bitwise_and(True, False).value is False
    i = _C.var("i", "int32")
    assert (i | 0).same_as(i) and (i ^ 0).same_as(i) and (i >> 0).same_as(i)
    assert (i & 0).value == 0


def test_constant_folding_in_a_kernel(target):
    @T.prim_func
    def folded(A: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                A[i] = T.bitwise_xor(5, 3) + T.shift_left(1, 4) + (0xF0 & 0x3C)

    k = tilelang.compile(folded, out_idx=[-1], target=target)
    np.testing.assert_array_equal(k(), np.full(128, 6 + 16 + 0x30, np.int32))


def _kernel_with(body_fn, dtype_a="float32", dtype_b="int32"):
    @T.prim_func
    def bad(A: T.Tensor((128,), dtype_a), B: T.Tensor((128,), dtype_b), C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                C[i] = body_fn(A[i], B[i])

    return bad


FLOAT_OPERANDS = {
    "a & 1": (lambda a, b: a & 1, "&"),
    "b | a": (lambda a, b: b | a, "|"),
    "a ^ b": (lambda a, b: a ^ b, "^"),
    "a << 2": (lambda a, b: a << 2, "<<"),
    "1 >> a": (lambda a, b: 1 >> a, ">>"),
    "T.bitwise_and": (lambda a, b: T.bitwise_and(a, b), "&"),
    "T.shift_right": (lambda a, b: T.shift_right(a, 1), ">>"),
}


@pytest.mark.parametrize("case", sorted(FLOAT_OPERANDS))
def test_float_operand_is_a_type_error(case):
    op, sym = FLOAT_OPERANDS[case]
    with pytest.raises(TileLangTypeError, match=re.escape(f"operator '{sym}' takes integers, got float32")):
        _kernel_with(op)


def test_invert_of_float_is_a_type_error():
    with pytest.raises(TileLangTypeError, match="operator '~' takes integers, got float32"):
        _kernel_with(lambda a, b: ~a)


def test_bool_meeting_int_is_a_type_error():
    with pytest.raises(TileLangTypeError, match="operator '&' on a bool and an int32") as info:
        _kernel_with(lambda a, b: (a > 0) & b)
    assert "T.Cast" in str(info.value)
    with pytest.raises(TileLangTypeError, match="operator '[|]' on a bool and an int32"):
        _kernel_with(lambda a, b: b | (a > 0))
    with pytest.raises(TileLangTypeError, match="operator '<<' takes integers, got bool"):
        _kernel_with(lambda a, b: (a > 0) << 1)


def test_constant_shift_out_of_range_is_a_type_error():
    with pytest.raises(TileLangTypeError, match=r"shift amount 32 is out of range for int32 \(0 to 31\)"):
        _kernel_with(lambda a, b: b << 32)
    with pytest.raises(TileLangTypeError, match="shift amount -1 is out of range"):
        _kernel_with(lambda a, b: b >> -1)
    with pytest.raises(TileLangTypeError, match="out of range for uint8"):
        _kernel_with(lambda a, b: b >> 8, dtype_b="uint8")


def test_error_points_at_the_line():
    @T.prim_func
    def ok(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                C[i] = T.Cast("int32", A[i]) & 7

    assert ok is not None
    with pytest.raises(TileLangTypeError) as info:
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "int32")):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    C[i] = A[i] & 7  # the offending line

    assert "test_bitwise.py" in str(info.value)
    assert "the offending line" in str(info.value) or "C[i] = A[i] & 7" in str(info.value)
