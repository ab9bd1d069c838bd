"""Helpers for tests of kernels: seeding, closeness checks, and pytest decorators that skip
a test when the hardware or package it needs is missing.

    import tilelang.testing

    @tilelang.testing.requires_cuda
    def test_gemm(): ...

    if __name__ == "__main__":
        tilelang.testing.main()
"""
from __future__ import annotations

import inspect
import random
import sys

import numpy as np

from ..utils.tensor import _to_numpy, torch_assert_close

__all__ = ["main", "set_random_seed", "assert_allclose", "torch_assert_close", "requires_cuda", "requires_gpu",
           "requires_rocm", "requires_metal", "requires_llvm", "requires_webgpu", "requires_package",
           "requires_cuda_compute_version", "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
           "requires_cuda_compute_version_eq", "requires_cuda_compute_version_le",
           "requires_cuda_compute_version_lt"]


def main():
    """Runs pytest on the calling file (with the command line's extra arguments) and exits."""
    import pytest
    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))


def set_random_seed(seed: int = 42) -> None:
    """Seeds Python's, numpy's and (when installed) torch's random generators, on every
    CUDA device too. The profiler's generated inputs come from numpy's generator."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def assert_allclose(actual, desired, rtol=1e-7, atol=1e-7):
    """Asserts |actual - desired| <= atol + rtol * |desired| element by element, after
    checking that the shapes are equal (numpy arrays, torch tensors, or array-likes)."""
    a, _, _ = _to_numpy(actual)
    d, _, _ = _to_numpy(desired)
    if tuple(a.shape) != tuple(d.shape):
        raise AssertionError(f"shapes differ: {tuple(a.shape)} vs {tuple(d.shape)}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)


class _Requirement:
    """A pytest decorator skipping the test, with the reason, unless a condition holds.
    `marks()` gives the pytest marks, for composing with other decorators."""

    def __init__(self, name, probe):
        self.name = name
        self._probe = probe  # () -> None when satisfied, else why not

    def reason(self):
        return self._probe()

    def marks(self):
        import pytest
        why = self.reason()
        return [pytest.mark.skipif(why is not None, reason=f"requires {self.name}: {why}")]

    def __call__(self, func):
        for mark in self.marks():
            func = mark(func)
        return func

    def __repr__(self):
        return f"tilelang.testing.requires_{self.name}"


def _cuda_reason():
    from .. import _C
    return None if _C.cuda_device_available() else _C.cuda_unavailable_reason() or "no CUDA device"


def _webgpu_reason():
    from ..jit import webgpu
    return webgpu.unavailable_reason() or None


requires_cuda = _Requirement("cuda", _cuda_reason)
requires_gpu = _Requirement("gpu", _cuda_reason)
requires_rocm = _Requirement("rocm", lambda: "the hip target is not in this build")
requires_metal = _Requirement("metal", lambda: "the metal target is not in this build")
requires_llvm = _Requirement("llvm", lambda: None)  # the host compiler: the cpu target
requires_webgpu = _Requirement("webgpu", _webgpu_reason)


def requires_package(*packages):
    """Skips the test unless every one of packages can be imported."""
    def reason():
        import importlib.util
        missing = [p for p in packages if importlib.util.find_spec(p) is None]
        return f"{', '.join(missing)} not installed" if missing else None
    return _Requirement("package " + ", ".join(packages), reason)


def _compute_version():
    """(major, minor) of CUDA device 0, or (0, 0) without one."""
    from .. import _C
    if not _C.cuda_device_available():
        return (0, 0)
    digits = "".join(ch for ch in _C.cuda_device_arch(0) if ch.isdigit())
    return (int(digits[:-1] or 0), int(digits[-1])) if digits else (0, 0)


_COMPARE = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
            "lt": lambda a, b: a < b, "eq": lambda a, b: a == b}


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    """Skips the test unless a CUDA device is present and its compute capability compares
    to (major_version, minor_version) as mode says: "ge", "gt", "le", "lt" or "eq"."""
    if mode not in _COMPARE:
        raise ValueError(f"Invalid mode: {mode}")
    wanted = (major_version, minor_version)

    def reason():
        why = _cuda_reason()
        if why is not None:
            return why
        have = _compute_version()
        if not _COMPARE[mode](have, wanted):
            return f"compute capability {have[0]}.{have[1]} is not {mode} {wanted[0]}.{wanted[1]}"
        return None
    return _Requirement(f"cuda compute {mode} {wanted[0]}.{wanted[1]}", reason)


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="eq")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="le")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="lt")
