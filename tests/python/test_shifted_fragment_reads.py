"""T.Parallel loops that read a fragment at an offset set by an enclosing loop, as DeepSeek's
sparse MLA backward stores its dK/dV accumulator half a tile at a time:

    for s in range(2):
        for i, j in T.Parallel(32, D):
            if i < 16:
                half[i, j] = acc[i + s * 16, j]

The fragment drives the loop (each iteration runs where acc[i, j] is held); the read at
the offset needs no copy through shared memory when every value of the offset moves an
element only between a thread's own registers (the tensor cores' accumulator of a 1 x W
warp grid: each warp holds all 32 rows), and the loop over s is unrolled so that the
registers are picked at compile time. Otherwise the fragment still goes through shared
memory, as the report says. Numerics on every target; the CUDA lowering without a GPU.
Also the gathered-row vector atomics of the same kernel (T.atomic_addx4 into rows picked
by an index tensor: the row guard is taken out of the four lanes)."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from sass import sass_of

RNG = np.random.default_rng(11)


def halves(M=32, K=32, N=64, threads=128, shift=None):
    """Out = A @ B, stored from the accumulator half a tile (M // 2 rows) at a time through
    a shared tile; shift(s) gives the row offset of half s (default s * M // 2)."""
    H = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            half = T.alloc_shared((H, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for s in range(2):
                for i, j in T.Parallel(M, N):
                    if i < H:
                        half[i, j] = acc[i + (shift(s) if shift else s * H), j]
                T.copy(half, Out[s * H:(s + 1) * H, :])

    return main


def check_halves(kernel, M=32, K=32, N=64, rows=None):
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    out = np.zeros((M, N), np.float32)
    kernel(a, b, out)
    want = a.astype(np.float32) @ b.astype(np.float32)
    if rows is not None:
        want = want[rows]
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def test_halves_of_an_accumulator(target):
    check_halves(tilelang.compile(halves(), target=target))


def test_halves_in_the_other_order(target):
    # Half 0 is the accumulator's second half: offsets 16, 0.
    kernel = tilelang.compile(halves(shift=lambda s: (1 - s) * 16), target=target)
    check_halves(kernel, rows=np.r_[16:32, 0:16])


def test_shifted_reads_stay_in_registers_on_cuda():
    """No exchange through shared memory, the loop over s unrolled, and no local memory in
    the machine code."""
    sass, usage, report = sass_of(halves(), ["tl.disable_wgmma"])
    assert "through shared memory" not in report, report
    assert "loop over 's' unrolled: it picks elements of fragment 'acc'" in report, report
    assert "1 x 4 warps" in report, report  # FullCol: the warps along N, each holding all 32 rows
    assert "LDL" not in sass and "STL" not in sass
    assert "LOCAL:0" in usage


def crossing_halves():
    """As halves(), with 2 x 2 warps (FullRow): rows 16..31 are another warp's."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 64), "float16"), Out: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((32, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            half = T.alloc_shared((16, 64), "float32")
            acc = T.alloc_fragment((32, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            for s in range(2):
                for i, j in T.Parallel(32, 64):
                    if i < 16:
                        half[i, j] = acc[i + s * 16, j]
                T.copy(half, Out[s * 16:(s + 1) * 16, :])

    return main


def test_offsets_that_cross_threads_go_through_shared_memory():
    """The read at offset 16 needs another warp's rows: it goes through shared memory, and
    the report says so."""
    report = _C.lower(crossing_halves().handle, "cuda -arch=sm_90a", ["tl.disable_wgmma"]).lowering_report()
    assert "fragment 'acc' reaches this T.Parallel loop through shared memory" in report, report


def test_offsets_that_cross_threads_are_right(target):
    check_halves(tilelang.compile(crossing_halves(), target=target))


def gathered_rows(R=16, N=64, rows_total=40):
    """Out[idx[r], :] += V[r, :] four floats at a time (T.atomic_addx4), idx from a tensor."""
    @T.prim_func
    def main(V: T.Tensor((R, N), "float32"), idx: T.Tensor((R,), "int32"), Out: T.Tensor((rows_total, N), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((R, N), "float32")
            T.copy(V, S)
            for r, j in T.Parallel(R, N // 4):
                T.atomic_addx4(Out[idx[r], j * 4], S[r, j * 4])

    return main


def test_gathered_rows_add_four_floats_at_once(target):
    kernel = tilelang.compile(gathered_rows(), target=target)
    v = RNG.standard_normal((16, 64)).astype(np.float32)
    idx = RNG.permutation(40)[:16].astype(np.int32)
    out = np.zeros((40, 64), np.float32)
    kernel(v, idx, out)
    want = np.zeros((40, 64), np.float32)
    want[idx] += 2 * v  # two blocks add the same rows
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_gathered_row_guard_leaves_the_vector_atomic_whole():
    """The guard on the gathered row (idx[r] may fall outside Out) is one test per four
    lanes, so each thread's four floats are one REDG.E.ADD.F32x4."""
    sass, _, _ = sass_of(gathered_rows())
    assert "REDG.E.ADD.F32x4." in sass, sass
