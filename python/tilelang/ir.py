"""Python views of IR objects: expressions (the C++ handles themselves), buffers, regions."""
from __future__ import annotations

from . import _C
from .errors import TileLangShapeError, TileLangSyntaxError, TileLangTypeError
from .parser import builder as _builder

Expr = _C.Expr


def is_expr(x) -> bool:
    return isinstance(x, _C.Expr)


def const_value(x):
    """The Python value of x when x is a Python number or an IR constant, else None."""
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, _C.Expr) and x.kind in ("IntImm", "FloatImm"):
        return x.value
    return None


def _bool_error(self):
    v = const_value(self)
    if v is not None:
        return bool(v)
    raise _builder.error(
        TileLangTypeError,
        f"the kernel value '{self!r}' is used where Python needs a bool at parse time",
        "conditions on kernel values belong in `if` statements or T.if_then_else",
    )


def _index(self):
    if self.kind == "IntImm":
        return self.value
    raise _builder.error(
        TileLangTypeError,
        f"the kernel value '{self!r}' is used where Python needs an int at parse time",
        "use a Python int here, or a loop such as T.serial for kernel values",
    )


def _float(self):
    if self.kind in ("IntImm", "FloatImm"):
        return float(self.value)
    raise _builder.error(TileLangTypeError, f"the kernel value '{self!r}' is not a constant")


def _getitem(self, key):
    raise _builder.error(TileLangTypeError, f"'{self!r}' is a scalar and cannot be indexed")


def _astype(self, dtype, span=None):
    """The value converted to dtype: `A_local[i, j].astype(accum_dtype)` is T.cast(A_local[i, j],
    accum_dtype), as on upstream's PrimExpr (span is accepted and ignored)."""
    from .dtypes import canonical
    return _C.cast(canonical(dtype), self)


_C.Expr.__bool__ = _bool_error
_C.Expr.__index__ = _index
_C.Expr.__int__ = _index
_C.Expr.__float__ = _float
_C.Expr.__getitem__ = _getitem
_C.Expr.astype = _astype


def _extent(x):
    v = const_value(x)
    return v if isinstance(v, int) else x


class BufferData:
    """The storage of a buffer, as `A.data` names it: what T.Tensor(shape, dtype, A.data)
    declares a buffer over."""

    __slots__ = ("buffer",)

    def __init__(self, buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"{self.buffer.name}.data"


class Buffer:
    """A buffer of the kernel: indexing gives an element (A[i, j]) or a region (A[0:64, k])."""

    __slots__ = ("handle",)

    def __init__(self, handle: _C.Buffer):
        self.handle = handle

    name = property(lambda self: self.handle.name)
    dtype = property(lambda self: self.handle.dtype)
    scope = property(lambda self: self.handle.scope)
    # The buffer's storage (upstream's data pointer): T.Tensor(shape, dtype, A.data) is a
    # buffer over it.
    data = property(lambda self: BufferData(self))

    @property
    def shape(self):
        return tuple(_extent(e) for e in self.handle.shape)

    @property
    def ndim(self):
        return len(self.handle.shape)

    def scope_name(self):
        return self.handle.scope

    def __eq__(self, other):
        return isinstance(other, Buffer) and self.handle.same_as(other.handle)

    def __hash__(self):
        return hash(self.handle)

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype!r}, scope={self.scope!r})"

    def _normalise_key(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) == 1 and key[0] is Ellipsis:
            key = tuple(slice(None) for _ in range(self.ndim))
        if len(key) != self.ndim:
            raise _builder.error(
                TileLangShapeError,
                f"buffer '{self.name}' has {self.ndim} dimension(s) but is indexed with {len(key)}",
                f"index it as {self.name}[{', '.join('i%d' % d for d in range(self.ndim))}]",
            )
        return key

    def __getitem__(self, key):
        key = self._normalise_key(key)
        if not any(isinstance(k, slice) for k in key):
            return _C.load(self.handle, list(key))
        ranges = []
        for d, k in enumerate(key):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise _builder.error(TileLangSyntaxError,
                                         f"slice with a step on buffer '{self.name}' is not supported")
                start = 0 if k.start is None else k.start
                stop = self.handle.shape[d] if k.stop is None else k.stop
                ranges.append((start, _slice_extent(stop, start)))
            else:
                ranges.append((k, 1))
        return Region(self, ranges)

    def __setitem__(self, key, value):
        raise _builder.error(TileLangSyntaxError,
                             "buffers are assigned element by element in a kernel statement")

    def access_ptr(self, *args, **kwargs):
        raise _builder.error(TileLangSyntaxError, "access_ptr is not supported by this compiler")


def _slice_extent(stop, start):
    """stop - start; when either is a name bound in the kernel (H1 = H0 + 64), the extent is
    simplified over the names' values, so that `A[H0:H1]` has the tile's constant extent."""
    extent = stop - start
    if not (is_expr(stop) or is_expr(start)):
        return extent
    b = _builder.current()
    if b is None or not b.let_values:
        return extent
    simple = _C.simplify_with(extent, b.let_values)
    return simple if simple.kind == "IntImm" else extent


class Region:
    """A rectangular part of a buffer: one (min, extent) per dimension."""

    __slots__ = ("buffer", "ranges")

    def __init__(self, buffer: Buffer, ranges):
        self.buffer = buffer
        self.ranges = list(ranges)

    @property
    def shape(self):
        return tuple(_extent(e) for _, e in self.ranges)

    @property
    def dtype(self):
        return self.buffer.dtype

    def as_tuple(self):
        return (self.buffer.handle, self.ranges)

    def __repr__(self):
        return f"Region({self.buffer.name}, {self.ranges})"


def full_region(buf: Buffer) -> Region:
    return Region(buf, [(0, e) for e in buf.handle.shape])


class Param:
    """A kernel parameter as the runtime sees it."""

    __slots__ = ("name", "kind", "dtype", "shape", "strides")

    def __init__(self, name, kind, dtype, shape, strides):
        self.name = name
        self.kind = kind        # "buffer" or "scalar"
        self.dtype = dtype
        self.shape = shape      # list of Expr (constants or shape variables) for buffers
        self.strides = strides  # list of Expr, empty for compact row-major

    # As upstream's tilelang.engine.param.KernelParam.
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    def is_unsigned(self) -> bool:
        return self.dtype.startswith("uint")

    def is_float8(self) -> bool:
        return self.dtype.startswith("float8")

    def is_boolean(self) -> bool:
        return self.dtype == "bool"

    def torch_dtype(self):
        from .dtypes import torch_dtype
        return torch_dtype(self.dtype)

    def __repr__(self):
        return f"Param({self.name}, {self.kind}, {self.dtype})"


class PrimFunc:
    """A parsed kernel function."""

    def __init__(self, handle, params, file, line, fn=None):
        self.handle = handle
        self.params = params
        self.file = file
        self.line = line
        self.fn = fn
        self.out_idx = None  # the T.empty outputs' parameter indices, when the function returns them
        self.workspace_idx = []  # T.alloc_global buffers' parameter indices (allocated by the call)
        self.source_kernel = None  # language.extern.SourceKernel when the body is CUDA source
        self.__name__ = handle.name
        self.__doc__ = getattr(fn, "__doc__", None)

    @property
    def name(self):
        return self.handle.name

    def script(self) -> str:
        """The IR printed in the DSL's own syntax."""
        return self.handle.script()

    def show(self):
        print(self.script())

    def __repr__(self):
        return self.script()
