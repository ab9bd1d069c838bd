"""@T.prim_func: parse a kernel function into IR when it is defined."""
from __future__ import annotations

import sys


def prim_func(fn=None, *, private=False, check_well_formed=True):
    """Parses the decorated function into a kernel (IR) when it is defined; its parameters are
    annotated T.Tensor(shape, dtype) buffers or dtype scalars."""
    from ..parser import parse_prim_func
    # The defining scope's names, for annotations that use names the body does not.
    enclosing = sys._getframe(1).f_locals
    if fn is None:
        return lambda f: parse_prim_func(f, enclosing)
    return parse_prim_func(fn, enclosing)
