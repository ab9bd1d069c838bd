"""The eager style's declarations: shape symbols (T.const) and outputs (T.empty)."""
from __future__ import annotations

from .. import _C
from ..dtypes import canonical
from ..errors import TileLangSyntaxError
from ..ir import Buffer
from ..parser import builder as _builder


def const(value, dtype="int32"):
    """T.const("M, N, K") in an eager @tilelang.jit function: shape symbols whose values are
    read from the call's tensors (or given by name: fn.compile(M=1024, ...)); one name gives
    one symbol, several names (separated by commas or spaces) a tuple. T.const(3, "int32")
    with a number is an IR constant."""
    if not isinstance(value, str):
        return _C.const(value, canonical(dtype))
    from ..parser.eager import split_const_names
    b = _builder.current()
    if b is None or b.eager is None:
        raise _builder.error(TileLangSyntaxError, f"T.const({value!r}) declares shape symbols of an eager "
                             "@tilelang.jit function and is used outside one",
                             "use it at the top of a @tilelang.jit function whose tensor parameters are typed in its "
                             "body (A: T.Tensor((M, K), dtype)); in a @T.prim_func use T.dynamic(name) instead")
    return b.eager.const(split_const_names(value), dtype)


def empty(shape, dtype="float32"):
    """C = T.empty(shape, dtype): an output tensor the call allocates; the function returns
    it (`return C`), and so does the call."""
    b = _builder.require("T.empty")
    if b.kernels or len(b.frames) != 1:
        raise _builder.error(TileLangSyntaxError, "T.empty is used inside a kernel body or a kernel loop/branch",
                             "declare outputs at the top of the function, before `with T.Kernel(...)`")
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    name = b.take_name(f"out{len(b.outputs)}")
    handle = _C.make_buffer(name, canonical(dtype), list(shape), "global", None)
    buf = Buffer(handle)
    b.outputs.append(buf)
    return buf
