"""tvm.te.var: a symbolic dimension (T.dynamic)."""
from __future__ import annotations

__all__ = ["var"]


def var(name="v", dtype="int32"):
    from tilelang.language.types import dynamic
    return dynamic(name, dtype)
