"""T.im2col (and its older name T.c2d_im2col): the columns of a 2-D convolution's implicit
GEMM gathered into a tile, as upstream spells it."""
from __future__ import annotations

from .. import _C
from ..errors import TileLangShapeError, TileLangTypeError
from ..ir import Buffer
from ..parser import builder as _builder


def _static(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise _builder.error(TileLangTypeError, f"T.im2col: {what} must be a Python int, got {value!r}",
                             "convolution geometry is fixed when the kernel is built")
    return value


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    """col[i, j] = the image element that row nhw_step * rows + i of the implicit GEMM's A
    matrix meets at column c_step * cols + j, for an image `img` of shape (N, H, W, C)
    (channels last) and a square kernel of `kernel` taps with `stride`, `dilation` and
    `pad`: row m is the output pixel (n, oh, ow) = (m // (OH * OW), m % (OH * OW) // OW,
    m % OW), column k the tap (kh, kw, c) = (k // (KW * C), k // C % KW, k % C). Elements
    outside the image (padding) and rows or columns past the matrix's end are 0.
    Gathered by the threads on every target (a T.Parallel loop over the tile)."""
    b = _builder.require("T.im2col")
    for what, buf in (("the image", img), ("the column tile", col)):
        if not isinstance(buf, Buffer):
            raise _builder.error(TileLangTypeError, f"T.im2col: {what} must be a buffer, got {type(buf).__name__}",
                                 "pass the (N, H, W, C) tensor and the shared tile")
    if len(img.shape) != 4:
        raise _builder.error(TileLangShapeError,
                             f"T.im2col: the image '{img.name}' has shape {list(img.shape)}; it must be (N, H, W, C)",
                             "store the image channels last")
    if len(col.shape) != 2:
        raise _builder.error(TileLangShapeError,
                             f"T.im2col: the column tile '{col.name}' has shape {list(col.shape)}; it must be 2-D",
                             "allocate it as T.alloc_shared((block_M, block_K), dtype)")
    kernel, stride, dilation, pad = (_static(v, w) for v, w in
                                     ((kernel, "kernel"), (stride, "stride"), (dilation, "dilation"), (pad, "pad")))
    if kernel < 1 or stride < 1 or dilation < 1 or pad < 0:
        raise _builder.error(TileLangShapeError,
                             f"T.im2col: kernel {kernel}, stride {stride}, dilation {dilation}, pad {pad}: kernel, "
                             "stride and dilation must be at least 1 and pad at least 0", "check the geometry")
    N, H, W, C = img.shape
    rows, cols = col.shape
    KH = KW = kernel
    OH = (H + 2 * pad - dilation * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dilation * (KW - 1) - 1) // stride + 1
    i, j = _C.var("im2col_i", "int32"), _C.var("im2col_j", "int32")
    m = nhw_step * rows + i
    k = c_step * cols + j
    h = m % (OH * OW) // OW * stride + k // (KW * C) * dilation - pad
    w = m % OW * stride + k // C % KW * dilation - pad
    inside = _C.binary("and", _C.binary("and", h >= 0, h < H), _C.binary("and", w >= 0, w < W))
    inside = _C.binary("and", inside, _C.binary("and", m < N * OH * OW, k < KH * KW * C))
    value = _C.select(inside, img[m // (OH * OW), h, w, k % C], _C.cast(col.dtype, 0))
    body = _C.store(col.handle, value, [i, j])
    b.emit(_C.for_(i, 0, rows, "parallel", _C.for_(j, 0, cols, "parallel", body, {}), {"im2col": 1}))


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    """The older name of T.im2col (same arguments, same result)."""
    im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy)
