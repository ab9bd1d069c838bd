"""The parse of an eager @tilelang.jit function: its runtime parameters are typed by
statements in the body, and its shape symbols come from T.const.

    @tilelang.jit
    def add(A, B, block: int = 256):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)      # declares parameter A
        B: T.Tensor((N,), T.float32)
        C = T.empty((N,), T.float32)      # an output the call allocates
        with T.Kernel(T.ceildiv(N, block)) as bx: ...
        return C

Such a function is parsed twice per set of compile-time arguments. The first parse reads
the signature: T.const gives symbols, kernel bodies are skipped, and the declarations say
which tensor dimension each symbol can be read from. The second parse, once the symbols'
values are known (from the call's tensors or given by name), builds the kernel with those
values as Python ints, so every distinct binding is its own, fully static kernel.
"""
from __future__ import annotations

import ast
import keyword
import re

from .. import _C
from ..dtypes import DType, canonical
from ..errors import TileLangSyntaxError, TileLangTypeError
from . import builder as _builder


class PendingParam:
    """A runtime parameter of an eager function before the statement that types it."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def _early(self, *args, **kwargs):
        raise _builder.error(TileLangSyntaxError, f"parameter '{self.name}' is used before its type is declared",
                             f"declare it first, e.g. {self.name}: T.Tensor((M, N), T.float32)")

    __getitem__ = __getattr__ = __add__ = __mul__ = __call__ = _early

    def __repr__(self):
        return f"<parameter {self.name}, not declared yet>"


def split_const_names(text: str):
    """The names of T.const("M, N, K"): separated by commas or spaces."""
    parts = [n for n in re.split(r"[\s,]+", text.strip()) if n]
    if not parts:
        raise _builder.error(TileLangTypeError, "T.const: no name given", 'write T.const("N") or T.const("M, N, K")')
    for n in parts:
        if not n.isidentifier() or keyword.iskeyword(n):
            raise _builder.error(TileLangTypeError, f"T.const: {n!r} is not a valid name",
                                 'names are Python identifiers, e.g. T.const("M, N, K")')
    return parts


class EagerState:
    """What one parse of an eager function knows and collects."""

    def __init__(self, runtime_names, const_values=None):
        self.runtime_names = list(runtime_names)   # in signature order
        self.reading_signature = const_values is None
        self.const_values = dict(const_values or {})
        self.const_vars = {}    # name -> symbol (first parse)
        self.const_dtypes = {}  # name -> dtype
        self.pending = set(self.runtime_names)
        self.declared = {}      # name -> (handle, kind "buffer" | "scalar")

    def const(self, names, dtype):
        values = []
        for n in names:
            self.const_dtypes.setdefault(n, canonical(dtype))
            if self.reading_signature:
                if n not in self.const_vars:
                    self.const_vars[n] = _C.var(n, canonical(dtype))
                values.append(self.const_vars[n])
            elif n in self.const_values:
                values.append(self.const_values[n])
            else:
                raise _builder.error(TileLangSyntaxError, f"T.const({n!r}) is declared inside a kernel body",
                                     "declare the shape symbols before `with T.Kernel(...)`, next to the "
                                     "parameters' types")
        return values[0] if len(values) == 1 else tuple(values)

    def declare(self, parser, node):
        """`A: T.Tensor(shape, dtype)` (a buffer) or `n: T.int32` (a scalar) for a parameter."""
        from ..ir import Buffer
        from ..language.types import TensorSpec
        name = node.target.id
        ann = parser.ev(node.annotation)
        if isinstance(ann, TensorSpec):
            strides = list(ann.strides) if ann.strides is not None else None
            handle = _C.make_buffer(name, ann.dtype, list(ann.shape), ann.scope, strides)
            value, kind = Buffer(handle), "buffer"
        elif isinstance(ann, (DType, str)):
            handle = _C.var(name, canonical(ann))
            value, kind = handle, "scalar"
        else:
            raise parser.error(TileLangTypeError, f"parameter '{name}': {ast.unparse(node.annotation)} is not a "
                               "tensor type or a dtype", node,
                               f"write {name}: T.Tensor((M, N), T.float32) or {name}: T.int32")
        self.pending.discard(name)
        self.declared[name] = (handle, kind)
        parser.scopes[0].names[name] = value

    def params(self, parser):
        """(handles, Params) of the runtime parameters, in signature order."""
        from ..ir import Param
        handles, params = [], []
        for name in self.runtime_names:
            if name not in self.declared:
                raise parser.error(TileLangSyntaxError, f"parameter '{name}' is never given a type", parser.fdef,
                                   f"declare it at the top of the function: {name}: T.Tensor((M, N), T.float32)")
            handle, kind = self.declared[name]
            handles.append(handle)
            if kind == "buffer":
                params.append(Param(name, "buffer", handle.dtype, handle.shape, handle.strides))
            else:
                params.append(Param(name, "scalar", handle.dtype, None, None))
        return handles, params
