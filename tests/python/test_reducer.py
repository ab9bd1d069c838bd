"""Reducers (T.alloc_reducer, T.reducer_init, T.reducer_update, T.finalize_reducer, and
upstream's older form with T.clear / `acc[i] += v` / T.finalize_reducer(acc)): each logical
T.Parallel iteration counts once, also where a replicated layout gives it to several threads;
the starting value is combined once per element. Run on every test target, and on the HIP
lowering through the host emulation (wave64 and wave32)."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangTypeError

from hip_emulation import EmulatedKernel

M, N = 64, 32


def _run(func, target, args, out_shapes):
    """Runs func (its last len(out_shapes) tensors are outputs) on target or an emulated HIP arch."""
    if target.startswith("gfx"):
        outs = [np.zeros(s, dtype=d) for s, d in out_shapes]
        EmulatedKernel(func, target)(*args, *outs)
        return outs
    n = len(args)
    kernel = tilelang.compile(func, out_idx=list(range(n, n + len(out_shapes))), target=target)
    if target.startswith("cuda"):
        import torch
        outs = kernel(*[torch.from_numpy(a).cuda() for a in args])
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [o.cpu().numpy() for o in outs]
    outs = kernel(*args)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return [np.asarray(o) for o in outs]


@pytest.fixture(params=["target", "gfx942", "gfx1100"])
def where(request, target):
    """The test target, and the HIP lowering on a wave64 and a wave32 architecture (once)."""
    if request.param != "target":
        if target != "cpu":
            pytest.skip("the HIP emulation runs once, with the cpu target's run")
        return request.param
    return target


def _row_sums_and_max_total(threads):
    """B = row sums of A by a sum reducer over a 2-D T.Parallel; C = 1.5 + the sum of the row
    maxima, contributed from a T.Parallel over the (replicated) row-maximum fragment; D[r] =
    the sum of the maxima of the rows i with i % 3 == r (iterations adding into one element)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32"), C: T.Tensor((1,), "float32"),
             D: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=threads):
            A_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_f)
            row_max = T.alloc_fragment((M,), "float32")
            T.reduce_max(A_f, row_max, dim=1)
            sums = T.alloc_reducer((M,), "float32", op="sum")
            total = T.alloc_reducer((1,), "float32")
            by_three = T.alloc_reducer((3,), "float32")
            T.reducer_init(sums)
            T.reducer_init(total, 1.5)
            T.reducer_init(by_three)
            for i, j in T.Parallel(M, N):
                T.reducer_update(sums[i], A_f[i, j])
            for i in T.Parallel(M):
                T.reducer_update(total[0], row_max[i])
                T.reducer_update(by_three[i % 3], row_max[i])
            sums_f = T.alloc_fragment((M,), "float32")
            total_f = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(sums, sums_f)
            T.finalize_reducer(total, total_f)
            T.copy(sums_f, B)
            T.copy(total_f, C)
            three_f = T.alloc_fragment((3,), "float32")
            T.finalize_reducer(by_three, three_f)
            T.copy(three_f, D)

    return main


@pytest.mark.parametrize("threads", [128, 256])
def test_sum_reducers_count_each_iteration_once(where, rng, threads):
    a = rng.standard_normal((M, N)).astype(np.float32)
    b, c, d = _run(_row_sums_and_max_total(threads), where, [a],
                   [((M,), np.float32), ((1,), np.float32), ((3,), np.float32)])
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c, [a.max(1).sum() + 1.5], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(d, [a.max(1)[r::3].sum() for r in range(3)], rtol=1e-5, atol=1e-4)


def _max_and_or(steps=3):
    """Column maxima of A, started at 0.25, over `steps` serial passes of a T.Parallel; and the
    bitwise or of all of X's elements."""

    @T.prim_func
    def main(A: T.Tensor((steps, M, N), "float32"), X: T.Tensor((M, N), "int32"), B: T.Tensor((N,), "float32"),
             Y: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=128):
            col_max = T.alloc_reducer((N,), "float32", op="max")
            bits = T.alloc_reducer((1,), "int32", op="bitor")
            T.reducer_init(col_max, 0.25)
            T.reducer_init(bits)
            X_s = T.alloc_shared((M, N), "int32")
            T.copy(X, X_s)
            for s in T.serial(steps):
                for i, j in T.Parallel(M, N):
                    T.reducer_update(col_max[j], A[s, i, j])
            for i, j in T.Parallel(M, N):
                T.reducer_update(bits[0], X_s[i, j])
            out = T.alloc_fragment((N,), "float32")
            out_bits = T.alloc_fragment((1,), "int32")
            T.finalize_reducer(col_max, out)
            T.finalize_reducer(bits, out_bits)
            T.copy(out, B)
            T.copy(out_bits, Y)

    return main


def test_max_and_bitor_reducers(where, rng):
    a = rng.standard_normal((3, M, N)).astype(np.float32) - 3.0  # most columns' maxima below 0.25
    a[1, 5, 7] = 4.0
    x = (1 << rng.integers(0, 20, size=(M, N))).astype(np.int32)
    b, y = _run(_max_and_or(), where, [a, x], [((N,), np.float32), ((1,), np.int32)])
    np.testing.assert_array_equal(b, np.maximum(a.max((0, 1)), 0.25))
    assert int(y[0]) == int(np.bitwise_or.reduce(x.ravel()))


def _legacy_row_sums():
    """Upstream's older form: T.clear, `acc[i] += v` in the loop, T.finalize_reducer in place,
    then every thread reads the totals."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            A_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_f)
            acc = T.alloc_reducer((M,), "float32", op="sum", replication="all")
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                acc[i] += A_f[i, j] * 2.0
            T.finalize_reducer(acc)
            for i in T.Parallel(M):
                B[i] = acc[i] + 1.0

    return main


def test_legacy_in_place_form(where, rng):
    a = rng.standard_normal((M, N)).astype(np.float32)
    (b,) = _run(_legacy_row_sums(), where, [a], [((M,), np.float32)])
    np.testing.assert_allclose(b, 2 * a.sum(1) + 1, rtol=1e-5, atol=1e-4)


def test_bad_uses_are_typed_errors():
    with pytest.raises(TileLangTypeError, match=r"T.alloc_reducer: unknown op 'prod'"):
        @T.prim_func
        def unknown_op(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.alloc_reducer((4,), "float32", op="prod")

    with pytest.raises(TileLangTypeError, match=r"op 'bitand' needs an integer dtype, got float32"):
        @T.prim_func
        def bitand_float(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.alloc_reducer((4,), "float32", op="bitand")

    with pytest.raises(TileLangTypeError, match=r"T.reducer_update: .* is not a reducer"):
        @T.prim_func
        def not_a_reducer(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                f = T.alloc_fragment((4,), "float32")
                for i in T.Parallel(4):
                    T.reducer_update(f[i], A[i])

    with pytest.raises(TileLangTypeError, match=r"is float16, the reducer 'acc' float32"):
        @T.prim_func
        def wrong_dtype(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float16")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((4,), "float32")
                T.reducer_init(acc)
                for i in T.Parallel(4):
                    T.reducer_update(acc[i], A[i])
                out = T.alloc_fragment((4,), "float16")
                T.finalize_reducer(acc, out)
                T.copy(out, B)

        tilelang.compile(wrong_dtype, target="cpu")
