"""The few names of TVM that TileLang programs use around their kernels, for programs that
`import tvm` (upstream TileLang ships TVM, and `import tilelang` makes it importable):

    from tilelang import tvm as tvm
    from tvm import DataType, tir
    DataType("float16").bits            tir.const(15, "uint8")
    tir.reinterpret("float16", x)       tir.PrimExpr (annotations)
    tir.Select(c, a, b), tir.Cast(dtype, x), tir.IntImm, tir.FloatImm
    tvm.te.var("m")                     (a dimension known at call time, as T.dynamic)

It is importable as `tvm` only where no real TVM is installed (tilelang/__init__.py adds
it last to the import machinery); names beyond these are missing with their TVM names."""
from __future__ import annotations

from ..dtypes import DType as DataType
from . import te, tir

__all__ = ["DataType", "te", "tir"]


def __getattr__(name):
    raise AttributeError(f"tvm.{name} is not available: TileLang provides only the TVM names {__all__} "
                         "(install TVM for the rest)")
