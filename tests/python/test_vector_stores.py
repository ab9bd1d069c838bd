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


def shared_sum_into_fragment(M, N, dtype):
    """C_local = A_shared + B_shared, then out: the fragment's lanes are registers, the
    shared tiles' reads of them vectors (upstream's elementwise example)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, N), dtype)
            B_s = T.alloc_shared((M, N), dtype)
            C_local = T.alloc_fragment((M, N), dtype)
            T.copy(A, A_s)
            T.copy(B, B_s)
            for i, j in T.Parallel(M, N):
                C_local[i, j] = A_s[i, j] + B_s[i, j]
            T.copy(C_local, C)

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


def test_shared_sum_into_fragment(target):
    M, N = 32, 64
    a, b = (RNG.standard_normal((M, N)).astype(np.float32) for _ in range(2))
    c = np.full((M, N), np.nan, np.float32)
    tilelang.compile(shared_sum_into_fragment(M, N, "float32"), target=target)(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=1e-6)


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
    # Into a fragment: the shared tiles' reads are 16-byte vectors (LDS.128), none by element.
    sass, _, _ = sass_of(shared_sum_into_fragment(64, 128, "float32"))
    assert "LDS.128" in sass and "LDS " not in sass.replace("LDS.128", ""), sass


def converting_copy_from_swizzled(M, N):
    """B (float16) = S (float32, swizzled in 16-byte chunks): 8 lanes of S are 32 bytes, two
    chunks the swizzle may place apart."""
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((M, N), "float32")
            T.annotate_layout({S: make_swizzled_layout(S)})
            T.copy(A, S)
            T.copy(S, B)

    return main


def test_converting_copy_from_a_swizzled_tile(target):
    a = RNG.standard_normal((64, 64)).astype(np.float32)
    b = np.zeros((64, 64), np.float16)
    tilelang.compile(converting_copy_from_swizzled(64, 64), target=target)(a, b)
    np.testing.assert_array_equal(b, a.astype(np.float16))


def test_vectors_of_a_swizzled_tile_stay_inside_a_chunk():
    """The 8 lanes would read two 16-byte chunks of the swizzled float32 tile: they are read
    one by one (each through the swizzle), not as vectors from the first lane's place."""
    from tilelang import _C
    lowered = _C.lower(converting_copy_from_swizzled(64, 64).handle, "cuda -arch=sm_90a")
    source = _C.codegen(lowered, "cuda -arch=sm_90a")
    assert "reinterpret_cast<const uint4*>(&S[" not in source and "__float2half_rn(S[" in source, source


def shifted_read(M, N, k):
    """C[i, j] = A[i, j + k]: the last columns read past A's end, so each such load is
    guarded (a select that gives 0) by the bounds rule."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j + k] * 2.0

    return main


def test_guarded_loads_are_not_read_ahead(target):
    a = RNG.standard_normal((32, 64)).astype(np.float32)
    c = np.full((32, 64), np.nan, np.float32)
    tilelang.compile(shifted_read(32, 64, 4), target=target)(a, c)
    want = np.zeros_like(a)
    want[:, :60] = a[:, 4:] * 2
    np.testing.assert_array_equal(c, want)


def test_guarded_loads_stay_under_their_guard_on_cuda():
    """A vector load would read the row's last columns whatever the guard says (past the
    tensor's end in its last row): the loads stay per element under the guard."""
    from tilelang import _C
    lowered = _C.lower(shifted_read(32, 64, 4).handle, "cuda -arch=sm_90a")
    source = _C.codegen(lowered, "cuda -arch=sm_90a")
    assert "reinterpret_cast<const uint4*>(&A[" not in source, source
    assert "? A[" in source or "? (A[" in source, source
