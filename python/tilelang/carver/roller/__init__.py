"""Hints of tile schedules (upstream's tilelang.carver.roller): Hint, and the block
orders in rasterization."""
from .hint import Hint  # noqa: F401
from .rasterization import NoRasterization, Rasterization2DColumn, Rasterization2DRow  # noqa: F401
