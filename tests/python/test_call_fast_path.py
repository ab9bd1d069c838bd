"""Repeated calls with arguments shaped like an earlier call's skip the argument checks
that call passed; anything that differs is checked again in full."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T


def _add(n=64):
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64) as bx:  # noqa: F841
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]

    return add


def test_repeated_calls_read_the_new_arrays(rng):
    kernel = tilelang.compile(_add(), out_idx=[2], target="cpu")
    for _ in range(4):
        a, b = rng.uniform(-1, 1, 64).astype(np.float32), rng.uniform(-1, 1, 64).astype(np.float32)
        c = kernel(a, b)
        np.testing.assert_array_equal(c, a + b)
    out = np.full(64, np.nan, np.float32)
    kernel(a, b, out)
    kernel(b, a, out)
    np.testing.assert_array_equal(out, a + b)


def test_arguments_that_differ_are_checked_again(rng):
    kernel = tilelang.compile(_add(), target="cpu")
    a, b, c = (np.ones(64, np.float32) for _ in range(3))
    kernel(a, b, c)
    with pytest.raises(ValueError, match="shape"):
        kernel(a, b, np.ones(65, np.float32))
    with pytest.raises(TypeError, match="dtype float64, expected float32"):
        kernel(a, b, np.ones(64, np.float64))
    ro = np.ones(64, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kernel(a, b, ro)
    with pytest.raises(ValueError, match="contiguous row-major"):
        kernel(np.ones(128, np.float32)[::2], b, c)
    kernel(a, b, c)  # the checked signature still takes the fast path
    np.testing.assert_array_equal(c, a + b)
