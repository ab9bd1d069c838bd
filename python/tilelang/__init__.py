"""TileLang: a tile-level language and compiler for high-performance kernels.

    import tilelang
    import tilelang.language as T
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import _C  # noqa: F401 - the compiler core
from . import ir  # noqa: F401 - installs the operators of kernel expressions
from . import errors, language  # noqa: F401
from .jit import JITKernel, compile, jit
from .profiler import do_bench

__all__ = ["jit", "compile", "JITKernel", "language", "errors", "do_bench", "lower", "cuda_available"]


def lower(func, target="auto"):
    """The IR of func after the target's lowering pipeline, printed (no compilation)."""
    return _C.lower(func.handle, _C.normalise_target(target)).script()


def cuda_available() -> bool:
    """Whether a CUDA back end and device are usable (not in this build)."""
    return False
