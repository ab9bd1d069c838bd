"""Tools around kernels: pictures of layouts."""
from .kernel_layouts import kernel_layouts
from .plot_layout import plot_layout

__all__ = ["plot_layout", "kernel_layouts"]
