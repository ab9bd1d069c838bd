"""Layout and Fragment: index maps a person can build, inspect and picture.

    L = T.Layout([8, 64], lambda i, j: [i, j ^ (i % 8)])                 # element -> position
    F = T.Fragment([16, 8], forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2,
                   forward_index_fn=lambda i, j: (i // 8) * 2 + j % 2)   # element -> (thread, slot)

The functions are evaluated on every element of the (constant) shape when the object is
made: each is a table, exact whatever Python arithmetic the function uses. The layouts
the compiler infers for a kernel come as the same objects
(tilelang.tools.kernel_layouts), from the compiler's own tables.
"""
from __future__ import annotations

import itertools

import numpy as np

__all__ = ["Layout", "Fragment"]


def _shape(shape):
    try:
        dims = [int(d) for d in shape]
    except TypeError as e:
        raise TypeError(f"a layout's shape must be a list of constant extents, got {shape!r}") from e
    if not dims or any(d <= 0 for d in dims):
        raise ValueError(f"a layout's shape must have positive extents, got {list(shape)}")
    return dims


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _int(value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {value!r} ({type(value).__name__}); "
                        "layout functions are evaluated on Python ints")
    return int(value)


class Layout:
    """A map from every index of a logical tile to a physical position.

    shape: the tile's extents; `forward_fn(*indices)` gives the position (an int or a list of ints).
    element_bits, when given, is the width of an element in bits: pictures then show the
    shared-memory bank of each element.

    In T.annotate_layout({buf: layout}) the function is applied to the kernel's index
    expressions (so it may use //, %, * and + on them, and the shape may be symbolic: a
    global tensor's); the table below is built only when asked for (map_forward_index,
    offsets, pictures), from a constant shape."""

    def __init__(self, shape, forward_fn, element_bits=None, name=None):
        if not callable(forward_fn):
            raise TypeError(f"Layout: forward_fn must be callable, got {type(forward_fn).__name__}")
        if isinstance(shape, (int, np.integer)) or not hasattr(shape, "__iter__"):
            shape = [shape]
        self._shape_given = list(shape)
        if not self._shape_given:
            raise ValueError("a layout's shape must have at least one extent")
        self.forward_fn = forward_fn
        self.element_bits = element_bits
        self.name = name
        self._table = None
        if all(isinstance(d, (int, np.integer)) for d in self._shape_given):
            # A constant tile is checked now (a tensor-sized one when its table is asked for).
            if int(np.prod(_shape(self._shape_given))) <= (1 << 16):
                self._tabulate(eager=True)

    def _tabulate(self, eager=False):
        """Builds the table. Eagerly (at construction), a function that fails on Python ints
        is left for later: T.annotate_layout calls it on kernel expressions, and says so then."""
        if self._table is not None:
            return
        dims = _shape(self._shape_given)
        count = int(np.prod(dims))
        if count > (1 << 22):
            raise ValueError(f"the layout of shape {dims} has {count} elements, too many to tabulate "
                             "(at most 4194304); it can still be given to T.annotate_layout")
        table = None
        for index in itertools.product(*[range(d) for d in dims]):
            try:
                found = self.forward_fn(*index)
            except Exception:
                if eager:
                    return
                raise
            out = [_int(v, f"forward_fn{index}") for v in _as_list(found)]
            if table is None:
                table = np.empty(dims + [len(out)], dtype=np.int64)
            table[index] = out
        self._set_table(table)

    def _set_table(self, table):
        self._table = table
        self._input_shape = list(table.shape[:-1])
        self._output_shape = [int(table[..., k].max()) + 1 for k in range(table.shape[-1])]

    @property
    def shape(self):
        """The logical extents as given (ints, or kernel expressions for a symbolic tensor)."""
        return list(self._shape_given)

    def forward_index_exprs(self, indices):
        """The position of `indices` (kernel expressions or ints) as a list: forward_fn's result."""
        return _as_list(self.forward_fn(*indices))

    @classmethod
    def from_table(cls, positions, element_bits=None, name=None) -> "Layout":
        """A layout from its table: positions[index...] is the position (an int array of the
        tile's shape, or of the shape plus one axis for several output coordinates)."""
        table = np.asarray(positions, dtype=np.int64)
        if table.ndim == 0:
            raise ValueError("a layout's table needs at least one dimension")
        self = cls.__new__(cls)
        self._shape_given = list(table.shape)
        self.element_bits, self.name = element_bits, name
        flat_table = table[..., None]
        self.forward_fn = lambda *index: [int(v) for v in flat_table[tuple(index)]]
        self._set_table(flat_table)
        return self

    def get_input_shape(self):
        self._tabulate()
        return list(self._input_shape)

    def get_output_shape(self):
        self._tabulate()
        return list(self._output_shape)

    def map_forward_index(self, indices):
        """The position of the element at indices (a list of ints)."""
        self._tabulate()
        return [int(v) for v in self._table[self._check(indices)]]

    def offsets(self) -> np.ndarray:
        """The flat (row-major over the output shape) position of every element."""
        self._tabulate()
        flat = np.zeros(self._input_shape, dtype=np.int64)
        for k, extent in enumerate(self._output_shape):
            flat = flat * extent + self._table[..., k]
        return flat

    def _check(self, indices):
        idx = tuple(_int(v, "an index") for v in indices)
        if len(idx) != len(self._input_shape) or any(not 0 <= v < d for v, d in zip(idx, self._input_shape)):
            raise IndexError(f"index {list(idx)} is outside the layout's shape {self._input_shape}")
        return idx

    def __repr__(self):
        label = f"{self.name}: " if self.name else ""
        if self._table is None:
            return f"Layout({label}{self._shape_given})"
        return f"Layout({label}{self._input_shape} -> {self._output_shape})"


def _slots_by_rank(thread):
    """The slots upstream infers when only the thread is given: the index digits the thread
    does not use, flattened with the first index most significant -- which is each element's
    rank among the elements of its thread in row-major order."""
    flat = thread.reshape(-1)
    slots = np.zeros_like(flat)
    seen = {}
    for k, t in enumerate(flat.tolist()):
        slots[k] = seen.get(t, 0)
        seen[t] = slots[k] + 1
    return slots.reshape(thread.shape)


class Fragment:
    """How a tile held in registers is spread over threads: element -> (thread, slot).

    As upstream: `forward_fn(*indices[, rep])` gives `(thread, index)`, or
    `forward_thread_fn(*indices[, rep])` gives the thread and `forward_index_fn(*indices)`
    the index (without it, the index digits the thread does not use, in order); the replicate copies of each element (rep in [0, replicate)) sit in
    different threads at the same slot."""

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None,
                 name=None):
        dims = _shape(shape)
        replicate = _int(replicate, "replicate")
        if replicate < 1:
            raise ValueError(f"replicate must be at least 1, got {replicate}")
        if forward_fn is None and forward_thread_fn is None:
            raise TypeError("Fragment needs forward_fn, or forward_thread_fn (with forward_index_fn)")
        for what, fn in (("forward_fn", forward_fn), ("forward_thread_fn", forward_thread_fn),
                         ("forward_index_fn", forward_index_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"Fragment: {what} must be callable, got {type(fn).__name__}")
        thread = np.empty([replicate] + dims, dtype=np.int64)
        local = np.zeros(dims, dtype=np.int64)
        for index in itertools.product(*[range(d) for d in dims]):
            for rep in range(replicate):
                extra = (rep,) if replicate > 1 else ()
                if forward_fn is not None:
                    found = _as_list(forward_fn(*index, *extra))
                    if len(found) != 2:
                        raise TypeError(f"Fragment: forward_fn{index} must give (thread, index), got {found}")
                    t, slot = found
                else:
                    t = forward_thread_fn(*index, *extra)
                    slot = forward_index_fn(*index) if forward_index_fn is not None else 0
                thread[(rep,) + index] = _int(_as_list(t)[0], f"the thread of {list(index)}")
                slot = _int(_as_list(slot)[0], f"the index of {list(index)}")
                if rep and local[index] != slot:
                    raise ValueError(f"the copies of element {list(index)} are at different slots "
                                     f"({int(local[index])} and {slot}); a copy keeps its element's slot")
                local[index] = slot
        if forward_fn is None and forward_index_fn is None:
            local = _slots_by_rank(thread[0])
        self._init(thread, local, int(thread.max()) + 1, name)

    def _init(self, thread, local, threads, name):
        self._thread, self._local = thread, local
        self._threads = threads
        self.name = name

    @classmethod
    def from_table(cls, thread, local, threads=None, name=None) -> "Fragment":
        """A fragment from its tables: thread[rep, index...] (or thread[index...] for one
        copy) is the thread holding copy rep of an element, local[index...] its slot."""
        local = np.asarray(local, dtype=np.int64)
        thread = np.asarray(thread, dtype=np.int64)
        if thread.shape == local.shape:
            thread = thread[None]
        if thread.shape[1:] != local.shape:
            raise ValueError(f"thread table of shape {thread.shape} does not match the local table {local.shape}")
        self = cls.__new__(cls)
        self._init(thread, local, int(threads) if threads is not None else int(thread.max()) + 1, name)
        return self

    @property
    def replicate_size(self) -> int:
        return int(self._thread.shape[0])

    def get_input_shape(self):
        return list(self._local.shape)

    def get_thread_size(self) -> int:
        return self._threads

    def local_size(self) -> int:
        return int(self._local.max()) + 1

    def map_forward_thread(self, indices):
        """`[thread]` of an element; with replicate > 1, indices are `[rep, *element]` (upstream's order)."""
        rep, idx = self._split(indices)
        return [int(self._thread[(rep,) + idx])]

    def map_forward_index(self, indices):
        """[slot] of an element (indices as for map_forward_thread)."""
        _, idx = self._split(indices)
        return [int(self._local[idx])]

    def threads_of(self) -> np.ndarray:
        """thread[rep, index...] for every element and copy."""
        return self._thread.copy()

    def slots_of(self) -> np.ndarray:
        """local[index...] for every element."""
        return self._local.copy()

    def _split(self, indices):
        values = [_int(v, "an index") for v in indices]
        rep = values.pop(0) if self.replicate_size > 1 else 0
        shape = self.get_input_shape()
        if len(values) != len(shape) or any(not 0 <= v < d for v, d in zip(values, shape)) or \
                not 0 <= rep < self.replicate_size:
            raise IndexError(f"index {list(indices)} is outside the fragment's shape {shape}"
                             + (f" (with {self.replicate_size} copies, rep first)" if self.replicate_size > 1 else ""))
        return rep, tuple(values)

    def __repr__(self):
        label = f"{self.name}: " if self.name else ""
        return (f"Fragment({label}{self.get_input_shape()} over {self._threads} threads, "
                f"{self.local_size()} per thread, replicate {self.replicate_size})")


def _digit_places(extent: int):
    """The place values of an axis of `extent` split into digits, least significant first:
    a bit for each factor 2, then one digit for the odd rest: [(place, digit extent)]."""
    places, place = [], 1
    while extent % 2 == 0 and extent > 1:
        places.append((place, 2))
        place, extent = place * 2, extent // 2
    if extent > 1:
        places.append((place, extent))
    return places


def fragment_digits(fragment: Fragment) -> str:
    """The fragment as the compiler's thread partition: each axis (the flattened tile when
    rank 1, else rows x cols) split into digits, each moving an element along the threads
    or along the slots by a fixed stride, and the copies' thread digits. Encoded for
    T.annotate_layout (layout inference reads it). Raises ValueError when the table is not
    such a split (e.g. a thread that depends on a product of two indices)."""
    shape = fragment.get_input_shape()
    thread, local = fragment.threads_of(), fragment.slots_of()
    reps = thread.shape[0]
    extents = [int(np.prod(shape))] if len(shape) == 1 else [int(np.prod(shape[:-1])), shape[-1]]
    thread2 = thread.reshape(reps, *extents)
    local2 = local.reshape(*extents)
    origin = (0,) * len(extents)
    if thread2[(0,) + origin] != 0 or local2[origin] != 0:
        raise ValueError("element 0 must be at thread 0, slot 0 (its first copy)")

    def classify(where, d_thread, d_slot, place):
        if d_thread and d_slot:
            raise ValueError(f"moving {where} by {place} changes both the thread and the slot")
        if d_thread < 0 or d_slot < 0:
            raise ValueError(f"moving {where} by {place} lowers the thread or the slot")
        if not d_thread and not d_slot:
            raise ValueError(f"elements {place} apart along {where} share a thread and slot")
        return ("t", int(d_thread)) if d_thread else ("l", int(d_slot))

    axes = []
    for a, extent in enumerate(extents):
        digits = []
        for place, size in _digit_places(extent):
            at = list(origin)
            at[a] = place
            kind, stride = classify("the rows" if len(extents) == 2 and a == 0 else "the columns" if a else "the tile",
                                    thread2[(0,) + tuple(at)], local2[tuple(at)], place)
            digits.append((size, kind, stride))
        axes.append(digits[::-1])  # most significant first
    copies = []
    for place, size in _digit_places(reps):
        d_thread = int(thread2[(place,) + origin])
        if d_thread <= 0:
            raise ValueError(f"copy {place} of element 0 is not on a higher thread than copy 0")
        copies.append((size, d_thread))
    # The split must reproduce the whole table.
    grids = np.meshgrid(*[np.arange(e) for e in extents], indexing="ij")
    want_t = np.zeros(extents, dtype=np.int64)
    want_l = np.zeros(extents, dtype=np.int64)
    for value, digits in zip(grids, axes):
        rest = value.copy()
        for size, kind, stride in digits[::-1]:
            part = rest % size
            rest //= size
            (want_t if kind == "t" else want_l)[...] += part * stride
    rep_offset = np.zeros(reps, dtype=np.int64)
    rest = np.arange(reps)
    for size, stride in copies:
        rep_offset += (rest % size) * stride
        rest //= size
    want_threads = want_t[None] + rep_offset.reshape((reps,) + (1,) * len(extents))
    bad = np.argwhere((want_threads != thread2) | (want_l != local2)[None])
    if len(bad):
        rep, *flat = bad[0]
        index = list(np.unravel_index(int(np.ravel_multi_index(flat, extents)), shape))
        raise ValueError(f"element {[int(i) for i in index]} (copy {int(rep)}) is at thread "
                         f"{int(thread2[tuple(bad[0])])}, slot {int(local2[tuple(flat)])}; a split of the indices "
                         f"into thread and slot digits puts it at thread {int(want_threads[tuple(bad[0])])}, slot "
                         f"{int(want_l[tuple(flat)])}")
    text = ";".join(",".join(f"{size}:{kind}:{stride}" for size, kind, stride in digits) for digits in axes)
    if copies:
        text += "|" + ",".join(f"{size}:{stride}" for size, stride in copies[::-1])
    return text
