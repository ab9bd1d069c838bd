"""Reducers: a reduction whose contributions come from anywhere in T.Parallel loops, combined
once at the end (upstream's T.alloc_reducer epoch)::

    acc = T.alloc_reducer((M,), "float32", op="sum")
    T.reducer_init(acc)                       # or T.reducer_init(acc, start)
    for i, j in T.Parallel(M, N):
        T.reducer_update(acc[i], A_f[i, j])   # each logical iteration counts once
    out = T.alloc_fragment((M,), "float32")
    T.finalize_reducer(acc, out)

A reducer is a per-thread array of partials: each thread folds in the iterations it runs
(an iteration that a replicated layout gives to several threads counts once), and
T.finalize_reducer combines the block's partials for every element, plus the starting
value, into a fragment. The starting value is logical: it is combined once per element at
the end, never once per thread. Upstream's older form works too: T.clear / T.fill on the
reducer (the fill value is the starting value), `acc[i] += v` or `acc[i] = T.max(acc[i], v)`
in the loops, then T.finalize_reducer(acc) in place, after which every thread reads every
total from acc.
"""
from __future__ import annotations

from .. import _C
from ..dtypes import canonical
from ..errors import TileLangTypeError
from ..ir import Buffer, is_expr
from ..parser import builder as _builder

OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")


class ReducerInfo:
    __slots__ = ("op", "dtype", "init")

    def __init__(self, op, dtype):
        self.op, self.dtype, self.init = op, dtype, None


def _registry(b):
    if not hasattr(b, "reducer_buffers"):
        b.reducer_buffers = []  # (Buffer, ReducerInfo) of the T.alloc_reducer buffers
    return b.reducer_buffers


def info_of(buffer) -> ReducerInfo | None:
    """The reducer behind a buffer of the kernel being parsed (None for another buffer)."""
    b = _builder.current()
    if b is None or not isinstance(buffer, Buffer):
        return None
    for buf, info in _registry(b):
        if buf == buffer:
            return info
    return None


def _require(name, reducer) -> ReducerInfo:
    info = info_of(reducer)
    if info is None:
        raise _builder.error(TileLangTypeError, f"T.{name}: {reducer!r} is not a reducer",
                             "allocate it with T.alloc_reducer(shape, dtype, op)")
    return info


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A reducer of `shape` combining by `op` ("sum", "max", "min", "bitand", "bitor",
    "bitxor"; the bitwise ones on integers). replication ("all" / "none") names upstream's
    older physical forms; both are this one here."""
    from .alloc import _alloc
    b = _builder.require("T.alloc_reducer")
    if op not in OPS:
        raise _builder.error(TileLangTypeError, f"T.alloc_reducer: unknown op {op!r}",
                             "use one of " + ", ".join(repr(o) for o in OPS))
    dt = canonical(dtype)
    if op in _BITWISE and not (dt.startswith("int") or dt.startswith("uint") or dt == "bool"):
        raise _builder.error(TileLangTypeError, f"T.alloc_reducer: op {op!r} needs an integer dtype, got {dt}")
    if replication not in (None, "all", "none"):
        raise _builder.error(TileLangTypeError, f"T.alloc_reducer: replication must be 'all' or 'none', got "
                             f"{replication!r}")
    buf = _alloc(shape, dt, "local", "reducer")
    _registry(b).append((buf, ReducerInfo(op, dt)))
    return buf


def _identity(op, dtype):
    if op in ("sum", "bitor", "bitxor"):
        return _C.const(0, dtype)
    if op == "bitand":
        return _C.cast(dtype, _C.const(-1, "int32"))
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        return -_C.infinity(dtype) if op == "max" else _C.infinity(dtype)
    return _C.min_value(dtype) if op == "max" else _C.max_value(dtype)


def combine(op, acc, value):
    """acc combined with value by the reducer's op."""
    if op == "sum":
        return acc + value
    if op in ("max", "min"):
        return _C.binary(op, acc, value)
    return _C.binary({"bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor"}[op], acc, value)


def reducer_init(reducer, init=None):
    """Opens the reducer's epoch: every partial at the op's identity; `init`, when given, is
    the logical starting value (combined once per element by T.finalize_reducer, taken as it
    is here)."""
    from .alloc import alloc_var
    info = _require("reducer_init", reducer)
    b = _builder.require("T.reducer_init")
    shape = [int(s.value) if is_expr(s) else int(s) for s in reducer.handle.shape]
    idx = [_C.var(f"ri{d}", "int32") for d in range(len(shape))]
    stmt = _C.store(reducer.handle, _identity(info.op, info.dtype), idx)
    for d in reversed(range(len(shape))):
        stmt = _C.for_(idx[d], 0, shape[d], "serial", stmt, {})
    b.emit(stmt)
    if init is None:
        info.init = None
        return None
    info.init = alloc_var(info.dtype)
    b.emit(_C.store(info.init.handle, init if is_expr(init) else _C.const(init, info.dtype), [0]))
    return None


def update(reducer, indices, new_value):
    """Emits `reducer[indices] = new_value` as a contribution (counted once per logical
    iteration of the T.Parallel loop around it)."""
    b = _builder.require("T.reducer_update")
    target = reducer[tuple(indices)] if len(indices) != 1 else reducer[indices[0]]
    b.emit(_C.evaluate(_C.call_void("reducer_update", [target, new_value])))


def reducer_update(target, value):
    """Contributes `value` to the element `target` (written `acc[i, ...]`) of a reducer."""
    if not (is_expr(target) and target.kind == "BufferLoad"):
        raise _builder.error(TileLangTypeError, "T.reducer_update: the first argument must be a reducer's element "
                             f"(acc[i]), got {target!r}")
    handle, indices = _C.load_parts(target)
    reducer = Buffer(handle)
    info = _require("reducer_update", reducer)
    v = value if is_expr(value) else _C.const(value, info.dtype)
    if v.dtype != info.dtype:
        v = _C.cast(info.dtype, v)
    update(reducer, list(indices), combine(info.op, target, v))


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """Closes the epoch: dst (a fragment of the reducer's shape and dtype) = the combination of
    every thread's partials and the starting value; without dst the totals go back into the
    reducer, every thread holding all of them (upstream's older in-place form). batch: how
    many elements share a pair of barriers upstream; here all of them always do."""
    info = _require("finalize_reducer", reducer)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise _builder.error(TileLangTypeError, f"T.finalize_reducer: batch must be a positive int, got {batch!r}")
    from .tile_ops import _as_region, _emit
    regions = [_as_region(reducer, None, "T.finalize_reducer", "reducer"),
               _as_region(reducer if dst is None else dst, None, "T.finalize_reducer", "destination")]
    if info.init is not None:
        regions.append(_as_region(info.init, None, "T.finalize_reducer", "starting value"))
    _emit("finalize_reducer", regions, (), {"type": info.op})


def fill_reducer(reducer, value) -> bool:
    """T.fill / T.clear on a reducer: the older form's start of an epoch (the value is its
    logical starting value). False for another buffer."""
    info = info_of(reducer)
    if info is None:
        return False
    identity_sum_zero = info.op == "sum" and not is_expr(value) and value == 0
    reducer_init(reducer, None if identity_sum_zero else value)
    return True


__all__ = ["alloc_reducer", "reducer_init", "reducer_update", "finalize_reducer"]
