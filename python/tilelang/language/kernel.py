"""T.Kernel: the launch of a grid of blocks, and the indices available inside it."""
from __future__ import annotations

import numpy as np

from .. import _C
from ..ir import is_expr
from ..parser import builder as _builder


class KernelSpec:
    def __init__(self, grid, threads, prelude=None, cluster=None):
        self.grid = list(grid)
        self.threads = threads
        self.prelude = prelude  # source placed before the kernel (as T.import_source)
        self.cluster = cluster  # [x, y, z] or None


def Kernel(*grid, threads=128, is_cpu=False, prelude=None, cluster_dims=None):
    """`with T.Kernel(gx, gy, threads=128) as (bx, by):` launches gx * gy blocks.
    cluster_dims (an int or 1-3 ints, sm_90 and newer) groups the blocks into thread-block
    clusters: the blocks of one cluster (consecutive along x, then y, then z) run at the same
    time and reach each other's shared memory (T.copy_cluster, T.tma_copy(cluster_mask=),
    T.block_rank_in_cluster, T.cluster_sync). Each grid extent must be a multiple of the
    cluster's along the same dimension."""
    if not grid:
        raise TypeError("T.Kernel needs at least one grid extent")
    if len(grid) > 3:
        raise TypeError(f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}")
    return KernelSpec(grid, _thread_extents(threads), prelude, _cluster_extents(cluster_dims))


def ClusterKernel(*grid, cluster_dims, threads=128, prelude=None):
    """T.Kernel with a required cluster_dims (as upstream): `with T.ClusterKernel(gx, gy,
    cluster_dims=2, threads=256) as (bx, by):`."""
    if cluster_dims is None:
        raise _builder.error(_builder.error_cls("TileLangTypeError"), "T.ClusterKernel: cluster_dims is required",
                             "write cluster_dims=2 (or (2, 1, 1)), or use T.Kernel without clusters")
    return Kernel(*grid, threads=threads, prelude=prelude, cluster_dims=cluster_dims)


# Blocks per cluster that every sm_90 GPU can launch (16 needs an opt-in that is not portable).
_MAX_CLUSTER_BLOCKS = 8


def _cluster_extents(cluster_dims):
    """cluster_dims as [x, y, z] of Python ints, None without clusters (or for 1 / (1, 1, 1))."""
    if cluster_dims is None:
        return None
    type_error = _builder.error_cls("TileLangTypeError")
    items = list(cluster_dims) if isinstance(cluster_dims, (list, tuple)) else [cluster_dims]
    if not 1 <= len(items) <= 3:
        raise _builder.error(type_error, f"T.Kernel: cluster_dims takes 1 to 3 extents, got {len(items)}",
                             "write cluster_dims=2 or cluster_dims=(2, 1, 1)")
    for c in items:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise _builder.error(type_error, f"T.Kernel: cluster_dims must be Python ints, got {c!r}",
                                 "the cluster shape is fixed when the kernel is compiled")
        if c < 1:
            raise _builder.error(_builder.error_cls("TileLangShapeError"),
                                 f"T.Kernel: cluster_dims={cluster_dims!r}: every extent must be at least 1")
    dims = [int(c) for c in items] + [1] * (3 - len(items))
    if dims == [1, 1, 1]:
        return None
    blocks = dims[0] * dims[1] * dims[2]
    if blocks > _MAX_CLUSTER_BLOCKS:
        raise _builder.error(_builder.error_cls("TileLangUnsupportedError"),
                             f"T.Kernel: cluster_dims={cluster_dims!r} makes clusters of {blocks} blocks; "
                             f"at most {_MAX_CLUSTER_BLOCKS} are portable",
                             "use clusters of 2, 4 or 8 blocks")
    return dims


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


def _kernel_indices(name, which):
    """The innermost T.Kernel's thread (which=0) or block (which=2) index variables; a
    syntax error outside a T.Kernel block."""
    b = _builder.require(name)
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"), f"{name} is used outside a T.Kernel block")
    return b.kernels[-1][which]


def _index_along(name, which, dim, what):
    indices = _kernel_indices(name, which)
    if not 0 <= dim < len(indices):
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"{name}({dim}): the kernel has {len(indices)} {what} dimension(s)")
    return indices


def get_thread_binding(dim: int = 0):
    """The index of the current thread within its block along dim (GPU targets)."""
    _index_along("T.get_thread_binding", 0, dim, "thread")
    # An intrinsic call rather than the variable itself, so that a target without threads
    # reports the line that asked for the index.
    return _C.call("thread_index", [dim])


def get_block_binding(dim: int = 0):
    """The index of the current block along grid dimension dim (the name T.Kernel binds)."""
    return _index_along("T.get_block_binding", 2, dim, "grid")[dim]


def get_block_bindings():
    """The block index variables of the innermost T.Kernel (x, y, z as given)."""
    return list(_kernel_indices("T.get_block_bindings", 2))


def get_thread_bindings():
    """The thread index variables of the innermost T.Kernel (x, y, z as given)."""
    return list(_kernel_indices("T.get_thread_bindings", 0))


def annotate_min_blocks_per_sm(n: int):
    """At least n blocks of this kernel should fit on a multiprocessor: the second argument of
    __launch_bounds__ (CUDA, HIP), so that ptxas budgets registers for them. Not with warp
    specialisation, whose register reallocation needs one block per multiprocessor."""
    b = _builder.require("T.annotate_min_blocks_per_sm")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"),
                             "T.annotate_min_blocks_per_sm is used outside a T.Kernel block")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"T.annotate_min_blocks_per_sm: n must be a positive int, got {n!r}")
    b.emit(_C.evaluate(_C.call_void("min_blocks_per_sm", [n])))


def annotate_restrict_buffers(*buffers):
    """The tensor parameters given may overlap (in-place updates, views of one tensor): their
    pointers are not declared __restrict__, so the compiler neither reorders their loads
    around stores to the others nor reads them through the read-only cache. Every other
    tensor parameter is taken not to overlap any other."""
    from ..ir import Buffer
    b = _builder.require("T.annotate_restrict_buffers")
    names = getattr(b, "non_restrict", [])
    for buf in buffers:
        if not isinstance(buf, Buffer) or buf.handle.scope != "global":
            raise _builder.error(_builder.error_cls("TileLangTypeError"),
                                 f"T.annotate_restrict_buffers takes the kernel's tensor parameters, got {buf!r}")
        if buf.name not in names:
            names.append(buf.name)
    b.non_restrict = names


def device_assert(condition, msg: str = "", no_stack_info: bool = False):
    """Stops the kernel where condition is false: on CUDA and HIP the thread prints
    "file:line: device assert failed: msg" and traps (the launch fails, and the device context
    with it, as CUDA's assert does); on the CPU the message goes to stderr and the kernel goes
    on; WebGPU has no way to report it and compiles the check to nothing. no_stack_info:
    the message without the source line."""
    b = _builder.require("T.device_assert")
    text = msg if no_stack_info else f"{b.file}:{b.line}: device assert failed" + (f": {msg}" if msg else "")
    b.emit(_C.evaluate(_C.call_void("device_assert", [condition, _C.string(text)])))


def thread_return():
    """Ends the calling thread (CUDA / HIP `return`, WebGPU's invocation): the threads that
    took this branch take part in no later barrier, so no block-wide barrier (T.sync_threads,
    a tile operator that exchanges data) may follow it in the kernel. The CPU back end runs a
    block as one program and refuses it."""
    b = _builder.require("T.thread_return")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"), "T.thread_return is used outside a T.Kernel block")
    b.emit(_C.evaluate(_C.call_void("thread_return", [])))


def sync_grid():
    """A barrier of the whole grid: every thread of every block arrives before any goes on, and
    the writes made before it are seen after it. The kernel is then launched cooperatively
    (CUDA), which needs all its blocks resident at once: the launch fails when the grid is
    larger than the device holds. Not on the CPU or WebGPU, whose blocks do not all run at
    once."""
    b = _builder.require("T.sync_grid")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"), "T.sync_grid is used outside a T.Kernel block")
    b.emit(_C.evaluate(_C.call_void("sync_grid", [])))


def pdl_trigger():
    """Programmatic dependent launch (CUDA sm_90+): the next kernel of the stream may start
    now (griddepcontrol.launch_dependents); this kernel's writes after the trigger are still
    seen by a T.pdl_sync there, which waits for the whole grid."""
    b = _builder.require("T.pdl_trigger")
    b.emit(_C.evaluate(_C.call_void("pdl_trigger", [])))


def pdl_sync():
    """Programmatic dependent launch (CUDA sm_90+): wait until the previous kernel of the
    stream has finished and its writes are visible (griddepcontrol.wait). A kernel that
    calls it is launched with programmatic stream serialization, so that its blocks may
    start (and run the code before this call) while that kernel finishes; elsewhere the
    stream's order already holds and the call compiles to nothing."""
    b = _builder.require("T.pdl_sync")
    b.emit(_C.evaluate(_C.call_void("pdl_sync", [])))


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
