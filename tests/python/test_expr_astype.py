"""`value.astype(dtype)` on kernel values (buffer elements, arithmetic on them): the method
upstream's PrimExpr has, the same conversion as T.cast(value, dtype)."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T

RNG = np.random.default_rng(11)


def widen_and_scale(N=256, block=64):
    # int32 elements widened to float32 through .astype on an element and on an expression.
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), S: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // block, threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i].astype("float32") * S[bx * block + i] + \
                    (A[bx * block + i] & 7).astype(T.float32)
    return main


def truncate(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                B[i] = (A[i] * 3.5).astype(T.int32)
    return main


def test_astype_on_elements_and_expressions(target):
    k = tilelang.compile(widen_and_scale(), target=target)
    a = RNG.integers(-1000, 1000, 256).astype("int32")
    s = RNG.standard_normal(256).astype("float32")
    c = np.zeros(256, "float32")
    k(a, s, c)
    np.testing.assert_allclose(c, a.astype("float32") * s + (a & 7).astype("float32"), rtol=1e-6)


def test_astype_float_to_int_truncates_like_a_cast(target):
    k = tilelang.compile(truncate(), target=target)
    a = (RNG.standard_normal(128) * 50).astype("float32")
    b = np.zeros(128, "int32")
    k(a, b)
    np.testing.assert_array_equal(b, (a * np.float32(3.5)).astype("int32"))


@tilelang.jit(target="cpu")
def gemv_fp16(A, B, BLOCK_M: int = 32, BLOCK_K: int = 32):
    # The eager form upstream's tutorials use: float16 tiles accumulated in float32.
    M, K = T.const("M, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K,), T.float16)
    C = T.empty((M,), T.float16)
    with T.Kernel(T.ceildiv(M, BLOCK_M), threads=64) as bm:
        A_f = T.alloc_fragment((BLOCK_M, BLOCK_K), T.float16)
        B_f = T.alloc_fragment((BLOCK_K,), T.float16)
        prod = T.alloc_fragment((BLOCK_M, BLOCK_K), T.float32)
        acc = T.alloc_fragment((BLOCK_M,), T.float32)
        T.clear(acc)
        for k in T.Serial(K // BLOCK_K):
            T.copy(A[bm * BLOCK_M, k * BLOCK_K], A_f)
            T.copy(B[k * BLOCK_K], B_f)
            for i, j in T.Parallel(BLOCK_M, BLOCK_K):
                prod[i, j] = A_f[i, j].astype(T.float32) * B_f[j].astype(T.float32)
            T.reduce_sum(prod, acc, dim=1, clear=False)
        T.copy(acc, C[bm * BLOCK_M])
    return C


def test_astype_in_an_eager_float16_gemv_cpu():
    a = RNG.standard_normal((64, 128)).astype("float16")
    b = RNG.standard_normal(128).astype("float16")
    c = gemv_fp16(a, b)
    ref = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(np.asarray(c).astype("float32"), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype,expected", [("float16", "float16"), (T.float16, "float16"),
                                            (T.float64, "float64"), ("int8", "int8")])
def test_astype_result_dtype(dtype, expected):
    from tilelang import _C
    assert _C.var("x", "int32").astype(dtype).dtype == expected
    assert _C.const(3, "int32").astype(dtype).dtype == expected
