"""Compiled kernels as PyTorch custom operators.

    add = kernel.torch_op("mylib::add")      # a torch.library operator
    y = add(a, b)                            # eager: runs the kernel
    torch.compile(model, fullgraph=True)     # traced as one node, no graph break

The operator's schema is the kernel's: its inputs (tensors, then scalars, in parameter
order) and the outputs named by ``out_idx`` as the results; a tensor the kernel writes
that is not an output is declared mutated (``Tensor(a!)``), so torch.compile
functionalises it. The fake (meta) implementation gives each output the shape the
kernel declares, with shape variables bound from the inputs, so tracing with fake or
symbolic-shaped tensors never runs the kernel.

The real implementation is the kernel's own call: it launches on torch's current CUDA
stream, allocates only the outputs it returns, and never synchronises, so a CUDA graph
captures it like any torch operator.
"""
from __future__ import annotations

import keyword

from ..dtypes import canonical, torch_dtype
from .adapter import dim_spec, shape_text

__all__ = ["register_torch_op", "DEFAULT_NAMESPACE"]

DEFAULT_NAMESPACE = "tilelang"

# qualified name -> (identity of the kernel, the operator); libraries kept alive here,
# since an operator lives as long as its torch.library.Library.
_registered = {}
_kernels = {}  # qualified name -> (kernel, its output shapes)
_libraries = {}

def _release():
    """Drops the operators at exit, so that no kernel is still referenced by torch when the
    compiler core unloads."""
    for lib in _libraries.values():
        lib._destroy()
    _libraries.clear()
    _registered.clear()
    _kernels.clear()


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("kernel.torch_op needs PyTorch: pip install 'tilelang[torch]' (or torch)") from e
    if not hasattr(torch, "library") or not hasattr(torch.library, "register_fake"):
        raise ImportError(f"kernel.torch_op needs torch >= 2.4 (torch.library.register_fake); "
                          f"this is torch {torch.__version__}")
    return torch


def _split_name(name: str, kernel_name: str):
    qualified = name or kernel_name
    namespace, sep, op = qualified.rpartition("::")
    if not sep:
        namespace = DEFAULT_NAMESPACE
    for part, what in ((namespace, "namespace"), (op, "operator name")):
        if not part.isidentifier() or keyword.iskeyword(part) or "." in part:
            raise ValueError(f"torch_op: {what} {part!r} of {qualified!r} is not a Python identifier; "
                             "name the operator 'namespace::name'")
    return namespace, op


def _scalar_type(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint")):
        return "int"
    return "float"


def _schema(kernel, op: str) -> str:
    written = kernel._written
    args, alias = [], 0
    for i, p in enumerate(kernel.params):
        if i in kernel.out_idx or i in kernel.workspace_idx:
            continue
        if p.kind == "scalar":
            args.append(f"{_scalar_type(p.dtype)} {p.name}")
        elif i in written:
            args.append(f"Tensor(a{alias}!) {p.name}")
            alias += 1
        else:
            args.append(f"Tensor {p.name}")
    outs = ["Tensor"] * len(kernel.out_idx)
    returns = "()" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    return f"{op}({', '.join(args)}) -> {returns}"


class _FakeOutputs:
    """Output shapes of a call on fake (or real) tensors, checked as the call checks its
    arguments: dtype, rank, constant extents, agreement of shape variables, contiguity.
    Extents may be symbolic (torch.SymInt); comparing them adds torch.compile's guards."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = kernel.prim_func.name
        self.inputs = [(i, p) for i, p in enumerate(kernel.params)
                       if i not in kernel.out_idx and i not in kernel.workspace_idx]
        self.specs = {i: [dim_spec(e) for e in p.shape] for i, p in enumerate(kernel.params) if p.kind == "buffer"}

    def _bind(self, args):
        values, origin = {}, {}
        like = None
        for (i, p), a in zip(self.inputs, args):
            if p.kind == "scalar":
                values.setdefault(p.name, a)
                continue
            like = like if like is not None else a
            if canonical(a.dtype) != p.dtype:
                raise TypeError(f"{self.name}: argument '{p.name}' has dtype {canonical(a.dtype)}, expected {p.dtype}")
            if a.dim() != len(p.shape):
                raise ValueError(f"{self.name}: argument '{p.name}' has shape {tuple(a.shape)} ({a.dim()}-D), "
                                 f"expected {shape_text(p.shape)} ({len(p.shape)}-D)")
            for d, ((kind, payload), actual) in enumerate(zip(self.specs[i], a.shape)):
                where = f"{p.name}.shape[{d}]"
                if kind == "const" and actual != payload:
                    raise ValueError(f"{self.name}: argument '{p.name}' has shape {tuple(a.shape)}, "
                                     f"expected {shape_text(p.shape)}")
                if kind == "var":
                    if payload in values and values[payload] != actual:
                        raise ValueError(f"{self.name}: dynamic dimension '{payload}' is {values[payload]} from "
                                         f"{origin[payload]} but {actual} from {where}")
                    values.setdefault(payload, actual)
                    origin.setdefault(payload, where)
            if not p.strides and not a.is_contiguous():
                raise ValueError(f"{self.name}: argument '{p.name}' has strides {tuple(a.stride())} (in elements), "
                                 "expected a contiguous row-major array; pass .contiguous()")
        return values, like

    def _extent(self, expr, values):
        if expr.kind == "IntImm":
            return expr.value
        if expr.kind == "Var":
            if expr.name not in values:
                raise ValueError(f"{self.name}: dynamic dimension '{expr.name}' is not given by any input, "
                                 "so the output cannot be allocated")
            return values[expr.name]
        from .. import _C
        # A compound extent (2 * n, ...) is evaluated on the bound values; a symbolic one
        # is specialised to the value it has (torch.compile guards on it).
        return _C.eval_int(expr, {k: int(v) for k, v in values.items()})

    def make(self, torch, args, device):
        values, like = self._bind(args)
        outs = []
        for i in self.kernel.out_idx:
            p = self.kernel.params[i]
            shape = [self._extent(e, values) for e in p.shape]
            dtype = torch_dtype(p.dtype)
            outs.append(like.new_empty(shape, dtype=dtype) if like is not None
                        else torch.empty(shape, dtype=dtype, device=device))
        return outs


def register_torch_op(kernel, name: str | None = None):
    """Registers ``kernel`` as the torch.library operator ``name`` ("namespace::op"; a bare
    name goes in the "tilelang" namespace; default: the kernel's name) and returns it
    (``torch.ops.namespace.op``). Registering the same kernel again returns the same
    operator; another kernel under a taken name is a ValueError."""
    torch = _import_torch()
    backend = kernel._backend
    if backend.device not in ("cpu", "cuda") or getattr(backend, "takes_arrays", False):
        raise ValueError(f"torch_op: the kernel '{kernel.prim_func.name}' is compiled for target '{kernel.target}'; "
                         "a torch operator runs kernels compiled for 'cpu' (CPU tensors) or 'cuda' (CUDA tensors)")
    namespace, op = _split_name(name, kernel.prim_func.name)
    qualified = f"{namespace}::{op}"
    identity = (kernel.cache_key, tuple(kernel.out_idx))
    found = _registered.get(qualified)
    if found is not None:
        if found[0] != identity:
            raise ValueError(f"torch_op: the operator '{qualified}' is already registered for another kernel; "
                             "choose another name")
        return found[1]

    schema = _schema(kernel, op)
    lib = _libraries.get(namespace)
    if lib is None:
        if not _libraries:
            import atexit
            atexit.register(_release)
        lib = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    lib.define(schema)
    n_out = len(kernel.out_idx)
    device = "cuda" if backend.device == "cuda" else "cpu"
    # The implementations find the kernel through _kernels rather than holding it, so that
    # dropping the entry at exit frees the kernel even if torch keeps the functions.
    _kernels[qualified] = (kernel, _FakeOutputs(kernel))

    def run(*args):
        result = _kernels[qualified][0](*args)
        if n_out == 0:
            return None
        return result if n_out == 1 else tuple(result)

    def fake(*args):
        outs = _kernels[qualified][1].make(torch, args, device)
        if n_out == 0:
            return None
        return outs[0] if n_out == 1 else tuple(outs)

    lib.impl(op, run, "CUDA" if backend.device == "cuda" else "CPU")
    torch.library.register_fake(qualified, fake, lib=lib)
    operator = getattr(getattr(torch.ops, namespace), op)
    _registered[qualified] = (identity, operator)
    return operator
