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


_PYTHON_TYPES = {"bool": "bool", "int": "int32", "float": "float32"}


class DType(str):
    """A data type: a str holding the canonical name ("float16", "int32x4"), also usable as
    a constructor of constants (``T.float32(1.5)``). ``T.dtype(x)`` / ``tilelang.DataType(x)``
    make one from a name, a Python type (int -> int32, float -> float32, bool), or a numpy
    or torch dtype."""

    def __new__(cls, value="float32"):
        if isinstance(value, type) and value.__module__ == "builtins" and value.__name__ in _PYTHON_TYPES:
            name = _PYTHON_TYPES[value.__name__]
        else:
            try:
                name = canonical(value)
            except TypeError as e:
                raise TypeError(f"Invalid DataType {value!r} ({type(value).__name__}): expected a dtype name, "
                                "a Python, numpy or torch dtype") from e
        return super().__new__(cls, name)

    def _parts(self):
        """(element name, lanes): "float16x4" -> ("float16", 4)."""
        name = str.__str__(self)
        head, sep, tail = name.rpartition("x")
        if sep and tail.isdigit() and head and head[-1].isdigit():
            return head, int(tail)
        return name, 1

    @property
    def lanes(self) -> int:
        """Vector lanes: 4 for "float16x4", 1 for a scalar type."""
        return self._parts()[1]

    @property
    def bits(self) -> int:
        """Bits of one lane: 16 for "float16", 8 for "float8_e4m3", 1 for "bool"."""
        elem = self._parts()[0]
        if elem == "bool":
            return 1
        digits = ""
        for ch in elem.lstrip("abcdefghijklmnopqrstuvwxyz"):
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            raise ValueError(f"dtype {elem!r} has no bit width")
        return int(digits)

    @property
    def itemsize(self) -> int:
        """Bytes of one element (all lanes), rounded up."""
        return (self.bits * self.lanes + 7) // 8

    def as_torch(self):
        """The torch dtype of this type."""
        return torch_dtype(str.__str__(self))

    def as_numpy(self):
        """The numpy dtype storing elements of this type (ml_dtypes for bfloat16 / float8)."""
        npd = numpy_dtype(str.__str__(self))
        if npd is None:
            raise TypeError(f"numpy has no dtype for {str.__str__(self)}")
        return npd

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
