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
    """A tile in the block's shared memory. scope "shared" (static) and "shared.dyn" are one
    pool here: the compiler places every shared tile, reusing the bytes of tiles no longer
    needed (upstream merges both kinds too), so tiles declared "shared" may add up to more
    than the 48 KiB a kernel can declare statically."""
    if scope == "shared":
        scope = "shared.dyn"
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


def alloc_buffer(shape, dtype="float32", scope="global"):
    """TVM script's buffer allocation, which upstream programs use too: by scope, a global
    workspace (declared before `with T.Kernel`, as T.alloc_global), a shared tile, a
    fragment or a per-thread array."""
    if scope == "global":
        return alloc_global(shape, dtype)
    if scope in ("shared", "shared.dyn"):
        return alloc_shared(shape, dtype, scope)
    if scope == "local.fragment":
        return alloc_fragment(shape, dtype)
    if scope == "local":
        return alloc_local(shape, dtype)
    from ..errors import TileLangTypeError
    raise _builder.error(TileLangTypeError, f"T.alloc_buffer: scope {scope!r} is not one of 'global', 'shared', "
                         "'shared.dyn', 'local.fragment' and 'local'")


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


def _alias(what, src, shape, dtype):
    """A buffer over src's storage with another shape and/or dtype (T.reshape, T.view)."""
    from ..dtypes import DType
    from ..errors import TileLangShapeError, TileLangTypeError, TileLangUnsupportedError
    b = _builder.require(what)
    if not isinstance(src, Buffer):
        raise _builder.error(TileLangTypeError, f"{what}: the source must be a buffer, got {type(src).__name__}",
                             "pass a kernel parameter or a buffer from T.alloc_shared / T.alloc_local, not an "
                             "element or a slice")
    name = src.name
    if src.scope == "local.fragment":
        # The fragment's registers seen with other leading dimensions: the same rows, so the
        # same thread and slot for every element (layout inference gives the view the
        # source's layout). Another last dimension or dtype would regroup the registers.
        new = list(shape) if isinstance(shape, (tuple, list)) else [shape]
        old = list(src.shape)
        static = all(isinstance(e, int) for e in new + old)
        if what != "T.reshape" or not static or len(new) < 2 or len(old) < 2 or new[-1] != old[-1] or \
                (dtype is not None and canonical(dtype) != src.dtype):
            _unsupported(f"{what} of the fragment '{name}' to {tuple(new)}",
                         "a fragment reshapes with its last dimension kept (both shapes of rank >= 2, constant); "
                         "otherwise copy it into a T.alloc_shared tile and reshape or view that")
    if src.scope == "local.var":
        raise _builder.error(TileLangTypeError, f"{what}: '{name}' is a scalar variable (T.alloc_var), not a buffer",
                             "reshape or view a buffer")
    strides = src.handle.strides
    if strides and not all(_C.prove_equal(s, c) for s, c in zip(strides, _compact_strides(src.handle.shape))):
        _unsupported(f"{what} of '{name}', whose strides are not those of a contiguous tensor",
                     "pass a contiguous tensor, or index the strided one directly")
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    shape = list(shape)
    if not shape:
        raise _builder.error(TileLangShapeError, f"{what} of '{name}': the new shape is empty",
                             "give at least one extent, e.g. (n,)")
    for e in shape:
        if isinstance(e, bool) or not (isinstance(e, int) or (is_expr(e) and "int" in e.dtype)):
            raise _builder.error(TileLangTypeError, f"{what} of '{name}': extent {e!r} is not an integer",
                                 "extents are integers or integer kernel values")
        if isinstance(e, int) and e < 1:
            raise _builder.error(TileLangShapeError, f"{what} of '{name}': extent {e} is not positive",
                                 "every extent of the new shape is at least 1")
    try:
        new_dtype = canonical(dtype)
        DType(new_dtype).bits
    except (TypeError, ValueError) as e:
        raise _builder.error(TileLangTypeError, f"{what} of '{name}': {dtype!r} is not a dtype",
                             "name a dtype such as 'int32' or T.float16") from e

    def bits(d):  # bits one element occupies in memory (a bool is stored in a byte)
        t = DType(d)
        return 8 if t.bits == 1 else t.bits * t.lanes

    def total(extents, d):
        n = _C.const(bits(d), "int64")
        for e in extents:
            n = n * e
        return n

    old_bits, new_bits = total(src.handle.shape, src.dtype), total(shape, new_dtype)
    if not _C.prove_equal(old_bits, new_bits):
        def text(extents):
            return "(" + ", ".join(str(e) for e in extents) + ("," if len(extents) == 1 else "") + ")"
        old = text(src.shape)
        new = text(shape)
        if new_dtype == src.dtype:
            msg = f"{what} of '{name}': shape {old} holds a different number of elements than {new}"
            hint = "the new shape must have as many elements as the old one"
        else:
            msg = (f"{what} of '{name}': {old} x {src.dtype} is not as many bits as {new} x {new_dtype}")
            hint = "the element count times the dtype's bits must be unchanged"
        raise _builder.error(TileLangShapeError, msg, hint)
    alias = _C.make_alias(src.handle, b.take_name(f"{name}_view"), new_dtype, shape)
    return Buffer(alias)


def _compact_strides(shape):
    strides, acc = [], _C.const(1, "int64")
    for e in reversed(shape):
        strides.append(acc)
        acc = acc * e
    return list(reversed(strides))


def reshape(src, shape):
    """The buffer `src` seen with another shape of the same element count: no copy, the same
    storage, dtype and scope (a kernel parameter, a shared tile or a per-thread array;
    fragments are rejected, see docs/tile_ops.md). Writes through either name are seen
    through the other."""
    return _alias("T.reshape", src, shape, src.dtype if isinstance(src, Buffer) else "float32")


def view(src, shape=None, dtype=None):
    """The buffer `src` seen with another shape and/or dtype: no copy, the same storage and
    scope. `shape` defaults to src's shape, `dtype` to src's dtype; the element count times
    the dtype's bits must be unchanged (a (64,) float16 tile is a (32,) int32 or float32 one).
    Elements are reinterpreted bit for bit, as numpy's ndarray.view does."""
    if not isinstance(src, Buffer):
        return _alias("T.view", src, (), None)
    return _alias("T.view", src, src.shape if shape is None else shape, src.dtype if dtype is None else dtype)
