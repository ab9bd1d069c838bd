"""Data types as the DSL spells them, and their numpy / torch counterparts."""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _ml = None

_ALIASES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "int": "int32",
    "float8_e4m3fn": "float8_e4m3",
    "e4m3_float8": "float8_e4m3",
    "e5m2_float8": "float8_e5m2",
    "float4_e2m1fn": "float4_e2m1",
}


def canonical(name) -> str:
    """The canonical name of a dtype given as a string, DType, numpy or torch dtype."""
    if isinstance(name, str):
        s = str.__str__(name)
    elif type(name).__module__.startswith("torch"):
        s = str(name)[len("torch."):]
    else:
        s = np.dtype(name).name
    return _ALIASES.get(s, s)


class DType(str):
    """A dtype name that is also usable as a constructor: ``T.float32(1.5)``."""

    def __call__(self, value=None):
        from . import _C
        if value is None:
            raise TypeError(f"T.{self}() needs a value")
        return _C.const(value, str(self))

    def __repr__(self) -> str:
        return f"T.{str.__str__(self)}"


def numpy_dtype(name: str):
    """The numpy dtype that stores elements of `name`, or None when there is none."""
    name = canonical(name)
    if name == "bfloat16":
        return np.dtype(_ml.bfloat16) if _ml else None
    if name == "float8_e4m3":
        return np.dtype(_ml.float8_e4m3fn) if _ml else None
    if name == "float8_e5m2":
        return np.dtype(_ml.float8_e5m2) if _ml else None
    if name in ("int4", "uint4", "float4_e2m1"):
        return None
    try:
        return np.dtype(name)
    except TypeError:
        return None


def torch_dtype(name: str):
    import torch
    name = canonical(name)
    table = {"float8_e4m3": "float8_e4m3fn", "bool": "bool"}
    return getattr(torch, table.get(name, name))
