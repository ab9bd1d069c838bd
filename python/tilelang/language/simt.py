"""Thread-level intrinsics of upstream's SIMT programs (TVM style): T.dp4a, and TVM's
thread all-reduce as they write it:

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, result[0], tk, dtype="handle"))

Every thread of the block calls it with its own value; each gets, in `result`, the
combination of the values of the threads that differ from it only along the thread axes
named (tk above: the threads of one row). A group along consecutive thread axes whose
extents are powers of two combines by butterfly shuffles inside each warp and then across
warps in shared memory (how many levels run is decided for the target when the kernel is
lowered); other groups meet in shared memory alone (each thread stores its value; after a
barrier each combines its group's values in one order, so all members get the same
result), with a TileLangPerformanceWarning. The call is expanded where it stands, in the
kernel's thread-level code, so every thread of the block must reach it."""
import math
import warnings

from .. import _C
from ..errors import TileLangPerformanceWarning, TileLangTypeError, TileLangUnsupportedError
from ..ir import is_expr
from ..parser import builder as _builder


class CommReducer:
    """What T.comm_reducer makes: a combiner of two values and its identity."""

    def __init__(self, combiner, identity):
        if not callable(combiner):
            raise TypeError(f"T.comm_reducer: the combiner must be a function of two values, got {combiner!r}")
        identity = list(identity) if isinstance(identity, (list, tuple)) else [identity]
        if len(identity) != 1:
            raise TypeError(f"T.comm_reducer: one identity value is supported, got {len(identity)}")
        self.combiner, self.identity = combiner, identity[0]


def comm_reducer(combiner, identity):
    """A commutative reducer (TVM's tir.comm_reducer) for T.attr(..., "reduce_scope", ...)."""
    return CommReducer(combiner, identity)


def _python_int(x, what):
    if is_expr(x) and x.kind == "IntImm":
        return int(x.value)
    if isinstance(x, bool) or not isinstance(x, int):
        raise _builder.error(TileLangTypeError, f"T.tvm_thread_allreduce: {what} must be a constant, got {x!r}")
    return x


def _axis_of(b, thread):
    """The thread axis (0, 1, 2) a name stands for: T.get_thread_binding(d), a
    T.thread_binding loop over threadIdx.*, or a name given to one of them."""
    candidates = [thread]
    for var, value in b.let_values:
        if is_expr(thread) and var.same_as(thread):
            candidates.append(value)
    thread_vars = b.kernels[-1][0]
    for c in candidates:
        if not is_expr(c):
            continue
        for d in range(3):
            if c.structural_equal(_C.call("thread_index", [d])) or (d < len(thread_vars) and c.same_as(thread_vars[d])):
                return d
    raise _builder.error(TileLangTypeError,
                         f"T.tvm_thread_allreduce: {thread!r} is not a thread index of the kernel",
                         "name the reduced threads by T.get_thread_binding(d) or a T.thread_binding loop variable")


def tvm_thread_allreduce(*args, dtype="handle"):
    """TVM's thread all-reduce: ``T.tvm_thread_allreduce(T.uint32(1), value, True,
    result[0], *thread_names, dtype="handle")`` inside a ``reduce_scope``; every thread gets
    in ``result`` the combination of the values of the threads that differ from it only
    along the named thread axes."""
    b = _builder.require("T.tvm_thread_allreduce")
    reducers = getattr(b, "reducers", None)
    if not reducers:
        raise _builder.error(TileLangTypeError, "T.tvm_thread_allreduce is used outside a reduce scope",
                             "wrap it in `with T.attr(T.comm_reducer(f, [identity]), \"reduce_scope\", ...):`")
    if not b.kernels:
        raise _builder.error(TileLangTypeError, "T.tvm_thread_allreduce is used outside a T.Kernel block")
    reducer = reducers[-1]
    if len(args) < 5:
        raise _builder.error(TileLangTypeError, "T.tvm_thread_allreduce takes (size, value, condition, result, "
                             f"thread...), got {len(args)} arguments")
    if _python_int(args[0], "the number of values") != 1:
        raise _builder.error(TileLangUnsupportedError, "T.tvm_thread_allreduce: one value at a time is supported",
                             "reduce each value in its own call")
    value, cond, result, threads = args[1], args[2], args[3], args[4:]
    if not (cond is True or (is_expr(cond) and cond.kind == "IntImm" and int(cond.value) == 1)):
        raise _builder.error(TileLangUnsupportedError, "T.tvm_thread_allreduce: the condition must be True",
                             "give every thread a value (the reducer's identity where it has none)")
    if not (is_expr(result) and result.kind == "BufferLoad"):
        raise _builder.error(TileLangTypeError, "T.tvm_thread_allreduce: the result must be a buffer element "
                             "(result[0])")
    extents = [int(e) for e in b.kernels[-1][1]]
    axes = sorted({_axis_of(b, t) for t in threads})
    strides = [math.prod(extents[:d]) for d in range(len(extents))]
    value = _C.cast(result.dtype, value) if is_expr(value) and value.dtype != result.dtype else value
    combine = reducer.combiner
    handle, indices = _C.load_parts(result)
    from .alloc import _alloc
    n = math.prod(extents)
    tid = [_C.call("thread_index", [d]) for d in range(len(extents))]
    lin = tid[0]
    for d in range(1, len(tid)):
        lin = lin + tid[d] * strides[d]
    base = lin  # the group's first thread
    for d in axes:
        base = base - tid[d] * strides[d]
    members = math.prod(extents[d] for d in axes)
    identity = reducer.identity if is_expr(reducer.identity) else _C.const(reducer.identity, result.dtype)
    acc = _alloc((1,), result.dtype, "local", "allreduce_acc")
    b.emit(_C.store(acc.handle, value, [0]))
    power_of_two = lambda v: v & (v - 1) == 0  # noqa: E731
    # Consecutive thread axes (e.g. x and y) whose extents are powers of two are one axis of
    # their product's extent for the group's lanes.
    consecutive = axes == list(range(axes[0], axes[-1] + 1))
    if consecutive and all(power_of_two(extents[d]) for d in axes) and power_of_two(strides[axes[0]]):
        # 2^a threads, 2^b apart in the flat index: the members whose flat indices lie in one
        # warp combine by butterfly shuffles (lane masks m * stride), every member ending with
        # the same value; the warps (or, where the target has no shuffles, the threads) the
        # group spans then meet in shared memory. The width W of a shuffle is the target's
        # (`shuffle_width`, a constant once the target is known), so which levels run is
        # decided there.
        e, s = members, strides[axes[0]]
        width = _C.call_typed("int32", "shuffle_width", [])
        m = e // 2
        while m >= 1:
            step = _C.store(acc.handle, combine(acc[0], _C.call_typed(result.dtype, "shfl_xor", [acc[0], m * s, width])),
                            [0])
            b.emit(_C.if_(m * s < width, step, None))
            m //= 2
        per_warp = (width + (s - 1)) // s  # members in one warp: W / s, at least 1 (both powers of two)
        red = _alloc((n,), result.dtype, "shared.dyn", "allreduce_shared")
        total = _alloc((1,), result.dtype, "local", "allreduce_total")
        r = _C.var("r", "int32")
        across = [_C.store(red.handle, acc[0], [lin]),
                  _C.store(total.handle, identity, [0]),
                  _C.for_(r, 0, e // per_warp, "serial",
                          _C.store(total.handle, combine(total[0], red[base + r * per_warp * s]), [0]), {}),
                  _C.store(acc.handle, total[0], [0])]
        b.emit(_C.if_(e * s > width, _C.seq(across), None))
    else:
        # Several axes, or extents that are not powers of two: the group meets in shared memory.
        warnings.warn(f"{b.file}:{b.line}: T.tvm_thread_allreduce over {len(axes)} thread axes of "
                      f"{[extents[d] for d in axes]} threads goes through shared memory (a store, a barrier, a "
                      "serial combination per thread) [slower path: warp shuffles need consecutive thread axes "
                      "whose extents are powers of two]", TileLangPerformanceWarning, stacklevel=2)
        red = _alloc((n,), result.dtype, "shared.dyn", "allreduce_shared")
        b.emit(_C.store(red.handle, acc[0], [lin]))
        j = _C.var("j", "int32")
        offset, rest = 0, j
        for d in axes:
            offset = offset + (rest % extents[d]) * strides[d]
            rest = rest // extents[d]
        b.emit(_C.store(acc.handle, identity, [0]))
        b.emit(_C.for_(j, 0, members, "serial", _C.store(acc.handle, combine(acc[0], red[base + offset]), [0]), {}))
    b.emit(_C.store(handle, acc[0], list(indices)))
    return None


def _warp_shuffle(kind, value, lane, width, name):
    _builder.require(f"T.{name}")
    if not is_expr(value):
        raise _builder.error(TileLangTypeError, f"T.{name}: the value must be a typed expression (a buffer element or "
                             f"a computed value), got {value!r}")
    w = int(width.value) if is_expr(width) and width.kind == "IntImm" else width
    if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 64 or w & (w - 1):
        raise _builder.error(TileLangTypeError, f"T.{name}: the width must be a constant power of two up to the "
                             f"warp's size, got {width!r}")
    return _C.call_typed(value.dtype, f"warp_shfl{kind}", [value, lane, w])


def _full_mask(mask, name):
    if not (isinstance(mask, int) or (is_expr(mask) and mask.kind == "IntImm")) or \
            (int(mask if isinstance(mask, int) else mask.value) & 0xFFFFFFFF) != 0xFFFFFFFF:
        raise _builder.error(TileLangUnsupportedError, f"T.{name}: only the whole warp's mask 0xffffffff is supported, "
                             f"got {mask!r}", "let every lane of the warp take part")


def shfl_xor(value, delta, width=32, mask=0xFFFFFFFF):
    """The value of the lane whose index is this lane's xor `delta` (within groups of
    `width` lanes), the whole warp taking part (CUDA's __shfl_xor_sync with the full mask;
    HIP's __shfl_xor)."""
    _full_mask(mask, "shfl_xor")
    return _warp_shuffle("_xor", value, delta, width, "shfl_xor")


def shfl_down(value, delta, width=32, mask=0xFFFFFFFF):
    """The value of the lane `delta` above this one; the top lanes keep their own."""
    _full_mask(mask, "shfl_down")
    return _warp_shuffle("_down", value, delta, width, "shfl_down")


def shfl_up(value, delta, width=32, mask=0xFFFFFFFF):
    """The value of the lane `delta` below this one; the bottom lanes keep their own."""
    _full_mask(mask, "shfl_up")
    return _warp_shuffle("_up", value, delta, width, "shfl_up")


def shfl_sync(value, srcLane, width=32, mask=0xFFFFFFFF):  # noqa: N803 - upstream's argument name
    """The value of lane `srcLane` (within groups of `width` lanes, default the warp), as
    upstream orders the arguments: value first, the lane mask last."""
    _full_mask(mask, "shfl_sync")
    return _warp_shuffle("", value, srcLane, width, "shfl_sync")


def tvm_warp_shuffle(mask, value, warp_id, width, warp_size):
    """TVM's warp shuffle: the value of lane `warp_id` within groups of `width` lanes."""
    _full_mask(mask, "tvm_warp_shuffle")
    return _warp_shuffle("", value, warp_id, width, "tvm_warp_shuffle")


def tvm_warp_shuffle_down(mask, value, offset, width, warp_size):
    """TVM's shuffle down: the value of the lane `offset` above, within groups of `width`."""
    _full_mask(mask, "tvm_warp_shuffle_down")
    return _warp_shuffle("_down", value, offset, width, "tvm_warp_shuffle_down")


def tvm_warp_shuffle_up(mask, value, offset, width, warp_size):
    """TVM's shuffle up: the value of the lane `offset` below, within groups of `width`."""
    _full_mask(mask, "tvm_warp_shuffle_up")
    return _warp_shuffle("_up", value, offset, width, "tvm_warp_shuffle_up")


def dp4a(A, B, C):
    """``C += A[0:4] . B[0:4]``: the four 8-bit integers from element A on, times those from
    element B on, summed into the 32-bit integer element C (upstream's T.dp4a, as its
    int8 GEMV writes it: ``T.dp4a(A_local[k * 4], B_local[k * 4], acc[0])``). Expanded into
    four multiply-adds on every target (a TileLangPerformanceWarning: not one dp4a
    instruction)."""
    b = _builder.require("T.dp4a")
    parts = []
    for name, x in (("A", A), ("B", B), ("C", C)):
        if not (is_expr(x) and x.kind == "BufferLoad"):
            raise _builder.error(TileLangTypeError, f"T.dp4a: {name} must be a buffer element (buf[i])")
        parts.append(_C.load_parts(x))
    for name, x in (("A", A), ("B", B)):
        if x.dtype not in ("int8", "uint8"):
            raise _builder.error(TileLangTypeError, f"T.dp4a: {name} must be int8 or uint8, got {x.dtype}")
    if C.dtype != "int32":
        raise _builder.error(TileLangTypeError, f"T.dp4a: C must be int32, got {C.dtype}")
    warnings.warn(f"{b.file}:{b.line}: T.dp4a runs as four multiply-adds [slower path: not one dp4a "
                  "instruction]", TileLangPerformanceWarning, stacklevel=2)
    from ..ir import Buffer
    (ha, ia), (hb, ib), (hc, ic) = parts
    a_buf, b_buf, c_buf = Buffer(ha), Buffer(hb), Buffer(hc)
    total = c_buf[tuple(ic)] if len(ic) > 1 else c_buf[ic[0]]
    for k in range(4):
        ea = list(ia[:-1]) + [ia[-1] + k]
        eb = list(ib[:-1]) + [ib[-1] + k]
        va = a_buf[tuple(ea)] if len(ea) > 1 else a_buf[ea[0]]
        vb = b_buf[tuple(eb)] if len(eb) > 1 else b_buf[eb[0]]
        total = total + _C.cast("int32", va) * _C.cast("int32", vb)
    b.emit(_C.store(hc, total, list(ic)))
