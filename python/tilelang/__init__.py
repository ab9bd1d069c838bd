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



class _TvmNames:
    """`import tvm` where no real TVM is installed: the few TVM names programs use around
    their kernels (tilelang/tvm_compat), as upstream makes TVM importable. Consulted last,
    so an installed TVM is always the one imported; nothing is looked up before a program
    imports tvm."""

    _MODULES = ("tvm", "tvm.tir", "tvm.te")

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        return importlib.util.spec_from_loader(name, self) if name in self._MODULES else None

    def create_module(self, spec):
        from . import tvm_compat
        return {"tvm": tvm_compat, "tvm.tir": tvm_compat.tir, "tvm.te": tvm_compat.te}[spec.name]

    def exec_module(self, module):
        pass


def _install_tvm_names():
    import sys
    if not any(isinstance(f, _TvmNames) for f in sys.meta_path):
        sys.meta_path.append(_TvmNames())


_install_tvm_names()


def __getattr__(name):
    if name == "tvm":  # `from tilelang import tvm as tvm`: TVM, or the names above
        import importlib
        return importlib.import_module("tvm")
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
