"""Layouts a kernel can ask for with T.annotate_layout.

    T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})

Only the swizzled layout of a shared buffer is supported so far: the widest XOR swizzle
of 16-byte chunks that fits its rows (the compiler already swizzles T.gemm's shared
operands; this asks for the same on other shared tiles, e.g. an epilogue's)."""
from __future__ import annotations


class SwizzledLayout:
    """The request to store a shared buffer swizzled."""

    def __init__(self, buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"make_swizzled_layout({getattr(self.buffer, 'name', '?')})"


def make_swizzled_layout(buffer, k_major: bool = True, allow_pad: bool = True):
    return SwizzledLayout(buffer)


class Layout:
    """A user layout: forward_fn maps a buffer index (one argument per dimension of shape)
    to the storage index. It can be built and evaluated on Python ints; T.annotate_layout
    does not accept it yet (the compiler core has no user index maps)."""

    def __init__(self, shape, forward_fn):
        self.input_shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
        if not callable(forward_fn):
            raise TypeError(f"Layout: forward_fn must be callable, got {type(forward_fn).__name__}")
        self.forward_fn = forward_fn

    def map_forward_index(self, indices):
        out = self.forward_fn(*indices)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def __repr__(self):
        return f"Layout(shape={self.input_shape})"


class Fragment(Layout):
    """A user fragment layout: forward_thread_fn maps an index to the thread holding it,
    forward_index_fn (or forward_fn) to its place in that thread's registers. Like Layout,
    built and evaluated in Python only; T.annotate_layout does not accept it yet."""

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
        index_fn = forward_index_fn if forward_index_fn is not None else forward_fn
        if index_fn is None or forward_thread_fn is None:
            raise TypeError("Fragment needs forward_thread_fn and forward_index_fn (or forward_fn)")
        super().__init__(shape, index_fn)
        if not callable(forward_thread_fn):
            raise TypeError(f"Fragment: forward_thread_fn must be callable, got {type(forward_thread_fn).__name__}")
        self.forward_thread_fn = forward_thread_fn
        self.replicate = int(replicate)

    def map_forward_thread(self, indices, rep=0):
        return self.forward_thread_fn(*indices) if self.replicate == 1 else self.forward_thread_fn(*indices, rep)

    def __repr__(self):
        return f"Fragment(shape={self.input_shape}, replicate={self.replicate})"


__all__ = ["make_swizzled_layout", "SwizzledLayout", "Layout", "Fragment"]
