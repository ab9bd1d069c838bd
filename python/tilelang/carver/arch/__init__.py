"""Device architecture queries: `from tilelang.carver.arch import driver`."""
from . import driver  # noqa: F401
