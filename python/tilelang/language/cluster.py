"""Thread-block clusters (CUDA sm_90 and newer), with upstream TileLang's names: the rank of
a block in its cluster, the cluster-wide barrier, cluster mbarriers, and copies that reach
the cluster's other blocks (TMA multicast). A kernel opts in with
T.Kernel(..., cluster_dims=...) (docs/gpu_lowering.md, "Clusters")."""
from __future__ import annotations

from .. import _C
from ..parser import builder as _builder
from .hopper import _stmt, alloc_barrier


def block_rank_in_cluster():
    """The rank (0 .. blocks per cluster - 1) of this block in its cluster."""
    _builder.require("T.block_rank_in_cluster")
    return _C.call("block_rank_in_cluster", [])


def cluster_arrive():
    """This thread's arrival on the cluster-wide barrier (release: its earlier writes,
    shared memory included, are visible to threads of the cluster after their wait)."""
    _stmt("cluster_arrive", [])


def cluster_arrive_relaxed():
    """An arrival on the cluster-wide barrier that orders no memory accesses."""
    _stmt("cluster_arrive_relaxed", [])


def cluster_wait():
    """Waits until every thread of every block of the cluster has arrived (acquire)."""
    _stmt("cluster_wait", [])


def cluster_sync():
    """T.cluster_arrive() then T.cluster_wait(): every block of the cluster is here."""
    _stmt("cluster_sync", [])


def alloc_cluster_barrier(arrive_count):
    """T.alloc_barrier's mbarriers, for a cluster kernel: their initialisation is made
    visible to the cluster's other blocks (a fence and a cluster-wide barrier) before any
    thread goes on, so that the other blocks may arrive on them (T.mbarrier_arrive(bar,
    cta_id)) and copy into this block's shared memory."""
    return alloc_barrier(arrive_count)


def copy_cluster(src, dst, *, dst_block=None, cluster_mask=None, remote_barrier=None, eviction_policy=None,
                 coalesced_width=None, annotations=None, loop_layout=None):
    """A copy that reaches the cluster's other blocks. With cluster_mask (a TMA multicast of a
    global tile into shared memory, inside a T.Pipelined loop): the block of the lowest set
    bit of the mask loads the tile once for every block whose bit is set, which receive that
    same tile in their copy of dst; blocks outside the mask load their own. The pipeline's
    stages are then released across the cluster (a block refills a stage only when every
    block of the cluster is done with it), and the loop must run the same number of times in
    every block of a cluster (checked when the compiler can see it, else an error)."""
    from .tile_ops import _as_region, _emit, _extents
    unsupported = _builder.error_cls("TileLangUnsupportedError")
    type_error = _builder.error_cls("TileLangTypeError")
    if dst_block is not None or remote_barrier is not None:
        raise _builder.error(unsupported,
                             "T.copy_cluster: copies into another block's shared memory (dst_block, "
                             "remote_barrier) are not supported yet",
                             "exchange the data through global memory, or use cluster_mask for a multicast load")
    if cluster_mask is None:
        raise _builder.error(type_error, "T.copy_cluster needs cluster_mask= (or dst_block=)",
                             "for a copy within the block, use T.copy")
    mask = _cluster_mask("T.copy_cluster", cluster_mask)
    dst_ext = _extents(dst)
    src_r = _as_region(src, dst_ext, "T.copy_cluster", "source")
    dst_r = _as_region(dst, [e for _, e in src_r.ranges], "T.copy_cluster", "destination")
    if src_r.buffer.scope != "global" or dst_r.buffer.scope not in ("shared", "shared.dyn"):
        raise _builder.error(unsupported, "T.copy_cluster: a multicast (cluster_mask) copies global -> shared",
                             "the source must be a global tensor and the destination a shared tile")
    from .tile_ops import _eviction_attrs
    _emit("copy", [src_r, dst_r], [], {"cluster_mask": mask, **_eviction_attrs("T.copy_cluster", eviction_policy)})


def _cluster_mask(name, cluster_mask):
    if isinstance(cluster_mask, bool) or not isinstance(cluster_mask, int) or not 0 < cluster_mask < (1 << 16):
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             f"{name}: cluster_mask must be a positive int bit mask of the cluster's blocks, "
                             f"got {cluster_mask!r}",
                             "e.g. cluster_mask=0b11 for the first two blocks of the cluster")
    return cluster_mask
