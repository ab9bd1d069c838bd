"""tvm.tir's names that TileLang programs use in kernel helpers."""
from __future__ import annotations

from .. import _C
from ..dtypes import canonical
from ..ir import Expr as PrimExpr
from ..language.math import Cast, FloatImm, IntImm, Select

__all__ = ["PrimExpr", "const", "reinterpret", "Select", "Cast", "IntImm", "FloatImm"]


def const(value, dtype=None):
    """An immediate of dtype (int32 for an int, float32 for a float by default)."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
    return _C.const(value, canonical(dtype))


def reinterpret(dtype, value):
    """The bits of value as dtype (TVM's argument order)."""
    from tilelang.language.extern import reinterpret as _reinterpret
    return _reinterpret(value, dtype)
