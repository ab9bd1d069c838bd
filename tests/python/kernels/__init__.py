"""Kernel builders used by the test suite.

Each builder takes problem sizes, tile sizes and dtypes as plain Python values
and returns a ``T.prim_func`` written in the TileLang dialect. The builders do
not compile anything; the tests compile them for each target.
"""

from . import (
    attention,
    atomic,
    dynamic,
    elementwise,
    gemm,
    meta,
    norm,
    reduction,
    scan,
    softmax,
    transpose,
)

__all__ = [
    "attention",
    "atomic",
    "dynamic",
    "elementwise",
    "gemm",
    "meta",
    "norm",
    "reduction",
    "scan",
    "softmax",
    "transpose",
]
