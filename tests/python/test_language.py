"""Scalar surface of the language: math functions, integer division, selects, printing,
vectorized loops and scalar atomics, each checked against numpy on random inputs."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangTypeError

N = 300  # not a multiple of the tile

UNARY = {
    "exp": (T.exp, np.exp, (-3, 3)),
    "exp2": (T.exp2, np.exp2, (-3, 3)),
    "log": (T.log, np.log, (0.1, 5)),
    "log2": (T.log2, np.log2, (0.1, 5)),
    "sqrt": (T.sqrt, np.sqrt, (0, 5)),
    "rsqrt": (T.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 5)),
    "abs": (T.abs, np.abs, (-3, 3)),
    "tanh": (T.tanh, np.tanh, (-3, 3)),
    "sigmoid": (T.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    "floor": (T.floor, np.floor, (-3, 3)),
    "ceil": (T.ceil, np.ceil, (-3, 3)),
    "sin": (T.sin, np.sin, (-3, 3)),
    "cos": (T.cos, np.cos, (-3, 3)),
}


def unary_kernel(fn):
    @T.prim_func
    def unary(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = fn(A[bx * 128 + i])

    return unary


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_math(target, rng, name):
    fn, ref, (lo, hi) = UNARY[name]
    k = tilelang.compile(unary_kernel(fn), out_idx=[-1], target=target)
    a = rng.uniform(lo, hi, N).astype(np.float32)
    np.testing.assert_allclose(k(a), ref(a.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_binary_math_and_selects(target, rng):
    @T.prim_func
    def mix(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N, 5), "float32")):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                r = bx * 64 + i
                a = A[r]
                b = B[r]
                C[r, 0] = T.pow(T.abs(a) + 1.0, b)
                C[r, 1] = T.max(a, b) - T.min(a, b)
                C[r, 2] = T.if_then_else(a > b and a > 0.0, a, b)
                C[r, 3] = T.if_then_else(not (a < 0.0 or b < 0.0), 1.0, -1.0)
                C[r, 4] = T.max_value("float16") + T.min_value("int8")

    k = tilelang.compile(mix, out_idx=[-1], target=target)
    a = rng.uniform(-2, 2, N).astype(np.float32)
    b = rng.uniform(-2, 2, N).astype(np.float32)
    out = k(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(out[:, 0], (np.abs(a64) + 1) ** b64, rtol=1e-5)
    np.testing.assert_allclose(out[:, 1], np.abs(a64 - b64), rtol=1e-6)
    np.testing.assert_array_equal(out[:, 2], np.where((a > b) & (a > 0), a, b))
    np.testing.assert_array_equal(out[:, 3], np.where((a >= 0) & (b >= 0), 1.0, -1.0))
    np.testing.assert_array_equal(out[:, 4], np.full(N, 65504.0 - 128.0, np.float32))


def test_integer_division_semantics(target, rng):
    @T.prim_func
    def divs(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), C: T.Tensor((N, 4), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = A[r] // B[r]
                C[r, 1] = A[r] % B[r]
                C[r, 2] = T.truncdiv(A[r], B[r])
                C[r, 3] = T.truncmod(A[r], B[r])

    k = tilelang.compile(divs, out_idx=[-1], target=target)
    a = rng.integers(-1000, 1000, N).astype(np.int32)
    b = rng.integers(1, 17, N).astype(np.int32) * rng.choice([-1, 1], N).astype(np.int32)
    out = k(a, b)
    np.testing.assert_array_equal(out[:, 0], a // b)
    np.testing.assert_array_equal(out[:, 1], a % b)
    np.testing.assert_array_equal(out[:, 2], np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(out[:, 3], np.fmod(a, b))


def test_integer_xor_and_shifts(target, rng):
    """`^`, `<<` and `>>` on integer kernel values are the bitwise operators (upstream's
    barrier parities write `(k // stages) % 2 ^ 1`; `>>` of a negative value is arithmetic,
    as in Python); on floats they are typed errors at the line."""
    @T.prim_func
    def bits(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), C: T.Tensor((N, 5), "int32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                r = bx * 128 + i
                C[r, 0] = A[r] ^ B[r]
                C[r, 1] = (A[r] // 4) % 2 ^ 1
                C[r, 2] = 5 ^ A[r]
                C[r, 3] = A[r] << (B[r] % 8)
                C[r, 4] = A[r] >> 3

    k = tilelang.compile(bits, out_idx=[-1], target=target)
    a = rng.integers(-1000, 1000, N).astype(np.int32)
    b = rng.integers(0, 1000, N).astype(np.int32)
    out = k(a, b)
    np.testing.assert_array_equal(out[:, 0], a ^ b)
    np.testing.assert_array_equal(out[:, 1], (a // 4) % 2 ^ 1)
    np.testing.assert_array_equal(out[:, 2], 5 ^ a)
    np.testing.assert_array_equal(out[:, 3], a << (b % 8))
    np.testing.assert_array_equal(out[:, 4], a >> 3)

    from tilelang.errors import TileLangTypeError
    with pytest.raises(TileLangTypeError, match="operator '\\^' takes integers, got float32"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    A[i] = A[i] ^ 1


def test_vectorized_loop_and_elif(target, rng):
    @T.prim_func
    def vec(A: T.Tensor((64, 8), "float32"), B: T.Tensor((64, 8), "float32")):
        with T.Kernel(64, threads=1) as bx:
            for v in T.vectorized(8):
                if A[bx, v] > 0.5:
                    B[bx, v] = 1.0
                elif A[bx, v] > 0.0:
                    B[bx, v] = 0.5
                else:
                    B[bx, v] = A[bx, v] * 2.0

    k = tilelang.compile(vec, out_idx=[-1], target=target)
    a = rng.uniform(-1, 1, (64, 8)).astype(np.float32)
    np.testing.assert_array_equal(k(a), np.where(a > 0.5, 1.0, np.where(a > 0, 0.5, a * 2)).astype(np.float32))


def test_scalar_atomic_max_and_min(target, rng):
    @T.prim_func
    def extremes(A: T.Tensor((1000,), "float32"), R: T.Tensor((2,), "float32")):
        with T.Kernel(T.ceildiv(1000, 100), threads=100) as bx:
            for i in T.Parallel(100):
                T.atomic_max(R[0], A[bx * 100 + i])
                T.atomic_min(R[1], A[bx * 100 + i])

    k = tilelang.compile(extremes, target=target)
    a = rng.standard_normal(1000).astype(np.float32)
    r = np.array([-np.inf, np.inf], dtype=np.float32)
    k(a, r)
    np.testing.assert_array_equal(r, [a.max(), a.min()])


def test_int32_histogram_through_shared_atomics(target, rng):
    # Each block counts its values into a shared histogram (cleared, updated atomically, then
    # read back) and adds it into the global one atomically: int32 atomics on both memories.
    bins = 16

    @T.prim_func
    def histogram(A: T.Tensor((4096,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(16, threads=128) as bx:
            local = T.alloc_shared((bins,), "int32")
            T.clear(local)
            for i in T.Parallel(256):
                T.atomic_add(local[A[bx * 256 + i]], 1)
            for b in T.Parallel(bins):
                T.atomic_add(H[b], local[b])

    k = tilelang.compile(histogram, target=target)
    a = rng.integers(0, bins, 4096).astype(np.int32)
    h = np.full(bins, 5, np.int32)
    k(a, h)
    np.testing.assert_array_equal(h, np.bincount(a, minlength=bins) + 5)


def test_atomic_add_return_prev_compacts(target, rng):
    # Stream compaction: each positive value takes the next free slot from a counter, the
    # slot being the counter's value before this thread's increment (return_prev=True).
    n = 2048

    @T.prim_func
    def compact(A: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32"), Count: T.Tensor((1,), "int32")):
        with T.Kernel(n // 256, threads=256) as bx:
            for i in T.Parallel(256):
                if A[bx * 256 + i] > 0:
                    pos = T.atomic_add(Count[0], 1, return_prev=True)
                    Out[pos] = A[bx * 256 + i]

    k = tilelang.compile(compact, target=target)
    a = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    count = np.zeros(1, np.int32)
    k(a, out, count)
    positives = np.sort(a[a > 0])
    assert count[0] == len(positives)
    np.testing.assert_array_equal(np.sort(out[:count[0]]), positives)


def test_atomic_return_prev_needs_one_element():
    with pytest.raises(TileLangTypeError, match=r"return_prev=True\) needs one element"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                T.atomic_add(B, A, return_prev=True)


def test_print_scalar_and_buffer(target, capfd):
    if target != "cpu":
        pytest.skip("device printf output is not captured by pytest")

    @T.prim_func
    def show(A: T.Tensor((2, 2), "float32")):
        with T.Kernel(1, threads=1) as bx:
            S = T.alloc_shared((2, 2), "float32")
            T.copy(A, S)
            T.print(S[1, 0] + 1.0, msg="scalar:")
            T.print(S, msg="tile")

    k = tilelang.compile(show, target=target)
    k(np.array([[1, 2], [3, 4]], dtype=np.float32))
    out = capfd.readouterr().out
    assert "scalar:" in out and "4" in out
    assert out.count("tile") == 4


def test_grid_from_a_scalar_parameter(target, rng):
    # The grid names an int32 parameter (upstream's varlen attention: T.ceildiv(max_seqlen_q,
    # block_M)): evaluated from the call's value, a block per 128 elements of n.
    @T.prim_func
    def head(A: T.Tensor((1024,), "float32"), n: T.int32, B: T.Tensor((1024,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    k = tilelang.compile(head, target=target)
    a = rng.standard_normal(1024).astype(np.float32)
    for n in (300, 1024, 0):
        b = np.full(1024, -1.0, np.float32)
        k(a, n, b)
        np.testing.assert_array_equal(b[:n], a[:n] * 2)
        assert (b[n:] == -1).all()


def _unrolled_row_sums(factor):
    @T.prim_func
    def row_sums(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            acc = T.alloc_fragment((64,), "float32")
            T.clear(acc)
            for k in T.unroll(32, unroll_factor=factor):
                for i in T.Parallel(64):
                    acc[i] += A[i, k]
            T.copy(acc, B)

    return row_sums


def test_unroll_factor_runs_and_reaches_cuda(target, rng):
    # T.unroll(..., unroll_factor=4): the same sums; on CUDA `#pragma unroll 4`.
    k = tilelang.compile(_unrolled_row_sums(4), target=target)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = np.zeros(64, np.float32)
    k(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)
    from tilelang import _C
    source = _C.codegen(_C.lower(_unrolled_row_sums(4).handle, "cuda -arch=sm_90a", []), "cuda -arch=sm_90a")
    assert "#pragma unroll 4\n" in source


@pytest.mark.parametrize("kwargs, message", [
    (dict(unroll_factor=4, explicit=True), "explicit and unroll_factor are mutually exclusive"),
    (dict(unroll_factor=0), "unroll_factor must be a positive Python int, got 0"),
])
def test_unroll_factor_errors(kwargs, message):
    with pytest.raises(TileLangTypeError, match=message):
        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.unroll(32, **kwargs):
                    A[i] = 0
