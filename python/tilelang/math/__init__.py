"""Integer helpers for choosing tile sizes and grids (also at the top level: tilelang.cdiv)."""
from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    return 1 << (x - 1).bit_length() if x > 1 else 1


def cdiv(a, b):
    """a / b rounded up: (a + b - 1) // b; works on Python ints and on kernel expressions."""
    return (a + b - 1) // b
