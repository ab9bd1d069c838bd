"""Turns decorated Python functions into IR."""
from __future__ import annotations

__all__ = ["parse_prim_func"]


def parse_prim_func(fn, enclosing=None):
    """Parses fn (annotated with T.Tensor / dtype parameters) into a PrimFunc."""
    from .. import _C
    from ..dtypes import canonical
    from ..errors import TileLangError, TileLangSyntaxError, TileLangTypeError
    from ..ir import Buffer, Param, PrimFunc
    from ..language.types import TensorSpec
    from . import builder as _builder
    from .parser import Parser

    b = _builder.Builder("")
    p = Parser(fn, b, enclosing)
    b.file = p.file
    prev = _builder.enter(b)
    try:
        b.push()
        handles, params = [], []
        args = p.fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise p.error(TileLangSyntaxError, "kernel parameters must be plain positional names", p.fdef)
        for arg in args.args:
            b.set_line(arg.lineno, arg.col_offset)
            if arg.annotation is None:
                raise p.error(TileLangTypeError, f"parameter '{arg.arg}' has no annotation", arg,
                              f"annotate it, e.g. {arg.arg}: T.Tensor((M, N), \"float32\") or {arg.arg}: T.int32")
            ann = fn.__annotations__.get(arg.arg)
            if ann is None or isinstance(ann, str):  # postponed annotations: evaluate them here
                ann = p.ev(arg.annotation)
            if isinstance(ann, TensorSpec):
                strides = list(ann.strides) if ann.strides is not None else None
                handle = _C.make_buffer(arg.arg, ann.dtype, list(ann.shape), ann.scope, strides)
                value = Buffer(handle)
                handles.append(handle)
                params.append(Param(arg.arg, "buffer", handle.dtype, handle.shape, handle.strides))
            elif isinstance(ann, str):
                var = _C.var(arg.arg, canonical(ann))
                value = var
                handles.append(var)
                params.append(Param(arg.arg, "scalar", var.dtype, None, None))
            else:
                raise p.error(TileLangTypeError, f"parameter '{arg.arg}': annotation {ann!r} is not a tensor or dtype",
                              arg, "use T.Tensor(shape, dtype), T.Buffer(shape, dtype) or a dtype such as T.int32")
            p.scopes[0].names[arg.arg] = value
        b.set_line(p.fdef.lineno, p.fdef.col_offset)
        try:
            p.visit_body(p.fdef.body)
        except TileLangError:
            raise
        except Exception as e:  # break/continue/return outside their place
            from .parser import _Return
            if not isinstance(e, _Return):
                raise p.error(TileLangSyntaxError, f"'{type(e).__name__[1:].lower()}' outside a loop", None) from e
        body = b.pop()
        b.set_line(p.fdef.lineno, p.fdef.col_offset)
        handle = _C.make_prim_func(p.fdef.name, handles, body, {})
    finally:
        _builder.leave(prev)
    return PrimFunc(handle, params, p.file, p.fdef.lineno, fn)
