"""Upstream's carver package as programs use it: devices (tilelang.carver.arch: CUDA,
CDNA, the driver's device properties), MatmulTemplate's recommended tilings
(tilelang.carver.template, a model of our own) and their hints
(tilelang.carver.roller)."""
from . import arch, roller, template  # noqa: F401
from .arch import CDNA, CUDA  # noqa: F401
from .template import MatmulTemplate  # noqa: F401
