"""T.Kernel: the launch of a grid of blocks, and the indices available inside it."""
from __future__ import annotations

import numpy as np

from .. import _C
from ..ir import is_expr
from ..parser import builder as _builder


class KernelSpec:
    def __init__(self, grid, threads, prelude=None):
        self.grid = list(grid)
        self.threads = threads


def Kernel(*grid, threads=128, is_cpu=False, prelude=None, cluster_dims=None):
    """`with T.Kernel(gx, gy, threads=128) as (bx, by):` launches gx * gy blocks.
    cluster_dims (thread-block clusters) takes only 1 / (1, 1, 1) so far."""
    if cluster_dims is not None:
        dims = list(cluster_dims) if isinstance(cluster_dims, (list, tuple)) else [cluster_dims]
        if any(d != 1 for d in dims):
            raise _builder.error(_builder.error_cls("TileLangUnsupportedError"),
                                 f"T.Kernel: thread-block clusters (cluster_dims={cluster_dims!r}) are not supported yet",
                                 "launch without clusters (cluster_dims=1): each block loads its own tiles")
    if not grid:
        raise TypeError("T.Kernel needs at least one grid extent")
    if len(grid) > 3:
        raise TypeError(f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}")
    return KernelSpec(grid, _thread_extents(threads), prelude)


def _thread_extents(threads):
    """threads= as a list of Python ints, known when the kernel is compiled (their values
    are checked with the other launch extents, in the compiler's check_tile_ops)."""
    type_error = _builder.error_cls("TileLangTypeError")
    items = list(threads) if isinstance(threads, (list, tuple)) else [threads]
    if not 1 <= len(items) <= 3:
        raise _builder.error(type_error, f"T.Kernel: threads= takes 1 to 3 extents, got {len(items)}",
                             "write threads=128 or threads=[32, 4]")
    out = []
    for t in items:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            what = "a kernel value" if is_expr(t) else f"{t!r} ({type(t).__name__})"
            raise _builder.error(type_error, f"T.Kernel: threads must be Python ints, got {what}",
                                 "the block shape is fixed when the kernel is compiled: pass an int "
                                 "such as threads=128 (a parameter of the function that builds the kernel)")
        out.append(int(t))
    return out


def get_thread_binding(dim: int = 0):
    """The index of the current thread within its block along dim (GPU targets)."""
    b = _builder.require("T.get_thread_binding")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"),
                             "T.get_thread_binding is used outside a T.Kernel block")
    thread_vars = b.kernels[-1][0]
    if not 0 <= dim < len(thread_vars):
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"T.get_thread_binding({dim}): the kernel has {len(thread_vars)} thread dimension(s)")
    # An intrinsic call rather than the variable itself, so that a target without threads
    # reports the line that asked for the index.
    return _C.call("thread_index", [dim])


def get_thread_bindings():
    """The thread index variables of the innermost T.Kernel (x, y, z as given)."""
    b = _builder.require("T.get_thread_bindings")
    return list(b.kernels[-1][0])


def use_swizzle(panel_size: int, order: str = "row", enable: bool = True):
    """Launch the blocks of a 2-D grid panel by panel, for L2 reuse: with order "row",
    panel_size consecutive rows of blocks (the second grid index) form a panel that is
    walked column by column ("col": the roles of the two indices swap). The block indices
    the kernel sees are remapped; the set of blocks is unchanged. A no-op on the CPU."""
    b = _builder.require("T.use_swizzle")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"), "T.use_swizzle is used outside a T.Kernel block")
    if order not in ("row", "col"):
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    if not isinstance(panel_size, int) or panel_size < 1:
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}")
    if enable:
        b.emit(_C.evaluate(_C.call_void("use_swizzle", [int(panel_size), 0 if order == "row" else 1])))


def wait_wgmma(id: int = 0):  # noqa: A002 - upstream's name
    """Waits until at most `id` groups of asynchronous tensor-core work (T.gemm with
    wg_wait=-1 on wgmma) are still in flight, and makes their accumulators readable. On
    instruction paths that complete inside T.gemm (mma.sync, SIMT, CPU) it does nothing."""
    b = _builder.require("T.wait_wgmma")
    if not isinstance(id, int) or id < 0:
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"T.wait_wgmma: the group count must be a non-negative int, got {id!r}")
    b.emit(_C.evaluate(_C.call_void("wait_wgmma", [int(id)])))
