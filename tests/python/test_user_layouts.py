"""T.annotate_layout({buf: T.Layout(shape, fn)}): a buffer stored with element idx at fn(idx)
(global tensors, shared tiles, local arrays). Results and raw storage against numpy on every
target; the lowering report; vectors kept only where the layout keeps lanes together and
aligned; errors for layouts that cannot be right."""
import re
import sys
import warnings

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import (TileLangLayoutError, TileLangPerformanceWarning, TileLangShapeError, TileLangTypeError,
                             TileLangUnsupportedError)

from sass import sass_of


def _report(func, target="cuda -arch=sm_80"):
    return _C.lower(func.handle, target).lowering_report()


# ---------------------------------------------------------------- global tensors

def transposed_store(M, N):
    """B = 2 A, with B stored column-major (its storage seen as (N, M) is (2A)^T)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 16, threads=128) as bx:
            T.annotate_layout({B: T.Layout(B.shape, lambda i, j: [j, i])})
            for i, j in T.Parallel(16, N):
                B[bx * 16 + i, j] = A[bx * 16 + i, j] * 2.0

    return main


@pytest.mark.parametrize("M,N", [(32, 48), (64, 16)])
def test_global_tensor_stored_transposed(target, M, N):
    rng = np.random.default_rng(M + N)
    a = rng.standard_normal((M, N)).astype(np.float32)
    b = np.zeros((M, N), np.float32)
    tilelang.compile(transposed_store(M, N), target=target)(a, b)
    np.testing.assert_array_equal(b.reshape(N, M), 2 * a.T)


def dq_layout(dQ):
    """FlashAttention backward's dQ accumulator: a warp's atomic adds (mma accumulator rows
    of 8, pairs of columns) land in 32 consecutive floats."""
    return T.Layout(dQ.shape, lambda b, l, h, d: [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])


def dq_position(B, L, H, D):
    """The flat storage position of every logical element of the layout above, by numpy."""
    b, l, h, d = np.meshgrid(np.arange(B), np.arange(L), np.arange(H), np.arange(D), indexing="ij")
    pos = [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]
    ext = [B, L // 8, H, D // 8, 2, 32]
    flat = np.zeros_like(b)
    for p, e in zip(pos, ext):
        flat = flat * e + p
    return flat


def dq_accumulate(B, L, H, D, blk):
    @T.prim_func
    def main(X: T.Tensor((B, L, H, D), "float32"), dQ: T.Tensor((B, L, H, D), "float32")):
        with T.Kernel(L // blk, H, B, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: dq_layout(dQ)})
            acc = T.alloc_fragment((blk, D), "float32")
            T.copy(X[bz, bx * blk:(bx + 1) * blk, by, :], acc)
            T.atomic_add(dQ[bz, bx * blk:(bx + 1) * blk, by, :], acc)

    return main


def dq_postprocess(B, L, H, D, blk):
    @T.prim_func
    def main(dQ: T.Tensor((B, L, H, D), "float32"), Out: T.Tensor((B, L, H, D), "float16")):
        with T.Kernel(L // blk, H, B, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: dq_layout(dQ)})
            tile = T.alloc_shared((blk, D), "float32")
            T.copy(dQ[bz, bx * blk:(bx + 1) * blk, by, :], tile)
            T.copy(tile, Out[bz, bx * blk:(bx + 1) * blk, by, :])

    return main


def test_flash_attention_dq_layout(target):
    B, L, H, D, blk = 2, 64, 3, 32, 32
    rng = np.random.default_rng(7)
    x = rng.standard_normal((B, L, H, D)).astype(np.float32)
    dq = np.zeros((B, L, H, D), np.float32)
    acc = tilelang.compile(dq_accumulate(B, L, H, D, blk), target=target)
    acc(x, dq)
    acc(x, dq)
    raw = dq.reshape(-1)
    np.testing.assert_allclose(raw[dq_position(B, L, H, D)], 2 * x, rtol=1e-6, atol=1e-6)
    out = np.zeros((B, L, H, D), np.float16)
    tilelang.compile(dq_postprocess(B, L, H, D, blk), target=target)(dq, out)
    np.testing.assert_allclose(out.astype(np.float32), 2 * x, rtol=2e-3, atol=2e-3)


def test_dq_layout_report_and_scalar_reads():
    rep = _report(dq_postprocess(2, 64, 3, 32, 32))
    assert re.search(r"'dQ' is stored through its T\.Layout over 2 x 8 x 3 x 4 x 2 x 32 positions", rep), rep
    # d and d + 1 are 32 floats apart: the copy's vector reads of dQ into the tile become
    # element reads.
    assert re.search(r"of 'dQ' run element by element \[slower path: its T\.Layout keeps no two consecutive "
                     r"elements together and aligned\]", rep), rep


# ---------------------------------------------------------------- shared tiles

def rotated_round_trip(M, N, dtype, shift):
    """B[:, j] = A[:, N - 1 - j] through a shared tile whose rows are rotated by shift * (i % 8)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M // 32, threads=128) as bx:
            S = T.alloc_shared((32, N), dtype)
            T.annotate_layout({S: T.Layout(S.shape, lambda i, j: [i, (j + shift * (i % 8)) % N])})
            T.copy(A[bx * 32, 0], S)
            for i, j in T.Parallel(32, N):
                B[bx * 32 + i, j] = S[i, N - 1 - j]

    return main


@pytest.mark.parametrize("dtype,shift", [("float16", 8), ("float16", 3), ("float32", 4)])
def test_shared_tile_layout(target, dtype, shift):
    M, N = 64, 64
    rng = np.random.default_rng(shift)
    a = rng.standard_normal((M, N)).astype(dtype)
    b = np.zeros((M, N), dtype)
    tilelang.compile(rotated_round_trip(M, N, dtype, shift), target=target)(a, b)
    np.testing.assert_array_equal(b, a[:, ::-1])


def test_vectors_kept_where_the_layout_keeps_lanes_together(monkeypatch):
    # fp16 rows rotated by 8 elements: 16-byte chunks stay whole and aligned.
    sass, _, rep = sass_of(rotated_round_trip(64, 64, "float16", 8), arch="sm_80")
    assert "'S' is stored through its T.Layout over 32 x 64 positions (vectors of up to 8 elements)" in rep, rep
    assert "slower path" not in rep, rep
    assert "STS.128" in sass
    # Rotated by 3: no two neighbours are aligned; each element is stored by itself, and the
    # report and a warning say so.
    sass, _, rep = sass_of(rotated_round_trip(64, 64, "float16", 3), arch="sm_80")
    assert re.search(r"8-element vectors of 'S' run element by element \[slower path: its T\.Layout keeps no two "
                     r"consecutive elements together and aligned\]", rep), rep
    assert "STS.128" not in sass and "STS.U16" in sass
    jk = sys.modules["tilelang.jit.kernel"]
    monkeypatch.setattr(jk, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        jk._warn_slower_paths(rep)
    assert len(seen) == 1 and issubclass(seen[0].category, TileLangPerformanceWarning) and "'S'" in str(seen[0].message)


def blocked_pairs(M, N, pairs_together):
    """Two kernels through a global C stored in 8 x 8 blocks, row-major inside a block (the
    lanes of a row stay together) or with the even and odd columns apart: store (A into C)
    and load (C into B)."""
    def layout(C):
        if pairs_together:
            return T.Layout(C.shape, lambda i, j: [i // 8, j // 8, 8 * (i % 8) + j % 8])
        return T.Layout(C.shape, lambda i, j: [i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2])

    @T.prim_func
    def store(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 32, N // 64, threads=128) as (bx, by):
            T.annotate_layout({C: layout(C)})
            T.copy(A[bx * 32, by * 64], C[bx * 32:(bx + 1) * 32, by * 64:(by + 1) * 64])

    @T.prim_func
    def load(C: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 32, N // 64, threads=128) as (bx, by):
            T.annotate_layout({C: layout(C)})
            T.copy(C[bx * 32, by * 64], B[bx * 32:(bx + 1) * 32, by * 64:(by + 1) * 64])

    return store, load


@pytest.mark.parametrize("pairs_together", [True, False])
def test_vector_width_of_a_layout_too_large_to_enumerate(pairs_together):
    """Over 2^20 elements the contiguous, aligned width is proved by the analyzer: the last
    index at 8 q + j lands at lane 0's position plus j; with even and odd columns apart, no
    width holds and the vectors run element by element (and the report says so)."""
    for kernel in blocked_pairs(1024, 2048, pairs_together):
        rep = _report(kernel)
        if pairs_together:
            assert "'C' is stored through its T.Layout over 128 x 256 x 64 positions (vectors of up to 8 " \
                   "elements)" in rep, rep
            assert "slower path" not in rep, rep
        else:
            assert "vectors of up to" not in rep and "vectors of 'C' run element by element" in rep, rep


def test_a_large_layout_round_trips_on_the_cpu():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 2048)).astype(np.float32)
    c, b = np.zeros_like(a), np.zeros_like(a)
    store, load = blocked_pairs(1024, 2048, True)
    tilelang.compile(store, target="cpu")(a, c)
    tilelang.compile(load, target="cpu")(c, b)
    np.testing.assert_array_equal(b, a)
    # C holds A in its blocked order: element (i, j) at block (i // 8, j // 8), row i % 8.
    blocks = a.reshape(128, 8, 256, 8).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(c.reshape(-1), blocks)


def pipelined_sum(M, K, blk_k, shift):
    """Out[:, j] = sum over k-tiles of A[:, k * blk_k + j], the tiles staged through a rotated
    shared tile in a two-stage pipeline."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Out: T.Tensor((M, blk_k), "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            S = T.alloc_shared((32, blk_k), "float16")
            acc = T.alloc_fragment((32, blk_k), "float32")
            T.annotate_layout({S: T.Layout(S.shape, lambda i, j: [i, (j + shift * (i % 8)) % blk_k])})
            T.clear(acc)
            for k in T.Pipelined(K // blk_k, num_stages=2):
                T.copy(A[bx * 32, k * blk_k], S)
                for i, j in T.Parallel(32, blk_k):
                    acc[i, j] += S[i, j]
            T.copy(acc, Out[bx * 32, 0])

    return main


@pytest.mark.parametrize("shift", [8, 1])
def test_pipelined_shared_tile_layout(target, shift):
    M, K, blk = 64, 256, 64
    rng = np.random.default_rng(shift)
    a = rng.integers(-4, 5, (M, K)).astype(np.float16)
    out = np.zeros((M, blk), np.float32)
    tilelang.compile(pipelined_sum(M, K, blk, shift), target=target)(a, out)
    np.testing.assert_array_equal(out, a.astype(np.float32).reshape(M, K // blk, blk).sum(axis=1))


def test_pipelined_copies_stay_cp_async_where_they_can():
    aligned = _C.codegen(_C.lower(pipelined_sum(64, 256, 64, 8).handle, "cuda -arch=sm_80"), "cuda -arch=sm_80")
    assert "cp_async" in aligned or "cp.async" in aligned
    rep = _report(pipelined_sum(64, 256, 64, 1))
    assert re.search(r"16-byte cp\.async copies of 'S' run element by element \[slower path", rep), rep


# ---------------------------------------------------------------- what is refused

def _annotated(layout_of, shape=(8, 8), scope="shared"):
    @T.prim_func
    def main(A: T.Tensor(shape, "float32"), B: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=32) as _:
            if scope == "shared":
                S = T.alloc_shared(shape, "float32")
            else:
                S = T.alloc_fragment(shape, "float32")
            T.annotate_layout({S: layout_of(S)})
            T.copy(A, S)
            T.copy(S, B)

    return main


def test_two_elements_at_one_position():
    with pytest.raises(TileLangLayoutError, match=r"the layout of 'S' puts elements \[0, 0\] and \[0, 1\] at the "
                                                  r"same position"):
        _report(_annotated(lambda S: T.Layout(S.shape, lambda i, j: [i, j // 2])))


def test_layout_past_the_storage():
    with pytest.raises(TileLangLayoutError, match=r"the layout of 'S' reaches 72 positions \(extents 8 x 9\), more "
                                                  r"than the 64 elements of 'S'"):
        _report(_annotated(lambda S: T.Layout(S.shape, lambda i, j: [i, j + 1])))


def test_unbounded_position():
    with pytest.raises(TileLangLayoutError, match=r"position 1 of the layout of 'S' \(.*\) has no bound"):
        _report(_annotated(lambda S: T.Layout(S.shape, lambda i, j: [i, j - 1])))


def test_shape_mismatch():
    with pytest.raises(TileLangShapeError, match=r"the layout's shape \[4, 4\] is not the shape of 'S' \[8, 8\]"):
        _annotated(lambda S: T.Layout([4, 4], lambda i, j: [i, j]))


def test_fragment_refused():
    with pytest.raises(TileLangUnsupportedError, match=r"'S' is a fragment; a T\.Layout is for global, shared or "
                                                       r"local buffers"):
        _annotated(lambda S: T.Layout(S.shape, lambda i, j: [j, i]), scope="fragment")


def test_layout_function_that_fails():
    with pytest.raises(TileLangTypeError, match=r"the layout function of 'S' failed on index expressions: "
                                                r"AttributeError"):
        _annotated(lambda S: T.Layout(S.shape, lambda i, j: [i, j.no_such_thing]))


def test_gemm_operand_refused_on_gpus():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            Cf = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({As: T.Layout(As.shape, lambda i, j: [j, i])})
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(Cf)
            T.gemm(As, Bs, Cf)
            T.copy(Cf, C)

    with pytest.raises(TileLangLayoutError, match=r"T\.gemm reads or writes 'As', which has a layout by hand"):
        _report(main)
    # On the CPU a T.gemm is loops over elements: it reads through the layout.
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    tilelang.compile(main, target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_view_of_a_laid_out_buffer_refused():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _:
            S = T.alloc_shared((8, 8), "float32")
            T.annotate_layout({S: T.Layout(S.shape, lambda i, j: [j, i])})
            T.copy(A, S)
            flat = T.reshape(S, (64,))
            T.copy(flat, B)

    with pytest.raises(TileLangLayoutError, match=r"'flat' is a T\.reshape / T\.view of 'S', which has a layout "
                                                  r"by hand"):
        _report(main)


def test_disable_tma_is_honoured():
    """T.copy(..., disable_tma=True) keeps a Hopper pipeline's loads off TMA, with the reason."""
    def gemm(disable):
        @T.prim_func
        def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
                 C: T.Tensor((256, 256), "float32")):
            with T.Kernel(2, 2, threads=128) as (bx, by):
                As = T.alloc_shared((128, 64), "float16")
                Bs = T.alloc_shared((64, 128), "float16")
                Cf = T.alloc_fragment((128, 128), "float32")
                T.clear(Cf)
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(A[by * 128, k * 64], As, disable_tma=disable)
                    T.copy(B[k * 64, bx * 128], Bs)
                    T.gemm(As, Bs, Cf)
                T.copy(Cf, C[by * 128, bx * 128])

        return main

    assert "T.copy(..., disable_tma=True)" not in _report(gemm(False), "cuda -arch=sm_90a")
    assert "T.copy(..., disable_tma=True)" in _report(gemm(True), "cuda -arch=sm_90a")


@pytest.mark.parametrize("name", ["transposed", "dq_accumulate", "dq_postprocess", "rotated", "pipelined"])
def test_cuda_code_compiles(name):
    """Every kernel above through NVRTC for sm_90a (the GPU script runs them on cuda)."""
    func = {"transposed": lambda: transposed_store(32, 48), "dq_accumulate": lambda: dq_accumulate(2, 64, 3, 32, 32),
            "dq_postprocess": lambda: dq_postprocess(2, 64, 3, 32, 32),
            "rotated": lambda: rotated_round_trip(64, 64, "float16", 8),
            "pipelined": lambda: pipelined_sum(64, 256, 64, 8)}[name]()
    sass, _, rep = sass_of(func)
    assert "stored through its T.Layout" in rep


def converting_copy(M, N, laid_out):
    """B (float16) = A (float32) by one T.copy, A in 8 x 8 blocks when laid_out (the
    attention backward's dQ accumulator is read so)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // 64, N // 128, threads=128) as (bx, by):
            if laid_out:
                T.annotate_layout({A: T.Layout(A.shape, lambda i, j: [i // 8, j // 8, 8 * (i % 8) + j % 8])})
            T.copy(A[bx * 64, by * 128], B[bx * 64:(bx + 1) * 64, by * 128:(by + 1) * 128])

    return main


@pytest.mark.parametrize("laid_out", [False, True])
def test_converting_copy_from_memory_reads_and_writes_vectors(laid_out):
    """Each thread's 8 float16 of B are one 16-byte store, their float32 sources two 16-byte
    loads (the layout keeps 8 floats of a row together)."""
    sass, _, rep = sass_of(converting_copy(128, 256, laid_out))
    assert "slower path" not in rep, rep
    assert "LDG.E.128" in sass and "STG.E.128" in sass, sass
    assert "STG.E.U16" not in sass


@pytest.mark.parametrize("laid_out", [False, True])
def test_converting_copy_from_memory(target, laid_out):
    a = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)
    b = np.zeros((128, 256), np.float16)
    if laid_out:  # the kernel reads A through its layout: store it so
        stored = a.reshape(16, 8, 32, 8).transpose(0, 2, 1, 3).reshape(128, 256)
    else:
        stored = a
    tilelang.compile(converting_copy(128, 256, laid_out), target=target)(np.ascontiguousarray(stored), b)
    np.testing.assert_array_equal(b, a.astype(np.float16))
