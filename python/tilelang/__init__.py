"""TileLang: a tile-level language and compiler for high-performance kernels.

    import tilelang
    import tilelang.language as T
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import _C  # noqa: F401 - the compiler core
from . import ir  # noqa: F401 - installs the operators of kernel expressions
from . import engine, errors, language, layout, transform, utils  # noqa: F401
from .dtypes import DType as DataType
from .jit import JITImpl, JITKernel, compile, jit
from .jit.cache import disable_cache, enable_cache, is_cache_enabled
from .math import cdiv, next_power_of_2
from .profiler import Profiler, do_bench
from .transform import PassConfigKey
from .utils import TensorSupplyType
from .autotuner import autotune  # noqa: E402 - after jit, which it wraps

__all__ = ["jit", "compile", "JITKernel", "JITImpl", "language", "errors", "do_bench", "lower", "cuda_available",
           "PassConfigKey", "TensorSupplyType", "Profiler", "DataType", "cdiv", "next_power_of_2", "disable_cache",
           "enable_cache", "is_cache_enabled", "transform", "utils", "autotune", "engine"]


def lower(func, target="auto"):
    """The IR of func after the target's lowering pipeline, printed (no compilation; a
    target such as "cuda -arch=sm_90a" needs no device)."""
    from .jit.backends import resolve_target
    return _C.lower(func.handle, resolve_target(target)).script()


def cuda_available() -> bool:
    """Whether a CUDA device and driver are usable."""
    return _C.cuda_device_available()


def _tvm_module():
    """A real TVM where one is installed, else the few TVM names programs use around their
    kernels (tilelang/tvm_compat), importable as `tvm` too, as upstream makes it."""
    import importlib.util
    import sys
    if "tvm" in sys.modules:
        return sys.modules["tvm"]
    if importlib.util.find_spec("tvm") is not None:
        import tvm
        return tvm
    from . import tvm_compat
    sys.modules["tvm"], sys.modules["tvm.tir"], sys.modules["tvm.te"] = tvm_compat, tvm_compat.tir, tvm_compat.te
    return tvm_compat


_tvm_module()


def __getattr__(name):
    if name == "tvm":  # `from tilelang import tvm as tvm`
        return _tvm_module()
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
