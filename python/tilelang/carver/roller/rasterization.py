"""The order blocks are launched in: as they come (NoRasterization), or in panels of
rows (columns) of tiles for L2 reuse (T.use_swizzle(panel_width, order))."""
from __future__ import annotations


class Rasterization:
    panel_width = 0

    def __repr__(self):
        return f"{type(self).__name__}({self.panel_width})" if self.panel_width else type(self).__name__


class NoRasterization(Rasterization):
    pass


class Rasterization2DRow(Rasterization):
    def __init__(self, panel_width: int = 8):
        self.panel_width = panel_width


class Rasterization2DColumn(Rasterization):
    def __init__(self, panel_width: int = 8):
        self.panel_width = panel_width
