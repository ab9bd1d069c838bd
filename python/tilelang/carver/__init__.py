"""Upstream's carver package, as far as programs reach into it for the device's properties
(tilelang.carver.arch.driver). Its schedule templates and roller are not provided."""
from . import arch  # noqa: F401
