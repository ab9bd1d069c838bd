"""TileLang: a tile-level language and compiler for high-performance kernels.

    import tilelang
    import tilelang.language as T
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import _C  # noqa: F401 - the compiler core
from . import ir  # noqa: F401 - installs the operators of kernel expressions
from . import errors, language, layout  # noqa: F401
from .jit import JITKernel, compile, jit
from .profiler import do_bench
from .utils.tensor import TensorSupplyType
from .autotuner import autotune  # noqa: E402 - after jit, which it wraps

__all__ = ["jit", "compile", "JITKernel", "language", "errors", "do_bench", "lower", "cuda_available",
           "autotune", "TensorSupplyType"]


def lower(func, target="auto"):
    """The IR of func after the target's lowering pipeline, printed (no compilation; a
    target such as "cuda -arch=sm_90a" needs no device)."""
    from .jit.backends import resolve_target
    return _C.lower(func.handle, resolve_target(target)).script()


def cuda_available() -> bool:
    """Whether a CUDA device and driver are usable."""
    return _C.cuda_device_available()
