"""Tile operators: whole-tile copies, fills, matrix multiplies, reductions, scans, atomics."""
from __future__ import annotations

from .. import _C
from ..errors import TileLangShapeError, TileLangTypeError
from ..ir import Buffer, Region, full_region, is_expr
from ..parser import builder as _builder
from .types import GemmWarpPolicy


def _region_of_load(load, other_shape, what):
    """`A[i, j]` given where a region is expected: a point when other_shape is None, else a
    region starting there with the other operand's extents, dimension for dimension (the
    rule is op/region.cc's region_at_point)."""
    handle, indices = _C.load_parts(load)
    buf = Buffer(handle)
    if other_shape is None:
        return Region(buf, [(i, 1) for i in indices])
    return Region(buf, _C.region_at_point(load, list(other_shape), what))


def _as_region(x, other_shape, what, role):
    if isinstance(x, Region):
        return x
    if isinstance(x, Buffer):
        return full_region(x)
    if is_expr(x) and x.kind == "BufferLoad":
        return _region_of_load(x, other_shape, what)
    raise _builder.error(TileLangTypeError,
                         f"{what}: the {role} must be a buffer or a buffer region, got {type(x).__name__}",
                         "pass a buffer (A_shared) or a region (A[by * 64, k * 32] or A[0:64, 0:32])")


def _shape_of(x):
    if isinstance(x, (Region, Buffer)):
        return [e for e in (x.ranges if isinstance(x, Region) else full_region(x).ranges)]
    return None


def _extents(x):
    if isinstance(x, Region):
        return [e for _, e in x.ranges]
    if isinstance(x, Buffer):
        return list(x.handle.shape)
    return None


def _emit(op, regions, args=(), attrs=None):
    b = _builder.require(f"T.{op}")
    b.emit(_C.tile_op(op, [r.as_tuple() for r in regions], list(args), attrs or {}))


# T.copy's eviction_policy: the L2 priority of a TMA load's lines, as upstream numbers them.
_EVICTION_POLICIES = {"evict_normal": 0, "evict_first": 1, "evict_last": 2}


def _eviction_attrs(name, eviction_policy):
    if eviction_policy is None:
        return {}
    if eviction_policy not in _EVICTION_POLICIES:
        raise _builder.error(TileLangTypeError, f"{name}(..., eviction_policy={eviction_policy!r}): not an eviction policy",
                             "use one of " + ", ".join(repr(k) for k in _EVICTION_POLICIES))
    return {"eviction_policy": _EVICTION_POLICIES[eviction_policy]}


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, loop_layout=None):
    """dst = src, element by element (cast to dst's dtype); reads past a global tensor's end
    give 0 and writes past it are skipped. eviction_policy ("evict_normal", "evict_first",
    "evict_last"): the L2 priority of the lines a TMA load brings (a cache policy on
    cp.async.bulk.tensor; other copies take no hint, and the lowering report says so)."""
    dst_ext, src_ext = _extents(dst), _extents(src)
    if dst_ext is None and src_ext is None and is_expr(src) and is_expr(dst):
        # Two element loads: a one-element copy.
        src_r = _region_of_load(src, None, "T.copy")
        dst_r = _region_of_load(dst, None, "T.copy")
    else:
        src_r = _as_region(src, dst_ext, "T.copy", "source")
        dst_r = _as_region(dst, [e for _, e in src_r.ranges], "T.copy", "destination")
    attrs = {**({"no_tma": "T.copy(..., disable_tma=True)"} if disable_tma else {}),
             **_eviction_attrs("T.copy", eviction_policy)}
    _emit("copy", [src_r, dst_r], (), attrs or None)


def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None, eviction_policy=None,
             annotations=None):
    """A TMA copy by hand (sm_90a), as upstream. A store (shared -> global): the first of the
    executing threads issues the boxes and commits them as one bulk group, left in flight;
    T.tma_store_wait() waits for them before the tile is written again. A load: the first of the executing threads (of the
    T.ws region, else of the block) adds the tile's bytes to `barrier`'s current phase
    (expect_tx, no arrival) and issues cp.async.bulk.tensor into the shared tile; the
    program arrives on the barrier (T.barrier_arrive) and waits for it
    (T.mbarrier_wait_parity / T.barrier_wait) before reading the tile. The tile is stored as
    TMA writes it (panels one swizzle wide). Where TMA cannot take the copy, compilation
    fails with the reason. cluster_mask (a cluster kernel): the block of the mask's lowest
    set bit multicasts the tile to every block of the mask, at the same shared offsets and
    completing on each block's own `barrier`; the others of the mask issue nothing; blocks
    outside the mask load their own tile. Every block still adds the bytes to its barrier.
    Each block must have initialised its barrier (T.alloc_cluster_barrier) and be done with
    the tile's earlier contents (T.cluster_sync) before the multicast is issued."""
    from .hopper import _barrier
    unsupported = _builder.error_cls("TileLangUnsupportedError")
    if isinstance(src, (Buffer, Region)) or (is_expr(src) and src.kind == "BufferLoad"):
        src_scope = (src if isinstance(src, Buffer) else src.buffer if isinstance(src, Region)
                     else Buffer(_C.load_parts(src)[0])).scope
        if src_scope in ("shared", "shared.dyn"):
            # A store: shared -> global, issued and committed, left in flight.
            if barrier is not None or cluster_mask is not None or eviction_policy is not None:
                raise _builder.error(TileLangTypeError,
                                     "T.tma_copy: a store takes no barrier, no cluster_mask and no eviction_policy",
                                     "wait for the store with T.tma_store_wait()")
            src_r = _as_region(src, _extents(dst), "T.tma_copy", "source")
            dst_r = _as_region(dst, [e for _, e in src_r.ranges], "T.tma_copy", "destination")
            if dst_r.buffer.scope != "global":
                raise _builder.error(unsupported, "T.tma_copy: a store from shared memory goes to a global tensor")
            _emit("copy", [src_r, dst_r], [], {"tma_store": 1, "by_hand": 1})
            return
    attrs = {"tma": 1, "by_hand": 1, **_eviction_attrs("T.tma_copy", eviction_policy)}
    if cluster_mask is not None:
        from .cluster import _cluster_mask
        attrs["cluster_mask"] = _cluster_mask("T.tma_copy", cluster_mask)
    if barrier is None:
        raise _builder.error(TileLangTypeError, "T.tma_copy: a load needs barrier= (from T.alloc_barrier)",
                             "pass the mbarrier the consumers wait on")
    dst_ext = _extents(dst)
    src_r = _as_region(src, dst_ext, "T.tma_copy", "source")
    dst_r = _as_region(dst, [e for _, e in src_r.ranges], "T.tma_copy", "destination")
    if src_r.buffer.scope != "global" or dst_r.buffer.scope not in ("shared", "shared.dyn"):
        raise _builder.error(unsupported, "T.tma_copy: only global -> shared loads are supported",
                             "store shared tiles with T.copy, which uses TMA stores on sm_90a")
    _emit("copy", [src_r, dst_r], [_barrier("tma_copy", barrier)], attrs)


def fill(buffer, value):
    """Every element of buffer (or region) set to value. On a reducer (T.alloc_reducer): the
    start of its epoch, value its logical starting value."""
    from .reducer import fill_reducer
    if fill_reducer(buffer, value):
        return
    _emit("fill", [_as_region(buffer, None, "T.fill", "destination")], [value])


def clear(buffer):
    """Every element set to zero."""
    fill(buffer, 0)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None):
    """C (+)= op(A) @ op(B), where op transposes when asked; accumulates in C's dtype."""
    regions = [_as_region(x, None, "T.gemm", role) for x, role in ((A, "A"), (B, "B"), (C, "C"))]
    attrs = {"transpose_A": int(bool(transpose_A)), "transpose_B": int(bool(transpose_B)),
             "clear_accum": int(bool(clear_accum)), "policy": int(policy), "k_pack": int(k_pack),
             "wg_wait": int(wg_wait)}
    _emit("gemm", regions, (), attrs)


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square, clear_accum=False):
    """T.gemm on Hopper's wgmma and nothing else, left in flight: no wait is emitted after
    it (pair it with T.wait_wgmma before C is read). Where wgmma cannot take the operands
    (target, tile, threads, dtypes), compilation fails with the reason instead of falling
    back to mma.sync."""
    regions = [_as_region(x, None, "T.wgmma_gemm", role) for x, role in ((A, "A"), (B, "B"), (C, "C"))]
    attrs = {"transpose_A": int(bool(transpose_A)), "transpose_B": int(bool(transpose_B)),
             "clear_accum": int(bool(clear_accum)), "policy": int(policy), "k_pack": 1,
             "wg_wait": -1, "require_wgmma": 1}
    _emit("gemm", regions, (), attrs)


def _dim(dim, rank, what, buf):
    """dim normalised to [0, rank); out of range is an error that quotes the dim given."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise _builder.error(TileLangTypeError, f"{what}: dim must be a Python int, got {dim!r}")
    if not -rank <= dim < rank:
        raise _builder.error(TileLangShapeError,
                             f"{what}: dim {dim} out of range for {buf.buffer.name} of rank {rank}",
                             f"dim must lie in [{-rank}, {rank}) (negative dims count from the end)")
    return dim + rank if dim < 0 else dim


_SHARED = ("shared", "shared.dyn")


def _staging_fragment(region, suffix):
    """A fragment with region's extents and dtype, for a reduction through shared memory."""
    from .alloc import _alloc
    buf = Buffer(_alloc([e for _, e in region.ranges], region.buffer.dtype, "local.fragment",
                        f"{region.buffer.name}_{suffix}").handle)
    return full_region(buf)


def _reduce(kind, buffer, out, dim, clear, batch=1):
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise _builder.error(TileLangTypeError, f"T.reduce_{kind}: batch must be a positive int, got {batch!r}")
    src = _as_region(buffer, None, f"T.reduce_{kind}", "source")
    dst = _as_region(out, None, f"T.reduce_{kind}", "destination")
    d = _dim(dim, len(src.ranges), f"T.reduce_{kind}", src)
    attrs = {"type": kind, "dim": int(d), "clear": int(bool(clear))}
    # As upstream's T.reduce_*: a shared-memory source is copied into a fragment first, and
    # a shared-memory destination receives the result through a fragment (holding its
    # current values first when clear=False). Every target then reduces fragment to fragment.
    src_shared, dst_shared = src.buffer.scope in _SHARED, dst.buffer.scope in _SHARED
    if src_shared and dst.buffer.scope not in _SHARED + ("local.fragment",):
        src_shared = False  # shared into a per-thread array or global tensor: as written
    if src_shared:
        staged = _staging_fragment(src, "frag")
        _emit("copy", [src, staged])
        src = staged
    if not dst_shared:
        _emit("reduce", [src, dst], (), attrs)
        return
    result = _staging_fragment(dst, "frag")
    if not clear:
        _emit("copy", [dst, result])
    _emit("reduce", [src, result], (), attrs)
    _emit("copy", [result, dst])


# batch (upstream: output elements per batched all-reduce, a schedule choice) leaves the
# result unchanged; every reduction here combines each output's partial results in turn.
def reduce_max(buffer, out, dim=-1, clear=True, batch=1):
    """out = the maximum of buffer along dim; with clear=False, combined with what out holds."""
    _reduce("max", buffer, out, dim, clear, batch)


def reduce_min(buffer, out, dim=-1, clear=True, batch=1):
    """out = the minimum of buffer along dim; with clear=False, combined with what out holds."""
    _reduce("min", buffer, out, dim, clear, batch)


def reduce_sum(buffer, out, dim=-1, clear=True, batch=1):
    """out = the sum of buffer along dim; with clear=False, added to what out holds."""
    _reduce("sum", buffer, out, dim, clear, batch)


def reduce_abssum(buffer, out, dim=-1, clear=True, batch=1):
    """out = the sum of `|buffer|` along dim; with clear=False, added to what out holds."""
    _reduce("abssum", buffer, out, dim, clear, batch)


def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1):
    """out = the maximum of `|buffer|` along dim; with clear=False, combined with what out holds."""
    _reduce("absmax", buffer, out, dim, clear, batch)


def reduce_bitand(buffer, out, dim=-1, clear=True, batch=1):
    """out = the bitwise and of an integer buffer along dim; with clear=False, and-ed with out."""
    _reduce("bitand", buffer, out, dim, clear, batch)


def reduce_bitor(buffer, out, dim=-1, clear=True, batch=1):
    """out = the bitwise or of an integer buffer along dim; with clear=False, or-ed with out."""
    _reduce("bitor", buffer, out, dim, clear, batch)


def reduce_bitxor(buffer, out, dim=-1, clear=True, batch=1):
    """out = the bitwise xor of an integer buffer along dim; with clear=False, xor-ed with out."""
    _reduce("bitxor", buffer, out, dim, clear, batch)


_REDUCE_TYPES = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")


def reduce(buffer, out, reduce_type, dim, clear, batch=1):
    """T.reduce_<reduce_type>(buffer, out, dim, clear): reduce_type one of "sum", "max",
    "min", "abssum", "absmax", "bitand", "bitor", "bitxor"."""
    if reduce_type not in _REDUCE_TYPES:
        raise _builder.error(TileLangTypeError, f"T.reduce: unknown reduce_type {reduce_type!r}",
                             "use one of " + ", ".join(repr(k) for k in _REDUCE_TYPES))
    _reduce(reduce_type, buffer, out, dim, clear, batch)


def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum along dim (in place when dst is omitted)."""
    _scan("cumsum", "sum", src, dst, dim, reverse)


def cummax(src, dst=None, dim=0, reverse=False):
    """Inclusive running maximum along dim (in place when dst is omitted); reverse runs it
    from the end."""
    _scan("cummax", "max", src, dst, dim, reverse)


def _scan(name, kind, src, dst, dim, reverse):
    s = _as_region(src, None, f"T.{name}", "source")
    d = s if dst is None else _as_region(dst, None, f"T.{name}", "destination")
    dim = _dim(dim, len(s.ranges), f"T.{name}", s)
    attrs = {"dim": int(dim), "reverse": int(bool(reverse))}
    if kind != "sum":
        attrs["kind"] = kind
    _emit("cumsum", [s, d], (), attrs)


# memory_order names as C++ and upstream TileLang number them. Every order but relaxed
# fences the atomic at device scope: release and acq_rel before it, acquire, consume and
# acq_rel after it, seq_cst on both sides by a sequentially consistent fence.
_MEMORY_ORDERS = {"relaxed": 0, "consume": 1, "acquire": 2, "release": 3, "acq_rel": 4, "seq_cst": 5}


def _memory_order(kind, memory_order, use_tma):
    if memory_order is None:
        return 0
    if memory_order not in _MEMORY_ORDERS:
        raise _builder.error(TileLangTypeError,
                             f"T.atomic_{kind}(..., memory_order={memory_order!r}): not a memory order",
                             "use one of " + ", ".join(repr(k) for k in _MEMORY_ORDERS))
    order = _MEMORY_ORDERS[memory_order]
    if order and use_tma:
        raise _builder.error(TileLangTypeError,
                             f"T.atomic_{kind}(..., use_tma=True, memory_order={memory_order!r}): a TMA reduction "
                             "is an asynchronous bulk operation with no memory order",
                             "drop memory_order, or order the reduction with T.fence_proxy_async() and a barrier")
    return order


def _atomic(kind, dst, value, return_prev=False, use_tma=False, memory_order=None):
    b = _builder.require(f"T.atomic_{kind}")
    order = _memory_order(kind, memory_order, use_tma)
    if is_expr(dst) and dst.kind == "BufferLoad" and not isinstance(value, (Buffer, Region)):
        if use_tma:
            raise _builder.error(TileLangTypeError,
                                 f"T.atomic_{kind}(..., use_tma=True) adds a shared tile into a region of a tensor, "
                                 "not one element",
                                 f"write T.atomic_{kind}(G[r0:r1, c0:c1], shared_tile, use_tma=True)")
        args = [dst, value] + ([_C.const(order, "int32")] if order else [])
        if return_prev:
            # An expression: the element's value before the update.
            return _C.call_typed(dst.dtype, f"atomic_{kind}", args)
        b.emit(_C.evaluate(_C.call_void(f"atomic_{kind}", args)))
        return None
    if return_prev:
        raise _builder.error(TileLangTypeError,
                             f"T.atomic_{kind}(..., return_prev=True) needs one element as the destination",
                             f"write pos = T.atomic_{kind}(buf[i], value, return_prev=True)")
    src_ext = _extents(value)
    d = _as_region(dst, src_ext, f"T.atomic_{kind}", "destination")
    s = _as_region(value, [e for _, e in d.ranges], f"T.atomic_{kind}", "value")
    attrs = {**({"use_tma": 1} if use_tma else {}), **({"memory_order": order} if order else {})}
    _emit(f"atomic_{kind}", [d, s], (), attrs or None)


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """dst += value atomically (an element, or element-wise over a region); with
    return_prev=True (one element), the value the element held before, as an expression.
    memory_order ("relaxed" (None), "consume", "acquire", "release", "acq_rel", "seq_cst"):
    the atomic's ordering at device scope, by fences around it on CUDA, HIP and the CPU
    (e.g. a block's partial results published before it counts itself done with "release",
    read by the last block after an "acq_rel" count); WGSL has no such fence and rejects it.
    use_tma=True (sm_90a): a shared tile added into a global region by one TMA reduction
    (cp.reduce.async.bulk.tensor .add, float16 / bfloat16 / float32) instead of an atomic
    per element; where TMA cannot take it the lowering report says why."""
    return _atomic("add", dst, value, return_prev, use_tma, memory_order)


def _atomic_add_lanes(lanes, dst, value, return_prev):
    """dst[..., j + k] += value[..., i + k] for k < lanes, each element atomically: one vector
    atomic on CUDA where the type and the address allow it (float16 / bfloat16 pairs, float32
    pairs and quads on sm_90), else an atomic per element."""
    name = f"T.atomic_addx{lanes}"
    b = _builder.require(name)
    if return_prev:
        raise _builder.error(TileLangTypeError, f"{name}(..., return_prev=True): a vector atomic returns nothing",
                             "use T.atomic_add(element, value, return_prev=True) per element")
    parts = []
    for role, x in (("destination", dst), ("value", value)):
        if not (is_expr(x) and x.kind == "BufferLoad"):
            raise _builder.error(TileLangTypeError,
                                 f"{name}: the {role} must be one buffer element, the first of {lanes} consecutive "
                                 f"ones, got {type(x).__name__ if not is_expr(x) else x.kind}",
                                 f"write {name}(dst[i, 4 * j], src[i, 4 * j])")
        parts.append(_C.load_parts(x))
    (dh, di), (vh, vi) = parts
    if not di or not vi:
        raise _builder.error(TileLangTypeError, f"{name}: the destination and the value must be buffer elements")
    lane = _C.var("lane", "int32")
    target = _C.load(dh, list(di[:-1]) + [di[-1] + lane])
    source = _C.load(vh, list(vi[:-1]) + [vi[-1] + lane])
    if source.dtype != target.dtype:
        source = _C.cast(target.dtype, source)
    b.emit(_C.for_(lane, 0, lanes, "vectorized", _C.evaluate(_C.call_void("atomic_add", [target, source])), {}))


def atomic_addx2(dst, value, return_prev=False):
    """Two consecutive elements: dst[..., j : j + 2] += value[..., i : i + 2], each element
    atomically (upstream's T.atomic_addx2; one 32- or 64-bit vector atomic on CUDA)."""
    _atomic_add_lanes(2, dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """Four consecutive elements, as T.atomic_addx2 (one 128-bit float32 atomic on sm_90)."""
    _atomic_add_lanes(4, dst, value, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False):
    """dst = max(dst, value) atomically (an element, or element-wise over a region);
    memory_order as for T.atomic_add."""
    return _atomic("max", dst, value, return_prev, memory_order=memory_order)


def atomic_min(dst, value, memory_order=None, return_prev=False):
    """dst = min(dst, value) atomically (an element, or element-wise over a region);
    memory_order as for T.atomic_add."""
    return _atomic("min", dst, value, return_prev, memory_order=memory_order)


def transpose(src, dst):
    """dst[j, i] = src[i, j] for 2-D tiles src (M, N) and dst (N, M) (shared tiles, or any
    buffers), as one T.Parallel loop of the block's threads."""
    b = _builder.require("T.transpose")
    s = _as_region(src, None, "T.transpose", "source")
    d = _as_region(dst, None, "T.transpose", "destination")
    se, de = [e for _, e in s.ranges], [e for _, e in d.ranges]
    if len(se) != 2 or len(de) != 2:
        raise _builder.error(TileLangShapeError,
                             f"T.transpose takes 2-D tiles, got extents {se} and {de}")
    if any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in ((se[0], de[1]), (se[1], de[0]))):
        raise _builder.error(TileLangShapeError,
                             f"T.transpose: the destination must be {se[1]} x {se[0]} for a {se[0]} x {se[1]} source, "
                             f"got {de[0]} x {de[1]}")
    i, j = _C.var("i", "int32"), _C.var("j", "int32")
    (s0, _), (s1, _) = s.ranges
    (d0, _), (d1, _) = d.ranges
    value = s.buffer[s0 + i, s1 + j]
    store = _C.store(d.buffer.handle, value, [d0 + j, d1 + i])
    b.emit(_C.for_(i, 0, se[0], "parallel", _C.for_(j, 0, se[1], "parallel", store, {}), {}))


def atomic_or(dst, value, memory_order=None):
    """dst = dst or value (bitwise) atomically, dst one element of an integer buffer;
    memory_order as for T.atomic_add."""
    if not (is_expr(dst) and dst.kind == "BufferLoad"):
        raise _builder.error(TileLangTypeError, "T.atomic_or updates one element", "write T.atomic_or(flags[i], bits)")
    if not (dst.dtype.startswith("int") or dst.dtype.startswith("uint")):
        raise _builder.error(TileLangTypeError, f"T.atomic_or needs an integer element, got {dst.dtype}")
    return _atomic("or", dst, value, memory_order=memory_order)


def _element(name, x, what):
    if not (is_expr(x) and x.kind == "BufferLoad"):
        raise _builder.error(TileLangTypeError, f"{name}: the {what} must be one buffer element",
                             f"write {name}(flag[0]{', value' if name == 'T.atomic_store' else ''})")
    return x


def _ordered(name, memory_order, allowed):
    if memory_order not in allowed:
        raise _builder.error(TileLangTypeError, f"{name}(..., memory_order={memory_order!r}): not an order of {name}",
                             "use one of " + ", ".join(repr(k) for k in allowed))
    return _C.const(_MEMORY_ORDERS[memory_order], "int32")


def atomic_load(src, memory_order="seq_cst"):
    """The value of one element, read as an atomic load with memory_order ("relaxed",
    "consume", "acquire" or "seq_cst") at device scope: e.g. a flag read with "acquire"
    before the data it guards."""
    _builder.require("T.atomic_load")
    src = _element("T.atomic_load", src, "source")
    order = _ordered("T.atomic_load", memory_order, ("relaxed", "consume", "acquire", "seq_cst"))
    return _C.call_typed(src.dtype, "atomic_load", [src, order])


def atomic_store(dst, src, memory_order="seq_cst"):
    """Writes src into one element as an atomic store with memory_order ("relaxed",
    "release" or "seq_cst") at device scope: e.g. a flag set with "release" after the data
    it publishes."""
    b = _builder.require("T.atomic_store")
    dst = _element("T.atomic_store", dst, "destination")
    order = _ordered("T.atomic_store", memory_order, ("relaxed", "release", "seq_cst"))
    b.emit(_C.evaluate(_C.call_void("atomic_store", [dst, _C.cast(dst.dtype, src) if is_expr(src) else
                                                    _C.const(src, dst.dtype), order])))


def print(obj, msg="", warp_group_id=0, warp_id=0):  # noqa: A001 - the DSL's name
    """Prints a scalar or every element of a buffer, prefixed by msg."""
    b = _builder.require("T.print")
    if isinstance(obj, (Buffer, Region)):
        _emit("print", [_as_region(obj, None, "T.print", "buffer")], (), {"msg": str(msg)})
    else:
        pieces = [_C.string(f"{msg} ")] if msg else []
        b.emit(_C.evaluate(_C.call_void("print", pieces + [obj])))


def annotate_layout(layouts):
    """T.annotate_layout({buffer: layout}): how to store buffers.

    - tilelang.layout.make_swizzled_layout(buf): a shared tile stored swizzled in 16-byte chunks.
    - T.Layout(buf.shape, fn), fn(i, j, ...) giving a position: any buffer but a fragment (a global tensor, a
      shared tile, a local array) stored with element idx at `position` (one index or a list,
      flattened row-major over the positions' extents), e.g. FlashAttention backward's dQ laid
      out so that a warp's atomic adds land in one 128-byte line. Every access to the buffer
      goes through the map; the storage must hold every position the map reaches.
    - T.Fragment(buf.shape, forward_thread_fn=..., forward_index_fn=..., replicate=...): a fragment's
      thread mapping (which thread holds each element, at which slot), taken as given by layout
      inference; it must split the indices into thread and slot digits (every layout the compiler
      chooses does), and an instruction needing another mapping is a layout conflict."""
    from ..layout import Fragment, Layout, SwizzledLayout
    from ..errors import TileLangTypeError, TileLangUnsupportedError
    if not isinstance(layouts, dict):
        raise _builder.error(TileLangTypeError, "T.annotate_layout takes a dict {buffer: layout}",
                             "write T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})")
    for buf, layout in layouts.items():
        if not isinstance(buf, Buffer):
            raise _builder.error(TileLangTypeError, f"T.annotate_layout: the key {buf!r} is not a buffer",
                                 "use the buffer T.alloc_shared returned as the key")
        if isinstance(layout, SwizzledLayout):
            _emit("annotate_layout", [full_region(buf)], (), {"layout": "swizzled"})
        elif isinstance(layout, Layout):
            _annotate_user_layout(buf, layout)
        elif isinstance(layout, Fragment):
            _annotate_fragment(buf, layout)
        else:
            raise _builder.error(TileLangTypeError,
                                 f"T.annotate_layout: the layout for '{buf.name}' is a {type(layout).__name__}, "
                                 "not a layout",
                                 "give T.Layout(shape, fn) or tilelang.layout.make_swizzled_layout(buffer)")


def _annotate_fragment(buf, fragment):
    """A T.Fragment by hand: which thread holds each element of a fragment, and where. It
    must be a split of the indices into thread and slot digits (what every layout the
    compiler chooses is); layout inference takes it as given, so an instruction that needs
    another layout for the buffer is a layout conflict naming both lines."""
    from ..errors import TileLangLayoutError, TileLangShapeError
    from ..layout.maps import fragment_digits
    name = buf.name
    if buf.scope == "local" and fragment.get_input_shape() == list(buf.shape) and \
            fragment.local_size() == fragment.slots_of().size and \
            len(set(fragment.slots_of().reshape(-1).tolist())) == fragment.local_size():
        # A local array already holds every element in each thread at its own slot: a
        # fragment that keeps one slot per element (upstream's `lambda i: i` on a [1] array)
        # describes the same storage, so there is nothing to record.
        return
    if buf.scope != "local.fragment":
        raise _builder.error(TileLangLayoutError,
                             f"T.annotate_layout: '{name}' is in scope '{buf.scope}'; a T.Fragment is for fragments",
                             "annotate a buffer from T.alloc_fragment, or give a T.Layout")
    shape = list(buf.shape)
    if fragment.get_input_shape() != shape:
        raise _builder.error(TileLangShapeError,
                             f"T.annotate_layout: the T.Fragment's shape {fragment.get_input_shape()} is not the "
                             f"shape of '{name}' {shape}",
                             f"build it as T.Fragment({name}.shape, ...)")
    try:
        digits = fragment_digits(fragment)
    except ValueError as e:
        raise _builder.error(TileLangLayoutError,
                             f"T.annotate_layout: the T.Fragment for '{name}' is not a split of its indices over "
                             f"threads and slots: {e}",
                             "write the thread and the slot as sums of index digits times strides, e.g. "
                             "thread = (i % 8) * 4 + j // 2, slot = (i // 8) * 2 + j % 2") from None
    _emit("annotate_layout", [full_region(buf)], (), {"layout": "fragment", "digits": digits})


def _annotate_user_layout(buf, layout):
    """A T.Layout by hand: the map applied to placeholder indices, emitted as the placeholders
    followed by the positions (op/annotate_layout.cc checks and records them)."""
    from ..errors import TileLangShapeError, TileLangTypeError, TileLangUnsupportedError
    name = buf.name
    if buf.scope in ("local.fragment", "local.var"):
        what = "a fragment" if buf.scope == "local.fragment" else "a scalar variable"
        raise _builder.error(TileLangUnsupportedError,
                             f"T.annotate_layout: '{name}' is {what}; a T.Layout is for global, shared or "
                             "local buffers",
                             "drop the annotation: layout inference chooses every fragment's thread mapping")
    shape = list(buf.handle.shape)
    given = layout.shape
    if len(given) != len(shape) or not all(_C.prove_equal(_C.const(g, "int64") if isinstance(g, int) else g, s)
                                           for g, s in zip(given, shape)):
        raise _builder.error(TileLangShapeError,
                             f"T.annotate_layout: the layout's shape {list(given)} is not the shape of "
                             f"'{name}' {list(buf.shape)}",
                             f"build it as T.Layout({name}.shape, fn)")
    wide = any(is_expr(s) and s.dtype == "int64" for s in shape)
    index_dtype = "int64" if wide else "int32"
    placeholders = [_C.var(f"{name}_i{k}", index_dtype) for k in range(len(shape))]
    try:
        positions = layout.forward_index_exprs(placeholders)
    except Exception as e:  # the user's function, run on kernel expressions
        raise _builder.error(TileLangTypeError,
                             f"T.annotate_layout: the layout function of '{name}' failed on index expressions: "
                             f"{type(e).__name__}: {e}",
                             "write it with +, -, *, // and % on its arguments (they are kernel expressions, "
                             "not Python ints)") from e
    exprs = []
    for k, p in enumerate(positions):
        if isinstance(p, bool) or not (isinstance(p, int) or (is_expr(p) and "int" in p.dtype)):
            raise _builder.error(TileLangTypeError,
                                 f"T.annotate_layout: position {k} of the layout of '{name}' is {p!r}, not an "
                                 "integer expression",
                                 "the function returns integer indices: an int or a list of them")
        exprs.append(_C.const(p, index_dtype) if isinstance(p, int) else p)
    if not exprs:
        raise _builder.error(TileLangShapeError, f"T.annotate_layout: the layout of '{name}' gives no position",
                             "return at least one index")
    _emit("annotate_layout", [full_region(buf)], placeholders + exprs, {"layout": "user", "rank": len(shape)})
