"""tilelang.jit and tilelang.compile."""
from __future__ import annotations

import functools

from .kernel import JITKernel

__all__ = ["jit", "compile", "JITKernel"]


def compile(func, out_idx=None, target="auto", target_host=None, execution_backend="auto", verbose=False,
            pass_configs=None, compile_flags=None):  # noqa: A001 - the DSL's name
    """Compiles a @T.prim_func for target and returns a callable JITKernel."""
    return JITKernel(func, out_idx=out_idx, target=target, target_host=target_host,
                     execution_backend=execution_backend, verbose=verbose, pass_configs=pass_configs,
                     compile_flags=compile_flags)


class _JITFactory:
    """A Python function returning a prim_func, compiled once per distinct set of arguments."""

    def __init__(self, fn, options):
        self.fn = fn
        self.options = options
        self.kernels = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self.kernels:
            return self.kernels[key]
        func = self.fn(*args, **kwargs)
        kernel = compile(func, **self.options)
        if key is not None:
            self.kernels[key] = kernel
        return kernel


def jit(func=None, *, out_idx=None, target="auto", target_host=None, execution_backend="auto", verbose=False,
        pass_configs=None, debug_root_path=None, compile_flags=None):
    """Decorates a kernel factory (or a prim_func) so that calling it gives a compiled kernel."""
    options = dict(out_idx=out_idx, target=target, target_host=target_host, execution_backend=execution_backend,
                   verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags)

    def wrap(f):
        from ..ir import PrimFunc
        if isinstance(f, PrimFunc):
            return compile(f, **options)
        return _JITFactory(f, options)

    return wrap if func is None else wrap(func)
