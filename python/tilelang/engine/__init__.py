"""tilelang.engine: lowering a kernel without building it (lower), the description of a
kernel's parameters (param.KernelParam) and hooks on generated source (callback)."""
from __future__ import annotations

from . import callback, param  # noqa: F401
from .callback import register_cuda_postproc_callback
from .lower import lower
from .param import CompiledArtifact, KernelParam

__all__ = ["lower", "KernelParam", "CompiledArtifact", "register_cuda_postproc_callback", "callback", "param"]
