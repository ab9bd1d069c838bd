"""The IR builder the parser and the T.* functions write into.

Statements are collected in frames, one per block of kernel code (a loop body, a branch,
a kernel). Allocations and bindings scope over the rest of their frame, so a frame is
folded from the end when it closes: `X = T.alloc_shared(...)` wraps what follows it.
"""
from __future__ import annotations

import threading

from .. import _C

_state = threading.local()


class Frame:
    __slots__ = ("items",)

    def __init__(self):
        self.items = []  # ("stmt", Stmt) | ("alloc", Buffer, attrs) | ("let", var, value)

    def close(self):
        body = None
        for item in reversed(self.items):
            kind = item[0]
            if kind == "stmt":
                body = item[1] if body is None else _C.seq([item[1], body])
            elif kind == "alloc":
                body = _C.allocate(item[1], body if body is not None else _C.seq([]), item[2])
            else:  # let
                body = _C.let(item[1], item[2], body if body is not None else _C.seq([]))
        return body if body is not None else _C.seq([])


class Builder:
    """One per prim_func being parsed."""

    def __init__(self, file: str):
        self.file = file
        self.frames: list[Frame] = []
        self.kernels = []  # stack of (thread_vars, threads, block_vars, grid, cluster) of enclosing T.Kernel blocks
        self.pending_name = None  # name an alloc_* result is about to be bound to
        self.line = 0
        self.outputs = []  # buffers made by T.empty: parameters the call allocates and returns
        self.workspaces = []  # buffers made by T.alloc_global: parameters the call allocates, not returned
        self.eager = None  # parser.eager.EagerState while an eager @tilelang.jit function is parsed
        self.source_kernel = None  # language.extern.SourceKernel: the body is CUDA source
        self.prelude = []  # source the program imports (T.import_source, T.Kernel(prelude=))
        self.mbarrier_list = None  # T.create_list_of_mbarrier's barriers, addressed by index
        # (var, value) of the names bound so far (let-bound vars are never rebound), for
        # extents written as the difference of two of them.
        self.let_values = []
        self.loop_kinds = []  # kinds of the kernel loops around the statement being parsed
        self.reducers = []  # T.comm_reducer of the enclosing `T.attr(..., "reduce_scope", ...)` blocks

    # -- frames
    def push(self) -> Frame:
        f = Frame()
        self.frames.append(f)
        return f

    def pop(self):
        return self.frames.pop().close()

    def emit(self, stmt):
        self.frames[-1].items.append(("stmt", stmt))

    def emit_alloc(self, buffer_handle, attrs=None):
        if len(self.frames) < 2 or not self.kernels:
            raise error_cls("TileLangSyntaxError")(
                "buffers are allocated inside a `with T.Kernel(...)` block", self.file, self.line,
                "move the T.alloc_* call into the kernel body")
        self.frames[-1].items.append(("alloc", buffer_handle, attrs or {}))

    def emit_let(self, var, value):
        self.frames[-1].items.append(("let", var, value))
        self.let_values.append((var, value))

    def take_name(self, default: str) -> str:
        name, self.pending_name = self.pending_name, None
        return name or default

    # -- locations
    def set_line(self, line: int, col: int = 0):
        self.line = line
        _C.set_span(self.file, line, col)


def error_cls(name):
    from .. import errors
    return getattr(errors, name)


def current() -> Builder | None:
    return getattr(_state, "builder", None)


def require(what: str) -> Builder:
    b = current()
    if b is None:
        from ..errors import TileLangSyntaxError
        raise TileLangSyntaxError(f"{what} can only be used inside a @T.prim_func kernel")
    return b


def enter(b: Builder):
    prev = current()
    _state.builder = b
    return prev


def leave(prev):
    _state.builder = prev


def error(cls, message: str, hint: str | None = None):
    """An error of class cls located at the statement being parsed."""
    b = current()
    if b is None:
        return cls(message, None, None, hint)
    return cls(message, b.file, b.line, hint)
