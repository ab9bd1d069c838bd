"""The pictures kernel.get_lowering_report(pictures=dir) writes."""
from __future__ import annotations

from pathlib import Path

from .kernel_layouts import kernel_layouts
from .plot_layout import plot_layout


def write_pictures(kernel, directory) -> str:
    """Writes <kernel>_<buffer>.png for every fragment and swizzled shared buffer of the
    kernel's lowering for its target; returns the report lines that list them."""
    from ..jit.backends import switches
    name = kernel.prim_func.name
    if kernel._backend.device == "cpu" and not getattr(kernel._backend, "takes_arrays", False):
        return f"pictures: none (the {kernel.target} target runs each block as one thread: no thread layouts)\n"
    layouts = kernel_layouts(kernel.prim_func, kernel.target, kernel.pass_configs)
    if not layouts:
        return "pictures: none (no fragment and no swizzled shared buffer)\n"
    lines = []
    for buffer, layout in layouts.items():
        (path,) = plot_layout(layout, save_directory=Path(directory), name=f"{name}_{buffer}", formats="png")
        what = getattr(layout, "partition", None) or f"shared, swizzled {getattr(layout, 'swizzle', '')}"
        lines.append(f"picture of {buffer} (line {layout.line}; {what}): {path}\n")
    return "".join(lines)
