"""Turns decorated Python functions into IR."""
from __future__ import annotations

__all__ = ["parse_prim_func", "parse_eager"]


def parse_prim_func(fn, enclosing=None):
    """Parses fn (annotated with T.Tensor / dtype parameters) into a PrimFunc."""
    return _parse(fn, enclosing, None, None)


def parse_eager(fn, arguments, runtime_names, const_values=None):
    """Parses the body of an eager @tilelang.jit function: `arguments` are its compile-time
    parameters' values, `runtime_names` the parameters typed in the body. Without
    const_values only the signature is read (see parser/eager.py); returns the PrimFunc
    and the EagerState of the parse."""
    from .eager import EagerState
    state = EagerState(runtime_names, const_values)
    return _parse(fn, None, state, arguments), state


def _signature_params(p, fn, b):
    """(handles, Params, names) of a @T.prim_func's annotated parameters."""
    from .. import _C
    from ..dtypes import canonical
    from ..errors import TileLangSyntaxError, TileLangTypeError
    from ..ir import Buffer, Param
    from ..language.types import TensorSpec
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
    return handles, params


def _returned_outputs(p, b, returned):
    """The T.empty buffers in the order the function returns them; every one must be
    returned, and nothing else may be."""
    from ..errors import TileLangSyntaxError
    from ..ir import Buffer
    if b.eager is not None and b.eager.reading_signature:
        return list(b.outputs)
    if returned is None:
        values = []
    elif isinstance(returned, (tuple, list)):
        values = list(returned)
    else:
        values = [returned]
    order = []
    for v in values:
        match = [o for o in b.outputs if isinstance(v, Buffer) and o.handle.same_as(v.handle)]
        if not match:
            what = f"buffer '{v.name}'" if isinstance(v, Buffer) else f"{type(v).__name__} {v!r}"
            raise p.error(TileLangSyntaxError, f"a kernel function returns {what}; only tensors made by T.empty "
                          "can be returned", None, "declare outputs with C = T.empty(shape, dtype) and return them")
        if any(o is match[0] for o in order):
            raise p.error(TileLangSyntaxError, f"output '{v.name}' is returned twice", None)
        order.append(match[0])
    missing = [o.name for o in b.outputs if not any(o is r for r in order)]
    if missing:
        raise p.error(TileLangSyntaxError, f"T.empty tensor(s) {', '.join(repr(m) for m in missing)} are not returned",
                      None, f"return every output the function declares: return {', '.join(o.name for o in b.outputs)}")
    return order


def _parse(fn, enclosing, eager, arguments):
    from .. import _C
    from ..errors import TileLangError, TileLangSyntaxError
    from ..ir import Param, PrimFunc
    from . import builder as _builder
    from .eager import PendingParam
    from .parser import Parser, _Return

    b = _builder.Builder("")
    p = Parser(fn, b, enclosing)
    b.file = p.file
    b.eager = eager
    prev = _builder.enter(b)
    try:
        b.push()
        if eager is None:
            handles, params = _signature_params(p, fn, b)
        else:
            p.scopes[0].names.update(arguments)
            for name in eager.runtime_names:
                p.scopes[0].names[name] = PendingParam(name)
        b.set_line(p.fdef.lineno, p.fdef.col_offset)
        returned = None
        try:
            p.visit_body(p.fdef.body)
        except TileLangError:
            raise
        except _Return as r:
            returned = r.value
        except Exception as e:  # break/continue outside their place
            raise p.error(TileLangSyntaxError, f"'{type(e).__name__[1:].lower()}' outside a loop", None) from e
        if eager is not None:
            handles, params = eager.params(p)
        outputs = _returned_outputs(p, b, returned)
        for buf in outputs + b.workspaces:
            handles.append(buf.handle)
            params.append(Param(buf.name, "buffer", buf.handle.dtype, buf.handle.shape, buf.handle.strides))
        if b.source_kernel is not None and b.frames[-1].items:
            raise p.error(TileLangSyntaxError, "a function with T.CUDASourceCodeKernel has other statements", p.fdef,
                          "the CUDA source is the whole kernel: keep only the T.CUDASourceCodeKernel(...) call")
        body = b.pop()
        b.set_line(p.fdef.lineno, p.fdef.col_offset)
        attrs = {"prelude": "\n".join(b.prelude)} if b.prelude else {}
        if getattr(b, "non_restrict", None):
            attrs["non_restrict"] = ",".join(b.non_restrict)  # T.annotate_restrict_buffers
        handle = _C.make_prim_func(p.fdef.name, handles, body, attrs)
    finally:
        _builder.leave(prev)
    func = PrimFunc(handle, params, p.file, p.fdef.lineno, fn)
    func.source_kernel = b.source_kernel
    first_workspace = len(params) - len(b.workspaces)
    if outputs:
        func.out_idx = list(range(first_workspace - len(outputs), first_workspace))
    func.workspace_idx = list(range(first_workspace, len(params)))
    return func
