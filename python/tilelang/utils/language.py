"""Predicates on a buffer's memory scope (a buffer, or an element / region of one)."""
from __future__ import annotations

import functools
import operator


def _scope(buffer) -> str:
    buffer = getattr(buffer, "buffer", buffer)  # an element or a region of a buffer
    scope = getattr(buffer, "scope", None)
    if scope is None:
        raise TypeError(f"expected a buffer, got {type(buffer).__name__}")
    return scope() if callable(scope) else scope


def is_global(buffer) -> bool:
    """Whether buffer lives in global (device) memory."""
    return _scope(buffer) == "global"


def is_shared(buffer, allow_dynamic: bool = True) -> bool:
    """Whether buffer lives in shared memory ("shared", or "shared.dyn" when allow_dynamic)."""
    s = _scope(buffer)
    return s == "shared" or (allow_dynamic and s == "shared.dyn")


def is_shared_dynamic(buffer) -> bool:
    """Whether buffer lives in dynamic shared memory ("shared.dyn")."""
    return _scope(buffer) == "shared.dyn"


def is_local(buffer) -> bool:
    """Whether buffer is a per-thread array ("local")."""
    return _scope(buffer) == "local"


def is_local_var(buffer) -> bool:
    """Whether buffer is a per-thread scalar variable ("local.var")."""
    return _scope(buffer) == "local.var"


def is_fragment(buffer) -> bool:
    """Whether buffer is a fragment spread over the block's threads ("local.fragment")."""
    return _scope(buffer).startswith("local.fragment")


def array_reduce(array) -> int:
    """The product of the entries of array."""
    return functools.reduce(operator.mul, array)
