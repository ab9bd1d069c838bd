"""Compiler pass options: tilelang.transform.PassConfigKey."""
from __future__ import annotations

from .pass_config import PassConfigKey, normalize_pass_configs

__all__ = ["PassConfigKey", "normalize_pass_configs"]
