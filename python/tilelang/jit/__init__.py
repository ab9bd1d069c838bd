"""tilelang.jit and tilelang.compile."""
from __future__ import annotations

import functools
import inspect

from .kernel import JITKernel

__all__ = ["jit", "compile", "JITKernel", "JITImpl"]


def compile(func, out_idx=None, target="auto", target_host=None, execution_backend="auto", verbose=False,
            pass_configs=None, compile_flags=None):  # noqa: A001 - the DSL's name
    """Compiles a @T.prim_func for target and returns a callable JITKernel."""
    return JITKernel(func, out_idx=out_idx, target=target, target_host=target_host,
                     execution_backend=execution_backend, verbose=verbose, pass_configs=pass_configs,
                     compile_flags=compile_flags)


class JITImpl:
    """What @tilelang.jit makes of a kernel factory (a Python function returning a
    @T.prim_func): calling it with the factory's arguments gives the compiled JITKernel,
    compiled once per distinct set of arguments (and cached on disk across processes).

        @tilelang.jit(out_idx=[-1])
        def matmul(M, N, K, block_M=64): ...

        kernel = matmul(1024, 1024, 1024)          # compiled, or the kernel compiled before
        kernel = matmul.compile(1024, 1024, 1024)  # the same kernel, compiled explicitly
        source = matmul.get_kernel_source(1024, 1024, 1024)
    """

    def __init__(self, fn, options, debug_root_path=None):
        self.func = fn
        self.options = options
        self.out_idx = options.get("out_idx")
        self.target = options.get("target")
        self.target_host = options.get("target_host")
        self.execution_backend = options.get("execution_backend")
        self.verbose = options.get("verbose")
        self.pass_configs = options.get("pass_configs")
        self.compile_flags = options.get("compile_flags")
        self.debug_root_path = debug_root_path
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        self.kernels = {}
        functools.update_wrapper(self, fn)
        # The eager style (parameters typed in the body, T.const / T.empty): see jit/eager.py.
        from .eager import EagerFunction, is_eager
        self._eager = EagerFunction(fn) if is_eager(fn) else None
        self.mode = "eager" if self._eager is not None else "lazy"
        if self._eager is not None and self.out_idx is not None:
            raise ValueError("out_idx is only supported in lazy mode. In eager mode, use T.empty() to declare output "
                             "tensors instead.")

    fn = property(lambda self: self.func)

    def get_tir(self, *args, **kwargs):
        """The @T.prim_func the factory returns for these arguments (not compiled)."""
        from ..ir import PrimFunc
        if self._eager is not None:
            return self._eager.get_tir(args, kwargs)
        func = self.func(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TypeError(f"@tilelang.jit function '{getattr(self.func, '__name__', '?')}' must return a "
                            f"@T.prim_func, got {type(func).__name__}")
        return func

    def compile(self, *args, **kwargs):
        """Compiles the kernel for these arguments of the factory and returns the JITKernel
        (also what calling the decorated function with them returns)."""
        return self._compile_func(self.get_tir(*args, **kwargs))

    def _compile_func(self, func):
        kernel = compile(func, **self.options)
        if self.debug_root_path:
            self._write_debug_files(func, kernel)
        return kernel

    def _write_debug_files(self, func, kernel):
        import os
        os.makedirs(self.debug_root_path, exist_ok=True)
        name = getattr(self.func, "__name__", "jit_kernel")
        with open(os.path.join(self.debug_root_path, f"tilelang_jit_kernel_{name}.c"), "w") as f:
            f.write(kernel.get_kernel_source())
        with open(os.path.join(self.debug_root_path, f"tilelang_jit_program_{name}.py"), "w") as f:
            f.write(func.script())

    def par_compile(self, configs, num_workers=None, ignore_error=False):
        """Compiles the kernel for each config (a dict of keyword arguments or a tuple of
        positional ones), num_workers at a time; with ignore_error, a config that fails to
        compile gives None instead of raising."""
        import concurrent.futures
        configs = list(configs)
        for cfg in configs:
            if not isinstance(cfg, (tuple, dict)):
                raise ValueError(f"Invalid config type: {type(cfg)}, expected tuple or dict.")

        def one(cfg):
            run = self.compile if self._eager is not None else self
            try:
                return run(**cfg) if isinstance(cfg, dict) else run(*cfg)
            except Exception:
                if ignore_error:
                    return None
                raise
        with concurrent.futures.ThreadPoolExecutor(num_workers) as pool:
            return list(pool.map(one, configs))

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated source of the kernel for these arguments."""
        if self._eager is not None:
            return self._eager.kernel_for(args, kwargs, self._compile_func)[0].get_kernel_source()
        return self(*args, **kwargs).get_kernel_source()

    def __call__(self, *args, **kwargs):
        if self._eager is not None:  # compiles (once per binding) and runs; returns the outputs
            return self._eager(args, kwargs, self._compile_func)
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self.kernels:
            return self.kernels[key]
        kernel = self.compile(*args, **kwargs)
        if key is not None:
            self.kernels[key] = kernel
        return kernel

    def __repr__(self):
        return f"JITImpl({getattr(self.func, '__name__', '?')})"


_JITFactory = JITImpl


def jit(func=None, *, out_idx=None, target="auto", target_host=None, execution_backend="auto", verbose=False,
        pass_configs=None, debug_root_path=None, compile_flags=None):
    """Decorates a kernel factory (or a prim_func) so that calling it gives a compiled kernel."""
    options = dict(out_idx=out_idx, target=target, target_host=target_host, execution_backend=execution_backend,
                   verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags)

    def wrap(f):
        from ..ir import PrimFunc
        if isinstance(f, PrimFunc):
            return compile(f, **options)
        return JITImpl(f, options, debug_root_path)

    return wrap if func is None else wrap(func)


# `tilelang.jit` is this function once the package has imported it; programs still spell
# the classes `tilelang.jit.JITImpl` / `tilelang.jit.JITKernel` (in annotations, isinstance).
jit.JITImpl = JITImpl
jit.JITKernel = JITKernel
