"""Thread-level helpers of GPU kernels, as upstream names them: where a thread sits in its
warp, warpgroup, block and cluster (T.get_lane_idx, T.get_warp_idx, T.get_warp_group_idx,
T.get_thread_extent, T.get_block_extent, T.get_cluster_id, T.shuffle_elect); warp votes,
matches and barriers with a predicate (T.any_sync, T.all_sync, T.ballot_sync, T.activemask,
T.match_any_sync, T.sync_warp, T.syncthreads_count / _and / _or); reductions of one value
over a warp (T.warp_reduce_sum / max / min / bitand / bitor); and a thread's look over a
small buffer (T.any_of, T.all_of). The warp operations run on CUDA and HIP (a warp is 32
threads on CUDA, the wavefront on HIP); the CPU, which runs a block as one program, and
WebGPU, whose subgroups have no fixed size, reject them at the line that uses them."""
from __future__ import annotations

from .. import _C
from ..errors import TileLangTypeError
from ..ir import is_expr
from ..parser import builder as _builder
from .kernel import _kernel_indices

_FULL_MASK = 0xFFFFFFFF


def _kernel(name):
    """The innermost T.Kernel's (thread_vars, threads, block_vars, grid, cluster); a syntax
    error outside a T.Kernel block."""
    _kernel_indices(name, 0)
    return _builder.require(name).kernels[-1]


def _linear_thread(name):
    """x + X * (y + Y * z): the thread's place in its block (the kernel's thread extents)."""
    extents = _kernel(name)[1]
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
    """The block's thread extent along dim (threads= of the innermost T.Kernel; 1 past them)."""
    extents = _kernel("T.get_thread_extent")[1]
    return extents[dim] if 0 <= dim < len(extents) else 1


def get_thread_extents():
    """The block's thread extents (x, y, z as given to threads=)."""
    return list(_kernel("T.get_thread_extents")[1])


def get_block_extent(dim: int = 0):
    """The grid's extent along dim (the innermost T.Kernel's block counts; 1 past them)."""
    grid = _kernel("T.get_block_extent")[3]
    return grid[dim] if 0 <= dim < len(grid) else 1


def get_block_extents():
    """The grid's extents (as given to T.Kernel)."""
    return list(_kernel("T.get_block_extents")[3])


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


def _match(name, value, mask):
    if not is_expr(value) or not (value.dtype.startswith("int") or value.dtype.startswith("uint") or
                                  value.dtype in ("float32", "float64")) or value.dtype.endswith("8") or \
            value.dtype.endswith("16"):
        raise _builder.error(TileLangTypeError, f"T.{name} compares 32- or 64-bit values, got "
                             f"{value.dtype if is_expr(value) else repr(value)}")
    return _C.call(name, [_mask(mask), value])


def match_any_sync(value, mask=_FULL_MASK):
    """The lanes of the mask whose value equals this lane's (uint32; CUDA sm_70+)."""
    return _match("match_any_sync", value, mask)


def match_all_sync(value, mask=_FULL_MASK):
    """The mask where every lane of it has the same value, else 0 (uint32; CUDA sm_70+)."""
    return _match("match_all_sync", value, mask)


def _cluster(name):
    dims = list(_kernel(name)[4]) or [1, 1, 1]
    return dims + [1] * (3 - len(dims))


def get_cluster_dims():
    """The cluster's shape [x, y, z] (T.Kernel's cluster_dims; [1, 1, 1] without)."""
    return _cluster("T.get_cluster_dims")


def get_cluster_size():
    """The blocks of a cluster."""
    x, y, z = _cluster("T.get_cluster_size")
    return x * y * z


def get_cluster_id(dim: int = 0):
    """The cluster of this block along dim: its block index divided by the cluster's extent."""
    dims = _cluster("T.get_cluster_id")
    blocks = _kernel("T.get_cluster_id")[2]
    if dim >= len(blocks):
        return 0
    return blocks[dim] if dims[dim] == 1 else blocks[dim] // dims[dim]


def get_cluster_ids():
    """T.get_cluster_id along every grid dimension of the kernel."""
    return [get_cluster_id(d) for d in range(len(_kernel("T.get_cluster_ids")[2]))]


def get_cluster_extent(dim: int = 0):
    """The clusters along dim: the grid's extent divided by the cluster's, rounded up."""
    dims = _cluster("T.get_cluster_extent")
    extent = get_block_extent(dim)
    return -(-extent // dims[dim]) if isinstance(extent, int) else (extent + dims[dim] - 1) // dims[dim]


def get_cluster_extents():
    """T.get_cluster_extent along x, y and z."""
    return [get_cluster_extent(d) for d in range(3)]


def ballot(predicate):
    """T.ballot_sync(predicate) over the whole warp."""
    return ballot_sync(predicate)


def _elements(name, buffer):
    from .tile_ops import _as_region
    region = _as_region(buffer, None, name, "buffer")
    extents = [int(e.value) if is_expr(e) and e.kind == "IntImm" else e for _, e in region.ranges]
    if not all(isinstance(e, int) for e in extents):
        raise _builder.error(TileLangTypeError, f"{name} needs a buffer of constant shape, got extents {extents}")
    count = 1
    for e in extents:
        count *= e
    if count > 1024:
        raise _builder.error(_builder.error_cls("TileLangUnsupportedError"),
                             f"{name} over {count} elements (each thread reads them all; at most 1024)",
                             "reduce the buffer with T.reduce_max / T.reduce_min first")
    out = []
    for flat in range(count):
        idx, rest = [], flat
        for e in reversed(extents):
            idx.append(rest % e)
            rest //= e
        idx = [lo + i for (lo, _), i in zip(region.ranges, reversed(idx))]
        out.append(region.buffer[tuple(idx)] if len(idx) > 1 else region.buffer[idx[0]])
    return out


def any_of(buffer):
    """Whether any element of the buffer (or region) is non-zero, as the calling thread reads
    them all (a small per-thread or shared buffer)."""
    from .math import Or
    xs = [x != 0 for x in _elements("T.any_of", buffer)]
    out = xs[0]
    for x in xs[1:]:
        out = Or(out, x)
    return out


def all_of(buffer):
    """Whether every element of the buffer (or region) is non-zero, as the calling thread
    reads them all."""
    from .math import And
    xs = [x != 0 for x in _elements("T.all_of", buffer)]
    out = xs[0]
    for x in xs[1:]:
        out = And(out, x)
    return out


def assume(cond=None):
    """A fact the program guarantees (upstream's analyzer hint); no code, and no check."""
    return None
