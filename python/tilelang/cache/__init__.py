"""The kernel cache switches: tilelang.cache.clear_cache() and the on/off switches that
are also at the top level (tilelang.disable_cache(), ...)."""
from __future__ import annotations

from ..jit.cache import cache_dir, clear_cache, disable_cache, enable_cache, is_cache_enabled

__all__ = ["cache_dir", "clear_cache", "disable_cache", "enable_cache", "is_cache_enabled"]
