"""Dtype names, tensor annotations and symbolic dimensions."""
from __future__ import annotations

from .. import _C
from ..dtypes import DType, canonical

bool = DType("bool")  # noqa: A001 - the DSL's name
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
float16, float32, float64 = DType("float16"), DType("float32"), DType("float64")
bfloat16 = DType("bfloat16")
float8_e4m3 = float8_e4m3fn = DType("float8_e4m3")
float8_e5m2 = DType("float8_e5m2")
int4, uint4 = DType("int4"), DType("uint4")
float4_e2m1fn = DType("float4_e2m1")
half = float16
float = float32  # noqa: A001
double = float64
boolean = bool
short, long, uint = int16, int64, uint32
int = int32  # noqa: A001 - the DSL's name (T.int is int32, as upstream)
dtype = DType  # T.dtype("float16"), T.dtype(torch.float16); T.float16 is a T.dtype


class TensorSpec:
    """The annotation of a buffer parameter: T.Tensor((M, K), "float16")."""

    def __init__(self, shape, dtype="float32", strides=None, scope="global"):
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = canonical(dtype)
        self.strides = tuple(strides) if strides is not None else None
        self.scope = scope

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype!r})"


class _TensorFactory:
    """T.Tensor(shape, dtype) and T.Tensor[shape, dtype] both make an annotation. Inside a
    kernel, T.Tensor(shape, dtype, X.data) is buffer X's storage seen with that shape and
    dtype (upstream's way of declaring a buffer over another's data; T.view's meaning)."""

    scope = "global"

    def __call__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope=None, **kwargs):
        if data is not None:
            return _over_data(data, shape, dtype)
        return TensorSpec(shape, dtype, strides, scope or self.scope)

    def __getitem__(self, key):
        if not isinstance(key, tuple) or len(key) != 2:
            raise TypeError("T.Tensor[shape, dtype] takes a shape and a dtype")
        return TensorSpec(key[0], key[1], scope=self.scope)


class _ScopedBufferFactory(_TensorFactory):
    """T.SharedBuffer / T.FragmentBuffer / T.LocalBuffer: the annotation of a buffer of that
    scope, as upstream, for the parameters of a T.macro (which take the caller's buffers as
    they are; the annotation documents them)."""

    def __init__(self, scope):
        self.scope = scope


class _StridedTensorFactory:
    """T.StridedTensor(shape, strides, dtype): a global tensor with the given strides (in
    elements, the last one 1), upstream's argument order."""

    def __call__(self, shape, strides, dtype="float32"):
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        if not isinstance(strides, (tuple, list)):
            strides = (strides,)
        if len(shape) != len(strides):
            raise ValueError("T.StridedTensor: shape and strides have different lengths")
        return TensorSpec(shape, dtype, strides)

    def __getitem__(self, key):
        if not isinstance(key, tuple) or len(key) != 3:
            raise TypeError("T.StridedTensor[shape, strides, dtype] takes a shape, strides and a dtype")
        return self(*key)


def _over_data(data, shape, dtype):
    from ..ir import BufferData
    from .alloc import view
    if not isinstance(data, BufferData):
        raise TypeError(f"T.Tensor(shape, dtype, data): data must be a buffer's .data, got {type(data).__name__}")
    return view(data.buffer, shape if isinstance(shape, (tuple, list)) else (shape,), dtype)


Tensor = _TensorFactory()
Buffer = _TensorFactory()
StridedTensor = _StridedTensorFactory()
SharedBuffer = _ScopedBufferFactory("shared.dyn")
FragmentBuffer = _ScopedBufferFactory("local.fragment")
LocalBuffer = _ScopedBufferFactory("local")


def dynamic(name: str, dtype: str = "int32"):
    """A dimension known only at call time: bound from the arguments' shapes."""
    return _C.var(name, canonical(dtype))


def symbolic(name: str, dtype: str = "int32"):
    """The same as T.dynamic: a dimension known only at call time."""
    return dynamic(name, dtype)


class GemmWarpPolicy:
    """How T.gemm spreads its warps over the output tile: Square (the most square warp
    tiles), FullRow (every warp splits the rows, M), FullCol (every warp splits the columns, N)."""

    Square = 0
    FullRow = 1
    FullCol = 2
