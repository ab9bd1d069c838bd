"""T.Parallel bodies that compute what they store (C[i, j] = A[i, j] + B[i, j]): a thread's
consecutive elements are one vector store, and the loads that move with them vector loads,
where the addresses are provably aligned; elsewhere the lanes stay scalar. Numerics on every
target; the machine code on sm_90a without a GPU."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from sass import sass_of

RNG = np.random.default_rng(21)


def add(M, N, dtype, shift=0, bm=32, bn=128):
    """C[i, j + shift] = A[i, j] + B[i, j] * bias[i]: bias does not move along a row."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), bias: T.Tensor((M,), dtype),
             C: T.Tensor((M, N + shift), dtype)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j + shift] = A[by * bm + i, bx * bn + j] + \
                    B[by * bm + i, bx * bn + j] * bias[by * bm + i]

    return main


def fragment_epilogue(M, N):
    """O = exp(acc) * scale[i] from a fragment (registers) into global memory."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), scale: T.Tensor((M,), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(X, acc)
            for i, j in T.Parallel(M, N):
                O[i, j] = T.exp(acc[i, j]) * scale[i]

    return main


@pytest.mark.parametrize("dtype,shift", [("float16", 0), ("float32", 0), ("float16", 1)])
def test_computed_stores(target, dtype, shift):
    M, N = 64, 256
    a, b = (RNG.standard_normal((M, N)).astype(dtype) for _ in range(2))
    bias = RNG.standard_normal(M).astype(dtype)
    c = np.full((M, N + shift), np.nan, dtype)
    tilelang.compile(add(M, N, dtype, shift), target=target)(a, b, bias, c)
    want = (a.astype(np.float32) + b.astype(np.float32) * bias.astype(np.float32)[:, None]).astype(dtype)
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(c[:, shift:].astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


def test_fragment_epilogue(target):
    M, N = 32, 64
    x = RNG.standard_normal((M, N)).astype(np.float32)
    scale = RNG.standard_normal(M).astype(np.float32)
    o = np.full((M, N), np.nan, np.float32)
    tilelang.compile(fragment_epilogue(M, N), target=target)(x, scale, o)
    np.testing.assert_allclose(o, np.exp(x) * scale[:, None], rtol=1e-5, atol=1e-6)


def test_vector_loads_and_stores_in_the_machine_code():
    # float16: the default spread gives a thread 8 consecutive halves (16 bytes of the
    # output): 16-byte loads of A and B, one 16-byte store; bias by itself.
    sass, _, _ = sass_of(add(64, 256, "float16"))
    assert "LDG.E.128" in sass and "STG.E.128" in sass, sass
    assert "STG.E.U16" not in sass
    # float32: 16-byte vectors.
    sass, _, _ = sass_of(add(64, 256, "float32"))
    assert "LDG.E.128" in sass and "STG.E.128" in sass, sass
    # A store one column off its alignment stays element by element.
    sass, _, _ = sass_of(add(64, 256, "float16", shift=1))
    assert "STG.E.U16" in sass and "STG.E.128" not in sass and "STG.E.64" not in sass
    # From registers: the computed lanes of a fragment are one 16-byte store.
    sass, _, _ = sass_of(fragment_epilogue(32, 64))
    assert "STG.E.128" in sass, sass
