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
    """T.Tensor(shape, dtype) and T.Tensor[shape, dtype] both make an annotation."""

    def __call__(self, shape, dtype="float32", strides=None, scope="global", **kwargs):
        return TensorSpec(shape, dtype, strides, scope)

    def __getitem__(self, key):
        if not isinstance(key, tuple) or len(key) != 2:
            raise TypeError("T.Tensor[shape, dtype] takes a shape and a dtype")
        return TensorSpec(key[0], key[1])


Tensor = _TensorFactory()
Buffer = _TensorFactory()
StridedTensor = _TensorFactory()


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
