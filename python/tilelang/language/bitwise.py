"""Bit operations by their upstream names: T.bitwise_and, T.bitwise_or, T.bitwise_xor,
T.bitwise_not, T.shift_left and T.shift_right.

They are the operators & | ^ ~ << >> of kernel values: C's bit operations on integers (the
operands meet in a common integer type as in arithmetic; >> of a signed value is arithmetic;
a shift amount must lie in [0, bits of the type)), and on two bools & | ^ ~ are the logical
and, or, xor and not. A float operand, or a bool meeting an integer, is a TileLangTypeError.
Python numbers become constants of the IR (int32 where they fit), folded at once:
T.bitwise_xor(5, 3) is the int32 constant 6.
"""
from __future__ import annotations

from .. import _C

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right"]


def bitwise_and(x, y):
    """``x & y``: bitwise and of integers, logical and of two bools."""
    return _C.binary("bitwise_and", x, y)


def bitwise_or(x, y):
    """``x | y``: bitwise or of integers, logical or of two bools."""
    return _C.binary("bitwise_or", x, y)


def bitwise_xor(x, y):
    """``x ^ y``: bitwise xor of integers, ``x != y`` of two bools."""
    return _C.binary("bitwise_xor", x, y)


def bitwise_not(x):
    """``~x``: the bitwise complement of an integer, the logical not of a bool."""
    return _C.bitwise_not(x)


def shift_left(x, y):
    """``x << y``: x shifted left by y bits (0 <= y < the bits of the type), wrapping."""
    return _C.binary("shift_left", x, y)


def shift_right(x, y):
    """``x >> y``: x shifted right by y bits, arithmetic for signed x and logical for unsigned x."""
    return _C.binary("shift_right", x, y)
