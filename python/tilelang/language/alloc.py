"""Buffer allocation inside a kernel: shared memory, fragments, per-thread locals, scalars."""
from __future__ import annotations

from .. import _C
from ..dtypes import canonical
from ..ir import Buffer, is_expr
from ..parser import builder as _builder


def _alloc(shape, dtype, scope, default_name, attrs=None):
    b = _builder.require("T.alloc_*")
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    name = b.take_name(default_name)
    handle = _C.make_buffer(name, canonical(dtype), list(shape), scope, None)
    b.emit_alloc(handle, attrs)
    return Buffer(handle)


def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in the block's shared memory."""
    return _alloc(shape, dtype, scope, "shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A tile spread over the block's threads (registers on a GPU)."""
    return _alloc(shape, dtype, scope, "fragment")


def alloc_local(shape, dtype, scope="local"):
    """A small array private to each thread."""
    return _alloc(shape, dtype, scope, "local")


def alloc_var(dtype, *args, scope="local.var", init=None):
    """A scalar variable: read it by name, assign it with `x = value`."""
    if args:
        if init is not None:
            raise TypeError("T.alloc_var: init given twice")
        init = args[0]
    attrs = {}
    if init is not None:
        attrs["init"] = init if is_expr(init) else _C.const(init, canonical(dtype))
    return _alloc((1,), dtype, scope, "var", attrs)


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A fragment to reduce into (allocated as T.alloc_fragment(shape, dtype))."""
    return alloc_fragment(shape, dtype)


def _unsupported(what, hint):
    from ..errors import TileLangUnsupportedError
    raise _builder.error(TileLangUnsupportedError, f"{what} is not supported by this compiler yet", hint)


def alloc_global(shape, dtype, scope="global"):
    """A workspace in device (global) memory that every block of the kernel can reach: the
    call allocates it (uninitialised, like torch.empty) and frees it after the call; it is
    not an argument and is not returned. Its shape may use the function's shape symbols.
    Declare it before `with T.Kernel(...)`."""
    from ..errors import TileLangSyntaxError, TileLangTypeError
    b = _builder.require("T.alloc_global")
    if scope != "global":
        raise _builder.error(TileLangTypeError, f"T.alloc_global: scope must be 'global', got {scope!r}",
                             "use T.alloc_shared / T.alloc_fragment for on-chip buffers")
    if b.kernels or len(b.frames) != 1:
        raise _builder.error(TileLangSyntaxError, "T.alloc_global is used inside a kernel body or a loop/branch",
                             "declare the workspace at the top of the function, before `with T.Kernel(...)`")
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    name = b.take_name(f"workspace{len(b.workspaces)}")
    buf = Buffer(_C.make_buffer(name, canonical(dtype), list(shape), "global", None))
    b.workspaces.append(buf)
    return buf


def reshape(src, shape):
    """Not supported yet: a buffer viewed with another shape needs aliasing buffers in the IR."""
    _unsupported("T.reshape", "index the buffer with the arithmetic of the other shape, or pass the tensor "
                 "reshaped on the host")


def view(src, shape=None, dtype=None):
    """Not supported yet (see T.reshape)."""
    _unsupported("T.view", "index the buffer with the arithmetic of the other shape, or pass the tensor viewed "
                 "on the host")
