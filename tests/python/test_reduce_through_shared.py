"""T.reduce_* with a shared-memory source or destination, as upstream writes them (e.g. the
tilelang-puzzles conv solution reduces a fragment into a T.alloc_shared row inside a serial
loop): the source is staged into a fragment, the result reaches shared memory through one.
Numerics on every target; the CUDA lowering without a GPU."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

RNG = np.random.default_rng(5)
ROWS, COLS, STEPS = 16, 32, 3


def fragment_into_shared(clear=True):
    # Each step reduces a (ROWS, COLS) fragment into a shared row vector and stores it.
    @T.prim_func
    def main(A: T.Tensor((STEPS, ROWS, COLS), "float32"), B: T.Tensor((STEPS, ROWS), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_fragment((ROWS, COLS), "float32")
            row = T.alloc_shared((ROWS,), "float32")
            T.fill(row, 1.0)
            for s in T.Serial(STEPS):
                T.copy(A[s, 0, 0], tile)
                T.reduce_sum(tile, row, dim=-1, clear=clear)
                T.copy(row, B[s, 0])
    return main


def shared_into_fragment():
    @T.prim_func
    def main(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((ROWS, COLS), "float32")
            m = T.alloc_fragment((ROWS,), "float32")
            T.copy(A, S)
            T.reduce_max(S, m, dim=1)
            T.copy(m, B)
    return main


def shared_into_shared():
    @T.prim_func
    def main(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((ROWS, COLS), "float32")
            r = T.alloc_shared((ROWS,), "float32")
            T.copy(A, S)
            T.reduce_absmax(S, r, dim=1)
            T.copy(r, B)
    return main


@pytest.mark.parametrize("clear", [True, False])
def test_fragment_reduced_into_shared(target, clear):
    k = tilelang.compile(fragment_into_shared(clear), target=target)
    a = RNG.standard_normal((STEPS, ROWS, COLS)).astype("float32")
    b = np.zeros((STEPS, ROWS), "float32")
    k(a, b)
    sums = a.sum(axis=2)
    expected = sums if clear else 1.0 + np.cumsum(sums, axis=0)
    np.testing.assert_allclose(b, expected, rtol=1e-5, atol=1e-5)


def test_shared_reduced_into_fragment(target):
    k = tilelang.compile(shared_into_fragment(), target=target)
    a = RNG.standard_normal((ROWS, COLS)).astype("float32")
    b = np.zeros(ROWS, "float32")
    k(a, b)
    np.testing.assert_array_equal(b, a.max(axis=1))


def test_shared_reduced_into_shared(target):
    k = tilelang.compile(shared_into_shared(), target=target)
    a = RNG.standard_normal((ROWS, COLS)).astype("float32")
    b = np.zeros(ROWS, "float32")
    k(a, b)
    np.testing.assert_array_equal(b, np.abs(a).max(axis=1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("make", [lambda: fragment_into_shared(True), lambda: fragment_into_shared(False),
                                  shared_into_fragment, shared_into_shared],
                         ids=["frag-shared", "frag-shared-accumulate", "shared-frag", "shared-shared"])
def test_cuda_lowering_accepts_shared_operands(make, arch):
    target = f"cuda -arch={arch}"
    source = _C.codegen(_C.lower(make().handle, target), target)
    assert "__global__" in source


def test_the_staging_fragments_are_in_the_ir():
    script = fragment_into_shared(False).script()
    assert 'row_frag = T.alloc_fragment((16,), "float32")' in script, script
    assert "T.copy(row, row_frag)" in script and "T.copy(row_frag, row)" in script, script


def middle_dim(kind, clear):
    # A 3-D fragment reduced over its middle dimension (upstream's conv puzzle: temp[i, kl, f]
    # summed over kl), into a fragment and, each step, added to what it holds.
    @T.prim_func
    def main(A: T.Tensor((STEPS, 8, 16, 32), "float32"), B: T.Tensor((8, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.alloc_fragment((8, 16, 32), "float32")
            r = T.alloc_fragment((8, 32), "float32")
            T.fill(r, 0.5)
            for s in T.Serial(STEPS):
                T.copy(A[s, 0, 0, 0], t)
                getattr(T, f"reduce_{kind}")(t, r, dim=1, clear=clear)
            T.copy(r, B)
    return main


@pytest.mark.parametrize("kind, clear", [("sum", True), ("sum", False), ("max", False), ("absmax", True)])
def test_fragment_reduced_over_a_middle_dimension(target, kind, clear):
    k = tilelang.compile(middle_dim(kind, clear), target=target)
    a = RNG.standard_normal((STEPS, 8, 16, 32)).astype("float32")
    b = np.zeros((8, 32), "float32")
    k(a, b)
    step = {"sum": lambda x: x.sum(axis=1), "max": lambda x: x.max(axis=1),
            "absmax": lambda x: np.abs(x).max(axis=1)}[kind]
    if clear:
        expected = step(a[-1])
    elif kind == "sum":
        expected = 0.5 + sum(step(a[s]) for s in range(STEPS))
    else:
        expected = np.maximum(0.5, np.max([step(a[s]) for s in range(STEPS)], axis=0))
    np.testing.assert_allclose(b, expected, rtol=1e-5, atol=1e-5)


def test_middle_dimension_reduction_is_reported_as_slower():
    report = _C.lower(middle_dim("sum", True).handle, "cuda -arch=sm_80").lowering_report()
    assert "T.reduce_sum of t over dim 1 through shared memory (16384 bytes) [slower path:" in report, report


def rows_of_a_fragment(splits=4, rows=128):
    # upstream's split-KV combine (flash_decoding/example_mha_inference): the log-sum-exps of
    # every split in one fragment, reduced over the splits, then row k copied into a 1-D
    # fragment spread over the threads another way.
    @T.prim_func
    def main(L: T.Tensor((splits, rows), "float32"), B: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            lse = T.alloc_fragment((splits, rows), "float32")
            row = T.alloc_fragment((rows,), "float32")
            top = T.alloc_fragment((rows,), "float32")
            acc = T.alloc_fragment((rows,), "float32")
            T.copy(L, lse)
            T.reduce_max(lse, top, dim=0)
            T.clear(acc)
            for k in T.serial(splits):
                T.copy(lse[k, :], row)
                for i in T.Parallel(rows):
                    acc[i] += T.exp2(row[i] - top[i])
            T.copy(acc, B)
    return main


def test_fragment_row_copied_into_another_spread(target):
    k = tilelang.compile(rows_of_a_fragment(), target=target)
    a = RNG.standard_normal((4, 128)).astype("float32")
    b = np.zeros(128, "float32")
    k(a, b)
    np.testing.assert_allclose(b, np.exp2(a - a.max(axis=0)).sum(axis=0), rtol=1e-5, atol=1e-6)
    if target == "cpu":
        report = _C.lower(rows_of_a_fragment().handle, "cuda -arch=sm_80").lowering_report()
        assert "T.copy lse -> row through shared memory (2048 bytes) [slower path: the fragments are spread over " \
               "the threads differently" in report, report
