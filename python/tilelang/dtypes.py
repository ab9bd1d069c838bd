"""Data types as the DSL spells them, and their numpy / torch counterparts."""
from __future__ import annotations

import numpy as np



def _ml_dtypes():
    """ml_dtypes, imported on first use: it is slow to import and most kernels need no
    bfloat16 / float8 arrays allocated by us."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        return None
    return ml_dtypes

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


_CANONICAL = {}


def canonical(name) -> str:
    """The canonical name of a dtype given as a string, DType, numpy or torch dtype."""
    try:
        return _CANONICAL[name]
    except (KeyError, TypeError):
        pass
    result = _canonical(name)
    try:
        _CANONICAL[name] = result
    except TypeError:  # unhashable
        pass
    return result


def _canonical(name) -> str:
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
    extension = {"bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}
    if name in extension:
        ml = _ml_dtypes()
        return np.dtype(getattr(ml, extension[name])) if ml else None
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
