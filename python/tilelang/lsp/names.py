"""The names of the kernel language (T.*) with their signatures and docstrings, for hover,
completion and signature help."""
from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field


@dataclass
class Name:
    name: str
    kind: str  # "function", "class", "dtype" or "value"
    signature: str  # "(src, dst, ...)" for callables, "" otherwise
    doc: str
    parameters: list = field(default_factory=list)  # [(name, "name=default" or "name")]

    def markdown(self) -> str:
        head = f"T.{self.name}{self.signature}" if self.kind in ("function", "class") else f"T.{self.name}"
        return f"```python\n{head}\n```\n\n{self.doc}".rstrip()


def _signature(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "", []
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        params.append((p.name, f"{p.name}={p.default!r}" if p.default is not p.empty else p.name))
    return str(sig), params


def _describe(name, obj):
    from ..dtypes import DType
    if isinstance(obj, DType):
        return Name(name, "dtype", "", f"The dtype `{str.__str__(obj)}` ({obj.bits} bits per element); "
                                       "use it as a dtype argument or call it to make a constant: "
                                       f"`T.{name}(1)`.")
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj):
        sig, params = _signature(obj)
        return Name(name, "class", sig, doc, params)
    if callable(obj):
        sig, params = _signature(obj)
        return Name(name, "function", sig, doc, params)
    return Name(name, "value", "", doc)


_TABLE = None


def language_names() -> dict:
    """{name: Name} for every public name of tilelang.language (modules excluded)."""
    global _TABLE
    if _TABLE is None:
        import tilelang.language as T
        _TABLE = {}
        for name in sorted(dir(T)):
            obj = getattr(T, name)
            if name.startswith("_") or isinstance(obj, types.ModuleType) or name == "annotations":
                continue
            _TABLE[name] = _describe(name, obj)
    return _TABLE
