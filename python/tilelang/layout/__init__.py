"""Layouts a kernel can ask for with T.annotate_layout.

    T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})

Only the swizzled layout of a shared buffer is supported so far: the widest XOR swizzle
of 16-byte chunks that fits its rows (the compiler already swizzles T.gemm's shared
operands; this asks for the same on other shared tiles, e.g. an epilogue's)."""
from __future__ import annotations

from .maps import Fragment, Layout


class SwizzledLayout:
    """The request to store a shared buffer swizzled."""

    def __init__(self, buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"make_swizzled_layout({getattr(self.buffer, 'name', '?')})"


def make_swizzled_layout(buffer, k_major: bool = True, allow_pad: bool = True):
    return SwizzledLayout(buffer)


__all__ = ["make_swizzled_layout", "SwizzledLayout", "Layout", "Fragment"]
