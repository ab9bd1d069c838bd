"""Typed errors for problems in a user's kernel or in a call to a compiled kernel.

Every compile error names the user's source line first (``file.py:12: error: ...``),
shows that line, and ends with a hint when there is one.
"""
from __future__ import annotations

import linecache

__all__ = [
    "TileLangError",
    "TileLangSyntaxError",
    "TileLangNameError",
    "TileLangTypeError",
    "TileLangShapeError",
    "TileLangBoundsError",
    "TileLangUnsupportedError",
    "TileLangLayoutError",
    "TileLangInternalError",
    "TileLangPerformanceWarning",
]


class TileLangPerformanceWarning(UserWarning):
    """The compiler took a slower instruction or schedule than the program could have had
    (the lowering report says which and why)."""


class TileLangError(Exception):
    """Base class of every error the compiler reports about a user's program."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 hint: str | None = None):
        self.message = message
        self.file = file or None
        self.line = line or None
        self.hint = hint or None
        super().__init__(self._format())

    def _format(self) -> str:
        text = f"error: {self.message}"
        if self.file and self.line:
            text = f"{self.file}:{self.line}: {text}"
            source = linecache.getline(self.file, self.line).strip()
            if source:
                text += f"\n    {source}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def __str__(self) -> str:
        return self._format()


class TileLangSyntaxError(TileLangError):
    """A Python construct the kernel language does not have."""


class TileLangNameError(TileLangError, NameError):
    """A name used in a kernel is not defined."""


class TileLangTypeError(TileLangError, TypeError):
    """A dtype mismatch or a value of the wrong kind."""


class TileLangShapeError(TileLangError, ValueError):
    """A rank or extent mismatch between operands."""


class TileLangBoundsError(TileLangError, IndexError):
    """A region that lies outside its buffer."""


class TileLangUnsupportedError(TileLangError, NotImplementedError):
    """A valid program that the chosen target cannot compile."""


class TileLangLayoutError(TileLangError):
    """Conflicting layout demands on a buffer."""


class TileLangInternalError(TileLangError, RuntimeError):
    """A bug in the compiler: please report it with the kernel that triggered it."""


_BY_KIND = {
    "syntax": TileLangSyntaxError,
    "name": TileLangNameError,
    "type": TileLangTypeError,
    "shape": TileLangShapeError,
    "bounds": TileLangBoundsError,
    "unsupported": TileLangUnsupportedError,
    "layout": TileLangLayoutError,
    "internal": TileLangInternalError,
}


def _from_compiler(kind: str, message: str, file: str, line: int, hint: str) -> TileLangError:
    """Called by the C++ core to turn a CompileError into the matching exception."""
    cls = _BY_KIND.get(kind, TileLangInternalError)
    if cls is TileLangInternalError and "internal" not in message:
        message = f"internal compiler error: {message}"
    return cls(message, file or None, line or None, hint or None)
