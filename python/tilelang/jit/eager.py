"""The eager style of @tilelang.jit: a function whose tensor parameters are typed in its
body, whose shape symbols (T.const) take their values from the call's tensors, and whose
outputs (T.empty) are returned. Calling it compiles the kernel for that binding (once:
later calls with the same compile-time arguments and shapes reuse it, and a new process
finds it in the disk cache) and runs it.

    @tilelang.jit
    def add(A, B, block: int = 256):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B: T.Tensor((N,), T.float32)
        C = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
        return C

    c = add(a, b)                          # compiled for N = len(a), then run
    kernel = add.compile(N=4096)           # the JITKernel for N = 4096, not run

Which style a function has is read from its source: a function that defines a
@T.prim_func inside is a kernel factory (the lazy style); one that types parameters in its
body, or opens T.Kernel itself, is eager.
"""
from __future__ import annotations

import ast
import inspect

import numpy as np

_MISSING = object()


def _function_def(fn):
    from ..parser.parser import _source_of
    try:
        return _source_of(fn)[1]
    except Exception:  # no source (exec, a prompt): a kernel factory called as written
        return None


def _body_nodes(fdef):
    """Every node of fdef's body outside nested function and class definitions."""
    stack = list(fdef.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _defines_prim_func(fdef) -> bool:
    for node in ast.walk(fdef):
        if node is not fdef and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any("prim_func" in ast.unparse(d) for d in node.decorator_list):
                return True
    return False


def _namespace(fn):
    from ..parser.parser import _closure_of
    env = dict(fn.__globals__)
    env.update(_closure_of(fn))
    return env


def _try_eval(node, env):
    try:
        return eval(compile(ast.Expression(node), "<annotation>", "eval"), env)  # noqa: S307 - the user's source
    except Exception:
        return _MISSING


def runtime_params(fn, fdef):
    """Names of the parameters typed by statements at the top of the body, in signature
    order: `A: T.Tensor(...)` / `A: T.Tensor[...]` / `A: T.StridedTensor(...)` (buffers) and
    `n: T.int32` (scalars)."""
    from ..dtypes import DType
    from ..language.types import _TensorFactory
    args = fdef.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    env = _namespace(fn)
    typed = set()
    for stmt in fdef.body:
        if not (isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name)
                and stmt.target.id in names):
            continue
        ann = stmt.annotation
        head = ann.func if isinstance(ann, ast.Call) else ann.value if isinstance(ann, ast.Subscript) else ann
        value = _try_eval(head, env)
        if isinstance(value, _TensorFactory) or (head is ann and isinstance(value, DType)):
            typed.add(stmt.target.id)
    return [n for n in names if n in typed]


def is_eager(fn) -> bool:
    fdef = _function_def(fn)
    if fdef is None or _defines_prim_func(fdef):
        return False
    if runtime_params(fn, fdef):
        return True
    for node in _body_nodes(fdef):
        if isinstance(node, ast.With) and any(
                isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Attribute)
                and i.context_expr.func.attr == "Kernel" for i in node.items):
            return True
    return False


def _freeze(value):
    """A hashable stand-in for an unhashable compile-time argument (lists, dicts)."""
    if isinstance(value, dict):
        return (dict, tuple(sorted(((_freeze(k), _freeze(v)) for k, v in value.items()), key=repr)))
    if isinstance(value, (list, tuple, set)):
        return (type(value), tuple(_freeze(v) for v in value))
    try:
        hash(value)
        return value
    except TypeError:
        return (type(value), repr(value))


class _Signature:
    """An eager function's runtime signature for one set of compile-time arguments: its
    shape symbols and where a call reads each one (parameter, "shape" or "strides", dim)."""

    def __init__(self, func, state, runtime_names):
        self.const_names = list(state.const_vars)
        self.sources = {}
        by_name = {p.name: p for p in func.params}
        for name in runtime_names:
            p = by_name[name]
            if p.kind != "buffer":
                continue
            for what, dims in (("shape", p.shape), ("strides", p.strides or [])):
                for d, e in enumerate(dims):
                    if e.kind == "Var" and e.name in state.const_vars and e.same_as(state.const_vars[e.name]):
                        self.sources.setdefault(e.name, (name, what, d))


class EagerFunction:
    """The eager half of a JITImpl (see the module's docstring)."""

    def __init__(self, fn, fdef=None):
        self.fn = fn
        self.name = getattr(fn, "__name__", "kernel")
        self.signature = inspect.signature(fn)
        self.runtime_names = runtime_params(fn, fdef or _function_def(fn))
        self._params = [p for p in self.signature.parameters.values()
                        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self._positional = [p for p in self._params if p.kind != p.KEYWORD_ONLY]
        self._signatures = {}  # compile-time key -> _Signature
        self.kernels = {}      # (compile-time key, shape symbols' values) -> JITKernel

    # ------------------------------------------------------------------ arguments
    def bind(self, args, kwargs):
        """(compile-time key, compile-time arguments, runtime arguments, symbols given by name)."""
        if len(args) > len(self._positional):
            raise TypeError(f"{self.name}() takes at most {len(self._positional)} positional argument(s), "
                            f"got {len(args)}")
        values = {p.name: a for p, a in zip(self._positional, args)}
        named = {}
        for k, v in kwargs.items():
            if k in values:
                raise TypeError(f"{self.name}() got multiple values for argument '{k}'")
            if any(p.name == k for p in self._params):
                values[k] = v
            else:
                named[k] = v  # a shape symbol given by name, checked once the symbols are known
        compile_args, runtime = {}, {}
        for p in self._params:
            if p.name in self.runtime_names:
                if p.name in values:
                    runtime[p.name] = values[p.name]
                continue
            if p.name in values:
                compile_args[p.name] = values[p.name]
            elif p.default is not p.empty:
                compile_args[p.name] = p.default
            else:
                raise TypeError(f"{self.name}() missing a required argument: '{p.name}'")
        key = tuple(compile_args.values())
        try:
            hash(key)
        except TypeError:
            key = _freeze(key)
        return key, compile_args, runtime, named

    def _signature_for(self, key, compile_args):
        sig = self._signatures.get(key)
        if sig is None:
            from ..parser import parse_eager
            func, state = parse_eager(self.fn, compile_args, self.runtime_names)
            sig = _Signature(func, state, self.runtime_names)
            self._signatures[key] = sig
        return sig

    def _const_values(self, sig, runtime, named):
        from .adapter import view_of
        unknown = [k for k in named if k not in sig.const_names]
        if unknown:
            raise TypeError(f"{self.name}() got an unexpected keyword argument '{unknown[0]}'"
                            + (f" (its shape symbols are {', '.join(sig.const_names)})" if sig.const_names else ""))
        values = {}
        for name in sig.const_names:
            if name in named:
                v = named[name]
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                    raise TypeError(f"{self.name}(): shape symbol '{name}' must be an int, got {v!r} "
                                    f"({type(v).__name__})")
                values[name] = int(v)
                continue
            source = sig.sources.get(name)
            if source is None:
                raise ValueError(f"{self.name}(): shape symbol '{name}' is not the extent of any input tensor's "
                                 f"dimension, so no argument gives its value; pass it by name: {name}=<value>")
            param, what, dim = source
            if param not in runtime:
                raise ValueError(f"Cannot find value for constexpr variable `{name}`\nPlease provide it as a keyword "
                                 f"argument, e.g. `{name}=<value>`\nOr provide the corresponding tensor argument "
                                 f"`{param}`.")
            view = view_of(runtime[param], param)
            dims = view.shape if what == "shape" else view.strides
            if dim >= len(dims):
                raise ValueError(f"{self.name}: argument '{param}' has shape {tuple(view.shape)} "
                                 f"({len(view.shape)}-D), but its type has at least {dim + 1} dimensions")
            values[name] = int(dims[dim])
        return values

    # ------------------------------------------------------------------ building
    def _resolve(self, args, kwargs):
        key, compile_args, runtime, named = self.bind(args, kwargs)
        sig = self._signature_for(key, compile_args)
        consts = self._const_values(sig, runtime, named)
        return (key, tuple(consts[n] for n in sig.const_names)), compile_args, runtime, consts

    def get_tir(self, args, kwargs):
        """The PrimFunc for these arguments: compile-time values, tensors and symbols by name."""
        from ..parser import parse_eager
        _, compile_args, _, consts = self._resolve(args, kwargs)
        return parse_eager(self.fn, compile_args, self.runtime_names, consts)[0]

    def kernel_for(self, args, kwargs, compile_func):
        """(JITKernel, runtime arguments): compiled once per compile-time key and binding."""
        from ..parser import parse_eager
        full_key, compile_args, runtime, consts = self._resolve(args, kwargs)
        kernel = self.kernels.get(full_key)
        if kernel is None:
            kernel = compile_func(parse_eager(self.fn, compile_args, self.runtime_names, consts)[0])
            self.kernels[full_key] = kernel
        return kernel, runtime

    def __call__(self, args, kwargs, compile_func):
        given = {p.name for p in self._positional[:len(args)]} | set(kwargs)
        missing = [n for n in self.runtime_names if n not in given]
        if missing:
            raise TypeError(f"{self.name}() missing the runtime argument(s) {', '.join(repr(m) for m in missing)}; "
                            f"to compile without running, use {self.name}.compile(...)")
        kernel, runtime = self.kernel_for(args, kwargs, compile_func)
        return kernel(*[runtime[n] for n in self.runtime_names])
