"""@T.prim_func: parse a kernel function into IR when it is defined."""
from __future__ import annotations


def prim_func(fn=None, *, private=False, check_well_formed=True):
    from ..parser import parse_prim_func
    if fn is None:
        return lambda f: parse_prim_func(f)
    return parse_prim_func(fn)
