"""Loop constructors: the parser turns `for ... in T.Parallel(...)` etc. into IR loops."""
from __future__ import annotations


class LoopSpec:
    """What a `for` statement iterates over when it is a kernel loop."""

    def __init__(self, kind: str, ranges, attrs=None, strides=None):
        self.kind = kind          # "serial", "parallel", "unroll", "vectorized", "pipelined"
        self.ranges = ranges      # [(min, extent)], one per loop variable
        self.attrs = attrs or {}
        # [(start, step)] or None per variable: the loop counts k over [0, extent) and the
        # variable is start + k * step (T.serial / T.unroll with a step).
        self.strides = strides or [None] * len(ranges)


def _range(args, name):
    if len(args) == 1:
        return (0, args[0])
    if len(args) == 2:
        return (args[0], args[1] - args[0])
    if len(args) == 3 and (args[2] == 1 if isinstance(args[2], int) else False):
        return (args[0], args[1] - args[0])
    raise TypeError(f"{name} takes (stop) or (start, stop)")


def _stepped(kind, args, name, attrs=None):
    """T.serial / T.unroll over (stop), (start, stop) or (start, stop, step), step a non-zero
    Python int: as Python's range, k = 0, 1, ... with the variable start + k * step."""
    if len(args) != 3 or (isinstance(args[2], int) and not isinstance(args[2], bool) and args[2] == 1):
        return LoopSpec(kind, [_range(args[:2] if len(args) == 3 else args, name)], attrs)
    start, stop, step = args
    if isinstance(step, bool) or not isinstance(step, int) or step == 0:
        raise TypeError(f"{name}: the step must be a non-zero Python int, got {step!r}")
    count = (stop - start + step - 1) // step if step > 0 else (start - stop - step - 1) // -step
    return LoopSpec(kind, [(0, count)], attrs, [(start, step)])


def Parallel(*extents, coalesced_width=None, loop_layout=None):
    """Element-wise work over a tile: every iteration is independent."""
    if not extents:
        raise TypeError("T.Parallel needs at least one extent")
    return LoopSpec("parallel", [(0, e) for e in extents])


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None):
    """A loop whose iterations the compiler overlaps (copies of the next with compute of this)."""
    rng = (0, start) if stop is None else (start, stop - start)
    # Schedule options are Python ints, fixed when the kernel is compiled (their values are
    # checked with the loop, in the compiler's check_tile_ops).
    attrs = {"num_stages": _python_int(num_stages, "num_stages")}
    if order is not None:
        attrs["order"] = [_python_int(x, "order entries") for x in order]
    if stage is not None:
        attrs["stage"] = [_python_int(x, "stage entries") for x in stage]
    if group is not None:
        # order / stage give one entry per group of statements: the compiler reads one entry
        # per statement of the body.
        members = _groups(group, len(attrs.get("order", attrs.get("stage", []))))
        for key in ("order", "stage"):
            if key in attrs:
                per_statement = [None] * (max(members) + 1 if members else 0)
                for s, g in members.items():
                    per_statement[s] = attrs[key][g]
                if None in per_statement:
                    raise ValueError(f"T.Pipelined: group leaves statement {per_statement.index(None)} of the loop "
                                     "body out (every statement up to the last one named belongs to one group)")
                attrs[key] = per_statement
    return LoopSpec("pipelined", [rng], attrs)


def _groups(group, entries):
    """{statement index: group index} of T.Pipelined's group argument (a list of lists of
    statement indices, one list per order / stage entry)."""
    if not isinstance(group, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in group):
        raise TypeError(f"T.Pipelined: group must be a list of lists of statement indices, got {group!r}")
    if entries and len(group) != entries:
        raise ValueError(f"T.Pipelined: group has {len(group)} groups but order / stage have {entries} entries")
    members = {}
    for g, stmts in enumerate(group):
        for s in stmts:
            s = _python_int(s, "group entries")
            if s < 0:
                raise ValueError(f"T.Pipelined: group names statement {s}; statement indices start at 0")
            if s in members:
                raise ValueError(f"T.Pipelined: group puts statement {s} in groups {members[s]} and {g}")
            members[s] = g
    return members


def Persistent(domain, wave_size, index, group_size=8):
    """Tiles of a grid taken in turn by a fixed set of blocks (a persistent kernel), as upstream:
    `for bx, by in T.Persistent([m_blocks, n_blocks], wave_size, index)` visits tile
    t = w * wave_size + index for w = 0, 1, ... while t is in the domain, and binds its
    coordinates. Tiles are numbered in groups of `group_size` along the last dimension
    (the last group narrower when the dimension is not a multiple of it), the last
    coordinate fastest inside a group, so blocks running together share operands in L2."""
    if not isinstance(domain, (list, tuple)) or not domain:
        raise TypeError("T.Persistent: domain must be a non-empty list of extents, e.g. [m_blocks, n_blocks]")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise TypeError(f"T.Persistent: group_size must be a positive Python int, got {group_size!r}")
    return LoopSpec("persistent", [(0, d) for d in domain],
                    {"wave_size": wave_size, "index": index, "group_size": group_size})


def _python_int(x, what):
    import numpy as np
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"T.Pipelined: {what} must be Python ints, got {x!r} ({type(x).__name__})")
    return int(x)


def serial(*args, annotations=None):
    """A sequential loop: T.serial(stop), T.serial(start, stop) or T.serial(start, stop, step)
    (step a non-zero Python int, as Python's range)."""
    return _stepped("serial", args, "T.serial")


Serial = serial  # the capitalised spelling, as T.Parallel / T.Pipelined


def grid(*extents):
    """`for i, j in T.grid(M, N)`: sequential loops nested in order, each from 0 (TVM
    script's T.grid, which upstream programs use for serial copies)."""
    if not extents:
        raise TypeError("T.grid needs at least one extent")
    return LoopSpec("serial", [(0, e) for e in extents])


def thread_binding(start, stop=None, thread=None, annotations=None):
    """`for tx in T.thread_binding(128, thread="threadIdx.x")`: the loop's variable is the
    thread index of the enclosing T.Kernel along that axis (no loop is made). The range must
    be the kernel's whole thread extent on the axis: 0 to threads[d]."""
    if thread is None and isinstance(stop, str):
        stop, thread = None, stop
    if thread not in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        raise TypeError(f"T.thread_binding: thread must be 'threadIdx.x', 'threadIdx.y' or 'threadIdx.z', got {thread!r}"
                        " (block indices are the names T.Kernel binds)")
    rng = (0, start) if stop is None else (start, stop - start)
    return LoopSpec("thread_binding", [rng], {"thread": thread})


def unroll(*args, explicit=False, unroll_factor=None, annotations=None):
    """A loop the compiler unrolls: T.unroll(stop), T.unroll(start, stop) or T.unroll(start,
    stop, step) (as T.serial). unroll_factor=n
    unrolls n iterations at a time (`#pragma unroll n` on CUDA and HIP; the CPU and WebGPU
    back ends leave unrolling to their compilers); explicit=True (upstream: unrolled in the
    IR) unrolls it whole, as the default does here. The two are exclusive."""
    attrs = {}
    if unroll_factor is not None:
        if explicit:
            raise TypeError("T.unroll: explicit and unroll_factor are mutually exclusive (explicit unrolls the whole loop)")
        if isinstance(unroll_factor, bool) or not isinstance(unroll_factor, int) or unroll_factor < 1:
            raise TypeError(f"T.unroll: unroll_factor must be a positive Python int, got {unroll_factor!r}")
        attrs["unroll_factor"] = unroll_factor
    return _stepped("unroll", args, "T.unroll", attrs)


def vectorized(*args, annotations=None):
    """A loop run as vector operations: T.vectorized(stop) or T.vectorized(start, stop)."""
    return LoopSpec("vectorized", [_range(args, "T.vectorized")])


def _loop_jump(name, op):
    from .. import _C
    from ..errors import TileLangSyntaxError
    from ..parser import builder as _builder
    b = _builder.require(f"T.{name}")
    if not b.loop_kinds:
        raise _builder.error(TileLangSyntaxError, f"T.{name}() outside a kernel loop",
                             "call it inside a `for ... in T.serial(n)` or a `while` loop")
    if b.loop_kinds[-1] not in ("serial", "while"):
        kind = {"parallel": "T.Parallel", "pipelined": "T.Pipelined", "unroll": "T.unroll",
                "vectorized": "T.vectorized"}.get(b.loop_kinds[-1], b.loop_kinds[-1])
        raise _builder.error(TileLangSyntaxError, f"T.{name}() inside a {kind} loop",
                             "leave or skip ahead in a T.serial or while loop only; a T.Parallel iteration can "
                             "skip its work with an if")
    b.emit(_C.evaluate(_C.call_void(op, [])))


def loop_break():
    """Leaves the innermost T.serial (or while) loop of the kernel, like Python's `break`:
    `if done: T.loop_break()`. Not inside T.Parallel, T.Pipelined, T.unroll or T.vectorized
    loops, whose iterations the compiler spreads, overlaps or copies."""
    _loop_jump("loop_break", "loop_break")


def break_loop():
    """T.loop_break() (upstream's other name for it)."""
    _loop_jump("break_loop", "loop_break")


def continue_loop():
    """Goes on with the next iteration of the innermost T.serial (or while) loop, like
    Python's `continue`: `if skip: T.continue_loop()`; the same loops as T.loop_break."""
    _loop_jump("continue_loop", "loop_continue")
