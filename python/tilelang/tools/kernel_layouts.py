"""The layouts the compiler infers for a kernel, as Layout and Fragment objects."""
from __future__ import annotations

import numpy as np

from ..layout.maps import Fragment, Layout

__all__ = ["kernel_layouts"]


def kernel_layouts(func, target="cuda -arch=sm_90a", pass_configs=None) -> dict:
    """{buffer name: Fragment or Layout} for a @T.prim_func lowered for a GPU target
    (nothing is compiled; no device is needed): the thread mapping of every fragment, and
    the swizzled layout of every shared buffer the compiler swizzles (one rows x cols tile,
    with element_bits set, so that pictures show the banks). The cpu target has none."""
    from .. import _C
    from ..ir import PrimFunc
    from ..jit.backends import resolve_target, switches
    if not isinstance(func, PrimFunc):
        raise TypeError(f"kernel_layouts expects a @T.prim_func, got {type(func).__name__}")
    out = {}
    for d in _C.kernel_layouts(func.handle, resolve_target(target), switches(pass_configs)):
        if d["kind"] == "fragment":
            shape = list(d["shape"])
            thread = np.array(d["thread"], dtype=np.int64).reshape([d["replicas"]] + shape)
            local = np.array(d["local"], dtype=np.int64).reshape(shape)
            layout = Fragment.from_table(thread, local, d["threads"], name=d["name"])
            layout.partition = d["partition"]
        else:
            offsets = np.array(d["offset"], dtype=np.int64).reshape(d["tile"])
            layout = Layout.from_table(offsets, element_bits=d["bits"], name=d["name"])
            layout.swizzle = d["swizzle"] + (f" in panels of {d['panel_cols']}" if d["panel_cols"] else "")
        layout.line = d["line"]
        out[d["name"]] = layout
    return out
