"""The math names of upstream's T beyond the basic ones: inverse and hyperbolic
trigonometry, atan2, copysign, hypot, nextafter, ldexp, fma, nearbyint, isfinite, and the
integer bit counts popcount and clz, each against numpy on random inputs."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangTypeError, TileLangUnsupportedError

N = 256

# name, kernel expression of (x, y), numpy reference of (x, y), x's range
FLOAT_CASES = [
    ("acos", lambda x, y: T.acos(x), lambda x, y: np.arccos(x), (-1, 1)),
    ("asin", lambda x, y: T.asin(x), lambda x, y: np.arcsin(x), (-1, 1)),
    ("atan", lambda x, y: T.atan(x), lambda x, y: np.arctan(x), (-8, 8)),
    ("sinh", lambda x, y: T.sinh(x), lambda x, y: np.sinh(x), (-4, 4)),
    ("cosh", lambda x, y: T.cosh(x), lambda x, y: np.cosh(x), (-4, 4)),
    ("asinh", lambda x, y: T.asinh(x), lambda x, y: np.arcsinh(x), (-8, 8)),
    ("acosh", lambda x, y: T.acosh(x), lambda x, y: np.arccosh(x), (1, 9)),
    ("atanh", lambda x, y: T.atanh(x), lambda x, y: np.arctanh(x), (-0.9, 0.9)),
    ("atan2", lambda x, y: T.atan2(x, y), lambda x, y: np.arctan2(x, y), (-4, 4)),
    ("copysign", lambda x, y: T.copysign(x, y), lambda x, y: np.copysign(x, y), (-4, 4)),
    ("hypot", lambda x, y: T.hypot(x, y), lambda x, y: np.hypot(x, y), (-4, 4)),
    ("ldexp", lambda x, y: T.ldexp(x, T.floor(y)), lambda x, y: np.ldexp(x, np.floor(y).astype(np.int32)), (-4, 4)),
    ("fma", lambda x, y: T.fma(x, y, x), lambda x, y: x * y + x, (-4, 4)),
    ("nearbyint", lambda x, y: T.nearbyint(x * 2), lambda x, y: np.rint(x * 2), (-4, 4)),
]


def elementwise(expr, out_dtype="float32"):
    @T.prim_func
    def f(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), out_dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Z[i] = expr(X[i], Y[i])

    return f


@pytest.mark.parametrize("name, expr, ref, rng_x", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_float_function(target, rng, name, expr, ref, rng_x):
    x = rng.uniform(*rng_x, N).astype(np.float32)
    y = rng.uniform(-4, 4, N).astype(np.float32)
    if name == "nearbyint":
        x[:8] = np.array([0.25, 0.75, -0.25, -0.75, 1.25, 1.75, -1.25, 2.25], np.float32)  # x * 2 a half
    k = tilelang.compile(elementwise(expr), target=target)
    z = np.zeros(N, np.float32)
    k(x, y, z)
    # WGSL allows its inverse trigonometry 4096 ULP (acos and asin inherit atan2's): about 5e-4 near 1.
    loose = target == "webgpu" and name in ("acos", "asin", "atan", "atan2")
    tol = 1e-3 if loose else 2e-5
    np.testing.assert_allclose(z, ref(x.astype(np.float64), y.astype(np.float64)), rtol=tol, atol=tol)


def test_nextafter(target, rng):
    x = rng.uniform(-4, 4, N).astype(np.float32)
    y = rng.uniform(-4, 4, N).astype(np.float32)
    if target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="T.nextafter"):
            tilelang.compile(elementwise(lambda a, b: T.nextafter(a, b)), target=target)
        return
    k = tilelang.compile(elementwise(lambda a, b: T.nextafter(a, b)), target=target)
    z = np.zeros(N, np.float32)
    k(x, y, z)
    np.testing.assert_array_equal(z, np.nextafter(x, y))


def test_isfinite(target, rng):
    x = rng.uniform(-4, 4, N).astype(np.float32)
    y = np.zeros(N, np.float32)
    x[::7] = np.inf
    x[3::11] = -np.inf
    x[5::13] = np.nan
    k = tilelang.compile(elementwise(lambda a, b: T.if_then_else(T.isfinite(a), 1.0, 0.0)), target=target)
    z = np.full(N, -1, np.float32)
    k(x, y, z)
    np.testing.assert_array_equal(z, np.isfinite(x).astype(np.float32))


def test_popcount_and_clz(target, rng):
    @T.prim_func
    def bits(A: T.Tensor((N,), "int32"), P: T.Tensor((N,), "int32"), L: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                P[i] = T.popcount(A[i])
                L[i] = T.clz(A[i])

    a = rng.integers(-2 ** 31, 2 ** 31, N, dtype=np.int64).astype(np.int32)
    a[:4] = [0, 1, -1, 2 ** 30]
    k = tilelang.compile(bits, target=target)
    p, lz = np.zeros(N, np.int32), np.zeros(N, np.int32)
    k(a, p, lz)
    u = a.view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(p, [bin(int(v)).count("1") for v in u])
    np.testing.assert_array_equal(lz, [32 - int(v).bit_length() for v in u])


def test_popcount_of_a_float_is_a_type_error():
    with pytest.raises(TileLangTypeError, match="T.popcount takes a 32- or 64-bit integer, got float32"):
        elementwise(lambda a, b: T.popcount(a))


def test_cuda_source_compiles():
    # Every function above, and the 64-bit bit counts, through NVRTC for sm_90a (the GPU
    # suite runs the numerics on cuda).
    from sass import nvrtc_reason
    from tilelang import _C
    from tilelang.jit.kernel import _include_dir
    if nvrtc_reason():
        pytest.skip(f"NVRTC is not available: {nvrtc_reason()}")

    @T.prim_func
    def bits64(A: T.Tensor((N,), "int64"), P: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                P[i] = T.popcount(A[i]) + T.clz(A[i])

    target = "cuda -arch=sm_90a"
    funcs = [elementwise(c[1]) for c in FLOAT_CASES] + [elementwise(lambda a, b: T.nextafter(a, b)), bits64]
    for f in funcs:
        source = _C.codegen(_C.lower(f.handle, target, []), target)
        assert _C.nvrtc_compile(source, "math.cu", "sm_90a", [_include_dir()], False)[:4] == b"\x7fELF"
