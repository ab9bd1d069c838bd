"""Thread-level helpers of GPU kernels, as upstream names them: where a thread sits in its
warp, warpgroup and block (T.get_lane_idx, T.get_warp_idx, T.get_warp_group_idx,
T.get_thread_extent, T.get_block_extent, T.shuffle_elect); warp votes and barriers with a
predicate (T.any_sync, T.all_sync, T.ballot_sync, T.activemask, T.sync_warp,
T.syncthreads_count / _and / _or); and reductions of one value over a warp
(T.warp_reduce_sum / max / min / bitand / bitor). They run on CUDA and HIP (a warp is 32
threads on CUDA, the wavefront on HIP); the CPU, which runs a block as one program, and
WebGPU, whose subgroups have no fixed size, reject them at the line that uses them."""
from __future__ import annotations

from .. import _C
from ..errors import TileLangTypeError
from ..ir import is_expr
from ..parser import builder as _builder
from .kernel import _kernel_indices

_FULL_MASK = 0xFFFFFFFF


def _linear_thread(name):
    """x + X * (y + Y * z): the thread's place in its block (the kernel's thread extents)."""
    extents = _builder.require(name).kernels[-1][1] if _kernel_indices(name, 0) is not None else []
    index = _C.call("thread_index", [len(extents) - 1])
    for d in range(len(extents) - 2, -1, -1):
        index = index * extents[d] + _C.call("thread_index", [d])
    return index


def _width(name, warp_size):
    if warp_size is None:
        return _C.call("warp_size", [])
    if isinstance(warp_size, bool) or not (isinstance(warp_size, int) or is_expr(warp_size)):
        raise _builder.error(TileLangTypeError, f"{name}: warp_size must be an int, got {warp_size!r}")
    return warp_size


def get_lane_idx(warp_size=None):
    """The thread's lane in its warp: the block-linear thread index modulo warp_size
    (default: the target's warp, 32 on CUDA, the wavefront on HIP)."""
    return _linear_thread("T.get_lane_idx") % _width("T.get_lane_idx", warp_size)


def get_warp_idx(warp_size=None):
    """The thread's warp in its block: the block-linear thread index divided by warp_size."""
    return _linear_thread("T.get_warp_idx") // _width("T.get_warp_idx", warp_size)


def get_warp_idx_sync(warp_size=None):
    """T.get_warp_idx for a converged warp (the same value; upstream makes it warp-uniform)."""
    return _linear_thread("T.get_warp_idx_sync") // _width("T.get_warp_idx_sync", warp_size)


def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """The thread's warpgroup: the block-linear thread index divided by warp_size *
    warps_per_group (4 warps by default)."""
    if warps_per_group is not None and warp_size is None:
        raise _builder.error(TileLangTypeError, "T.get_warp_group_idx: warps_per_group needs warp_size too",
                             "write T.get_warp_group_idx(32, warps_per_group)")
    group = _width("T.get_warp_group_idx", warp_size) * (4 if warps_per_group is None else warps_per_group)
    return _linear_thread("T.get_warp_group_idx") // group


def shuffle_elect(thread_extent):
    """True on exactly one thread of each group of thread_extent consecutive threads (the
    first); thread_extent 0: one thread of the block."""
    if isinstance(thread_extent, bool) or not isinstance(thread_extent, int) or thread_extent < 0:
        raise _builder.error(TileLangTypeError,
                             f"T.shuffle_elect: thread_extent must be a non-negative int, got {thread_extent!r}")
    index = _linear_thread("T.shuffle_elect")
    return index == 0 if thread_extent == 0 else index % thread_extent == 0


def get_thread_extent(dim: int = 0):
    """The block's thread extent along dim (threads= of the innermost T.Kernel)."""
    extents = _builder.require("T.get_thread_extent").kernels[-1][1] if _kernel_indices("T.get_thread_extent", 0) \
        is not None else []
    return list(extents)[dim] if 0 <= dim < len(extents) else 1


def get_thread_extents():
    """The block's thread extents (x, y, z as given to threads=)."""
    _kernel_indices("T.get_thread_extents", 0)
    return list(_builder.require("T.get_thread_extents").kernels[-1][1])


def get_block_extent(dim: int = 0):
    """The grid's extent along dim (the innermost T.Kernel's block counts)."""
    _kernel_indices("T.get_block_extent", 2)
    grid = _builder.require("T.get_block_extent").kernels[-1][3]
    return grid[dim] if 0 <= dim < len(grid) else 1


def get_block_extents():
    """The grid's extents (as given to T.Kernel)."""
    _kernel_indices("T.get_block_extents", 2)
    return list(_builder.require("T.get_block_extents").kernels[-1][3])


def _predicate(name, predicate):
    if is_expr(predicate):
        if predicate.dtype.startswith("float"):
            raise _builder.error(TileLangTypeError, f"T.{name} needs an integer or boolean predicate, got "
                                 f"{predicate.dtype}", f"compare first, e.g. T.{name}(x > 0)")
        return _C.cast("int32", predicate) if predicate.dtype != "int32" else predicate
    if isinstance(predicate, (bool, int)):
        return int(predicate)
    raise _builder.error(TileLangTypeError, f"T.{name} needs an integer or boolean predicate, got {predicate!r}")


def _mask(mask):
    return _C.const(int(mask) & _FULL_MASK, "uint32") if not is_expr(mask) else _C.cast("uint32", mask)


def any_sync(predicate, mask=_FULL_MASK):
    """Non-zero (int32) where the predicate holds on any lane of the mask."""
    return _C.call("any_sync", [_mask(mask), _predicate("any_sync", predicate)])


def all_sync(predicate, mask=_FULL_MASK):
    """Non-zero (int32) where the predicate holds on every lane of the mask."""
    return _C.call("all_sync", [_mask(mask), _predicate("all_sync", predicate)])


def ballot_sync(predicate, mask=_FULL_MASK):
    """The lanes of the mask where the predicate holds, bit n for lane n (uint64)."""
    return _C.call("ballot_sync", [_mask(mask), _predicate("ballot_sync", predicate)])


def activemask():
    """The lanes of the warp executing this call, bit n for lane n (uint64)."""
    return _C.call("activemask", [])


def sync_warp(mask=None):
    """A barrier of the warp's lanes in mask (all by default): __syncwarp."""
    b = _builder.require("T.sync_warp")
    b.emit(_C.evaluate(_C.call("sync_warp", [_mask(_FULL_MASK if mask is None else mask)])))


def syncthreads_count(predicate):
    """A barrier of the block that returns how many threads' predicate holds (int32)."""
    return _C.call("syncthreads_count", [_predicate("syncthreads_count", predicate)])


def syncthreads_and(predicate):
    """A barrier of the block that returns non-zero where the predicate holds on every thread."""
    return _C.call("syncthreads_and", [_predicate("syncthreads_and", predicate)])


def syncthreads_or(predicate):
    """A barrier of the block that returns non-zero where the predicate holds on any thread."""
    return _C.call("syncthreads_or", [_predicate("syncthreads_or", predicate)])


def _warp_reduce(kind):
    def reduce(value):
        return _C.call(f"warp_reduce_{kind}", [value])
    reduce.__name__ = f"warp_reduce_{kind}"
    reduce.__doc__ = (f"The {kind} of value over the lanes of the warp, on every lane (butterfly shuffles; "
                      "every lane must take part).")
    return reduce


warp_reduce_sum = _warp_reduce("sum")
warp_reduce_max = _warp_reduce("max")
warp_reduce_min = _warp_reduce("min")
warp_reduce_bitand = _warp_reduce("bitand")
warp_reduce_bitor = _warp_reduce("bitor")
