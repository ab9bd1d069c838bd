"""Layout helpers of upstream's tilelang.intrinsics for shared tiles that threads read with
tensor-core loads:

    T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared)})
    T.Layout(shape, lambda i, j: get_swizzle_layout(i, j, shape[-1], dtype))

The swizzle is the 128-byte one (CuTe's Swizzle<3, 4, 3>): in the tile's row-major bytes,
the 16-byte chunk index within each 128-byte line (address bits 4-6) is XORed with the
line's index modulo 8 (bits 7-9), so the eight chunks a column of 8 rows occupies fall in
eight different bank groups. The layouts only place the elements; results do not depend
on them. Upstream's thread-level MMA emitters (mma_macro_generator) are not provided:
T.gemm chooses and lays out the tensor-core instructions itself."""
from __future__ import annotations

from ..dtypes import DType
from ..layout import Layout, SwizzledLayout


def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """(row, column) of element (row_idx, col_idx) of a tile with rows of row_size elements
    of dtype, stored with the 128-byte swizzle; rows must be a multiple of 16 bytes."""
    bits = DType(str(dtype)).bits
    row_bytes = row_size * bits // 8
    if row_bytes % 16 or (swizzle_bytes not in (None, 128)):
        raise ValueError(f"get_swizzle_layout: rows of {row_bytes} bytes (a multiple of 16 is needed) and "
                         f"swizzle_bytes={swizzle_bytes!r} (128 or None is supported)")
    address = row_idx * row_bytes + col_idx * bits // 8
    part = col_idx * bits % 8  # sub-byte elements keep their place within the byte
    address ^= ((address >> 7) & 7) << 4
    return address // row_bytes, ((address % row_bytes) * 8 + part) // bits


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """The swizzled layout of a shared tile (the compiler's 128-byte swizzle, as
    tilelang.layout.make_swizzled_layout); is_smooth: the tile as it is, row-major."""
    if is_smooth:
        shape = [int(d) for d in shared_buf.shape]
        return Layout(shape, lambda *index: list(index))
    return SwizzledLayout(shared_buf)


__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
