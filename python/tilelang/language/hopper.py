"""Hopper's synchronisation by hand, with upstream TileLang's names: mbarriers, register
budgets of warpgroups, the async-proxy fence. T.Pipelined and T.gemm use the same
instructions on their own (docs/gpu_lowering.md); these are for kernels that schedule
their warps themselves. CUDA sm_90a only."""
from __future__ import annotations

from .. import _C
from ..ir import Buffer, is_expr
from ..parser import builder as _builder
from .alloc import _alloc


def _stmt(name, args):
    b = _builder.require(f"T.{name}")
    b.emit(_C.evaluate(_C.call_void(name, list(args))))


def _int(name, what, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise _builder.error(_builder.error_cls("TileLangTypeError"), f"T.{name}: {what} must be an int, got {v!r}")
    return v


def _barrier(name, mbar):
    """The mbarrier element: a barrier buffer's element, or its first one, or the index of
    one of T.create_list_of_mbarrier's barriers (an int or an integer kernel value)."""
    if isinstance(mbar, Buffer):
        if mbar.ndim != 1:
            raise _builder.error(_builder.error_cls("TileLangShapeError"),
                                 f"T.{name}: barrier buffer '{mbar.name}' must be 1-D (T.alloc_barrier)")
        return mbar[0]
    if (isinstance(mbar, int) and not isinstance(mbar, bool)) or (
            is_expr(mbar) and mbar.kind != "BufferLoad" and mbar.dtype.startswith(("int", "uint"))):
        return get_mbarrier(mbar)
    if is_expr(mbar):
        return mbar
    raise _builder.error(_builder.error_cls("TileLangTypeError"),
                         f"T.{name}: expected a barrier from T.alloc_barrier (or one element of it), got "
                         f"{type(mbar).__name__}")


def alloc_barrier(arrive_count):
    """mbarriers in shared memory, one per arrival count given (an int or a list), each
    initialised by one thread to take that many arrivals per phase before the block
    goes on."""
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    if not counts:
        raise _builder.error(_builder.error_cls("TileLangShapeError"), "T.alloc_barrier: no arrival counts given")
    for c in counts:
        if _int("alloc_barrier", "an arrival count", c) < 1:
            raise _builder.error(_builder.error_cls("TileLangShapeError"),
                                 f"T.alloc_barrier: arrival counts must be at least 1, got {c}")
    buf = _alloc((len(counts),), "uint64", "shared.dyn", "mbarrier", {"pipelined": 1})
    _stmt("mbarrier_init_all", [buf[0]] + [_C.const(c, "int32") for c in counts])
    return buf


def create_list_of_mbarrier(*arrive_counts):
    """Upstream's barriers by index: mbarriers with these arrival counts (ints, or one list),
    initialised like T.alloc_barrier's; T.get_mbarrier(i), or the index i itself where a
    barrier is expected (T.mbarrier_wait_parity(mbarrier=i, ...)), names the i-th."""
    counts = list(arrive_counts[0]) if len(arrive_counts) == 1 and isinstance(arrive_counts[0], (list, tuple)) \
        else list(arrive_counts)
    buf = alloc_barrier(counts)
    _builder.require("T.create_list_of_mbarrier").mbarrier_list = buf
    return buf


def get_mbarrier(index):
    """The index-th barrier of T.create_list_of_mbarrier."""
    barriers = _builder.require("T.get_mbarrier").mbarrier_list
    if barriers is None:
        raise _builder.error(_builder.error_cls("TileLangNameError"),
                             f"T.get_mbarrier({index}): the kernel has no T.create_list_of_mbarrier",
                             "create the barriers first: T.create_list_of_mbarrier([128, 128])")
    if isinstance(index, int) and not 0 <= index < barriers.shape[0]:
        raise _builder.error(_builder.error_cls("TileLangBoundsError"),
                             f"T.get_mbarrier({index}): the list has {barriers.shape[0]} barriers")
    return barriers[index]


def no_set_max_nreg():
    """Upstream's switch: the compiler's warp specialisation leaves the register budgets
    alone (no setmaxnreg for its producer and consumers)."""
    _stmt("no_set_max_nreg", [])


disable_warp_group_reg_alloc = no_set_max_nreg


def mbarrier_wait_parity(mbarrier, parity):
    """Waits until the phase of the given parity (0 or 1) of the barrier has completed."""
    _stmt("mbarrier_wait", [_barrier("mbarrier_wait_parity", mbarrier), parity])


def mbarrier_arrive(mbarrier, cta_id=None):
    """This thread's arrival on the barrier; with cta_id (a cluster kernel), on the barrier
    at the same place in the shared memory of the cluster's block of that rank."""
    if cta_id is not None:
        _stmt("mbarrier_arrive_remote", [_barrier("mbarrier_arrive", mbarrier), cta_id])
        return
    _stmt("mbarrier_arrive", [_barrier("mbarrier_arrive", mbarrier)])


def mbarrier_expect_tx(mbarrier, tx):
    """Adds tx bytes that the barrier's current phase also waits for (TMA copies deliver
    them), without arriving."""
    _stmt("mbarrier_expect_tx", [_barrier("mbarrier_expect_tx", mbarrier), tx])


def mbarrier_arrive_expect_tx(mbarrier, tx):
    """Arrives on the barrier and adds tx bytes its current phase waits for."""
    _stmt("mbarrier_arrive_expect_tx", [_barrier("mbarrier_arrive_expect_tx", mbarrier), tx])


class WarpSpecializeSpec:
    """What `with T.ws(...)` opens: the block's threads [lo, hi)."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


def ws(*warp_group_ids):
    """`with T.ws(1): ...`: the statements inside run on the given warpgroups only (128
    threads each; consecutive ids, e.g. T.ws(0, 1)). Tile operators inside are lowered for
    those threads (a T.gemm in T.ws(1) runs on one warpgroup), barriers the compiler places
    inside are named barriers of those threads, and what different T.ws regions share is
    ordered by hand (T.alloc_barrier, T.barrier_arrive / T.barrier_wait): the compiler puts
    no barrier between two regions. Fragments belong to one region each."""
    ids = [_int("ws", "a warpgroup id", i) for i in warp_group_ids]
    if not ids:
        raise _builder.error(_builder.error_cls("TileLangTypeError"), "T.ws: no warpgroup id given",
                             "write `with T.ws(0):` for the block's first 128 threads")
    ids = sorted(set(ids))
    if ids[0] < 0 or ids != list(range(ids[0], ids[-1] + 1)):
        raise _builder.error(_builder.error_cls("TileLangUnsupportedError"),
                             f"T.ws: warpgroups {ids} are not consecutive non-negative ids",
                             "open one T.ws region per run of consecutive warpgroups")
    return WarpSpecializeSpec(ids[0] * 128, (ids[-1] + 1) * 128)


def annotate_producer_reg_dealloc(reg_count: int = 24):
    """Upstream's name for T.dec_max_nreg(reg_count): the calling warpgroup gives registers
    back (a producer warpgroup that only issues copies)."""
    dec_max_nreg(reg_count)


def annotate_consumer_reg_alloc(reg_count: int = 240):
    """Upstream's name for T.inc_max_nreg(reg_count): the calling warpgroup takes registers
    (consumer warpgroups holding accumulators)."""
    inc_max_nreg(reg_count)


def fence_proxy_async():
    """Orders this thread's ordinary shared-memory writes before later reads by the tensor
    cores or TMA (fence.proxy.async.shared::cta); put it before the barrier that publishes
    the writes."""
    _stmt("fence_proxy_async", [])


def set_max_nreg(reg_count: int, is_inc: int):
    """Moves the executing warpgroup to reg_count registers per thread (setmaxnreg; is_inc
    1 to grow, 0 to shrink). reg_count is a multiple of 8 in 24..256; every thread of the
    warpgroup must execute it. The kernel is declared with one block per multiprocessor."""
    r = _int("set_max_nreg", "reg_count", reg_count)
    if r < 24 or r > 256 or r % 8:
        raise _builder.error(_builder.error_cls("TileLangShapeError"),
                             f"T.set_max_nreg: reg_count must be a multiple of 8 in 24..256, got {r}")
    _stmt("set_max_nreg", [_C.const(r, "int32"), _C.const(1 if is_inc else 0, "int32")])


def inc_max_nreg(reg_count: int):
    """T.set_max_nreg(reg_count, 1)."""
    set_max_nreg(reg_count, 1)


def dec_max_nreg(reg_count: int):
    """T.set_max_nreg(reg_count, 0)."""
    set_max_nreg(reg_count, 0)


def barrier_wait(barrier_id, parity=None):
    """Upstream's spelling of T.mbarrier_wait_parity(barrier_id, parity)."""
    if parity is None:
        raise _builder.error(_builder.error_cls("TileLangTypeError"),
                             "T.barrier_wait: the parity to wait for (0 or 1) must be given",
                             "T.barrier_wait(barrier, parity)")
    mbarrier_wait_parity(barrier_id, parity)


def barrier_arrive(barrier_id):
    """Upstream's spelling of T.mbarrier_arrive(barrier_id)."""
    mbarrier_arrive(barrier_id)


def cp_async_barrier_noinc(barrier):
    """Arrives on the mbarrier once this thread's earlier cp.async copies (those of a
    `with T.attr(..., "async_scope", 1):` scope) have landed, without raising the count of
    arrivals the barrier's phase waits for: the barrier's arrive_count includes these
    threads (cp.async.mbarrier.arrive.noinc, sm_90a here)."""
    _stmt("cp_async_barrier_noinc", [_barrier("cp_async_barrier_noinc", barrier)])


def sync_threads(barrier_id=None, arrive_count=None):
    """A barrier of the block's threads (__syncthreads) or, with barrier_id (1-15), the
    named barrier of that id over arrive_count threads (all of the block's by default;
    a multiple of 32): bar.sync id, count. Named barriers let some warps wait for each
    other while the others go on, e.g. the consumer warpgroups of a specialised kernel.
    The compiler adds no block-wide barrier where one of these already orders the shared
    accesses: the threads that synchronise by hand choose which of them wait."""
    b = _builder.require("T.sync_threads")
    if barrier_id is None:
        if arrive_count is not None:
            raise _builder.error(_builder.error_cls("TileLangTypeError"),
                                 "T.sync_threads: arrive_count needs a barrier_id", "T.sync_threads(barrier_id, count)")
        _stmt("sync_threads", [])
        return
    bid = _int("sync_threads", "barrier_id", barrier_id)
    if not 1 <= bid <= 15:
        raise _builder.error(_builder.error_cls("TileLangShapeError"),
                             f"T.sync_threads: barrier_id must be in 1..15 (0 is the block-wide barrier), got {bid}")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"), "T.sync_threads is used outside a T.Kernel block")
    threads = 1
    for t in b.kernels[-1][1]:
        threads *= int(t)
    count = threads if arrive_count is None else _int("sync_threads", "arrive_count", arrive_count)
    if count < 32 or count % 32 or count > threads:
        raise _builder.error(_builder.error_cls("TileLangShapeError"),
                             f"T.sync_threads: arrive_count must be a multiple of 32 in 32..{threads} "
                             f"(the block's threads), got {count}")
    _stmt("named_barrier_sync", [_C.const(bid, "int32"), _C.const(count, "int32")])


def named_barrier_arrive(barrier_id, thread_count):
    """Arrives on named barrier barrier_id (1-15) of thread_count threads without waiting
    (bar.arrive): the other side waits with T.sync_threads(barrier_id, thread_count), e.g.
    a producer warpgroup saying a buffer is ready and going on."""
    b = _builder.require("T.named_barrier_arrive")
    bid = _int("named_barrier_arrive", "barrier_id", barrier_id)
    if not 1 <= bid <= 15:
        raise _builder.error(_builder.error_cls("TileLangShapeError"),
                             f"T.named_barrier_arrive: barrier_id must be in 1..15 (0 is the block-wide barrier), "
                             f"got {bid}")
    if not b.kernels:
        raise _builder.error(_builder.error_cls("TileLangSyntaxError"),
                             "T.named_barrier_arrive is used outside a T.Kernel block")
    threads = 1
    for t in b.kernels[-1][1]:
        threads *= int(t)
    count = _int("named_barrier_arrive", "thread_count", thread_count)
    if count < 32 or count % 32 or count > threads:
        raise _builder.error(_builder.error_cls("TileLangShapeError"),
                             f"T.named_barrier_arrive: thread_count must be a multiple of 32 in 32..{threads} "
                             f"(the block's threads), got {count}")
    _stmt("named_barrier_arrive", [_C.const(bid, "int32"), _C.const(count, "int32")])


def tma_store_arrive():
    """Commits this thread's TMA stores issued so far as one bulk group
    (cp.async.bulk.commit_group; T.tma_copy's stores commit their own)."""
    _stmt("tma_store_commit", [])


def tma_store_wait(count: int = 0, read: bool = True):
    """Waits until at most `count` bulk groups of this thread's TMA stores are in flight: with
    read=True until they have read their shared tiles (which may then be written again),
    else until their writes to global memory are done."""
    _int("tma_store_wait", "count", count)
    _stmt("tma_store_wait_read" if read else "tma_store_wait", [count])
