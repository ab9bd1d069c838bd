"""Hooks on generated CUDA source: a function (code, target) -> code that every CUDA kernel
compiled afterwards passes through before NVRTC (e.g. to add a pragma or an include).

    @tilelang.engine.callback.register_cuda_postproc_callback
    def postproc(code, target):
        return "// reviewed\n" + code

The callback's own code is part of the kernel cache key, so a changed callback never
reuses kernels built with an earlier one."""
from __future__ import annotations

import hashlib
import inspect

_cuda_postproc = None


def register_cuda_postproc_callback(func=None, override: bool = True):
    """Registers func (or decorates it) as the CUDA source post-processor; with
    override=False an already registered one is kept."""
    def register(f):
        global _cuda_postproc
        if not callable(f):
            raise TypeError(f"register_cuda_postproc_callback: expected a function (code, target) -> code, "
                            f"got {type(f).__name__}")
        if _cuda_postproc is None or override:
            _cuda_postproc = f
        return f

    if func is None or isinstance(func, bool):
        if isinstance(func, bool):
            override = func
        return register
    return register(func)


def clear_cuda_postproc_callback():
    global _cuda_postproc
    _cuda_postproc = None


def apply_cuda_postproc(code: str, target: str) -> str:
    if _cuda_postproc is None:
        return code
    out = _cuda_postproc(code, target)
    if not isinstance(out, str):
        raise TypeError(f"the CUDA post-processing callback {_cuda_postproc.__name__} returned "
                        f"{type(out).__name__}, not the source code (str)")
    return out


def cuda_postproc_identity() -> str:
    """'' without a callback, else a hash of its code (for the kernel cache key)."""
    if _cuda_postproc is None:
        return ""
    try:
        text = inspect.getsource(_cuda_postproc)
    except (OSError, TypeError):
        code = getattr(_cuda_postproc, "__code__", None)
        text = repr((code.co_code, code.co_consts)) if code is not None else repr(_cuda_postproc)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
