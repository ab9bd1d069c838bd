"""Helpers shared by the profiler and the autotuner."""
from .tensor import TensorSupplyType  # noqa: F401
