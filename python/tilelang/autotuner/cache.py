"""Tuning results on disk: one JSON file per tuning problem, keyed by a content hash of
the candidates' IR, the configuration space, the target, the toolchain and the compile and
profile arguments. Only the outcome is kept; the best kernel itself comes back through the
kernel cache (a load, not a compile)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..jit import cache as kernel_cache

FORMAT = 1


def enabled() -> bool:
    return kernel_cache.enabled() and os.environ.get("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0") in ("", "0")


def key_of(parts: dict) -> str:
    blob = json.dumps(parts, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:40]


def entry_path(key: str) -> Path:
    return kernel_cache.cache_dir() / "autotuner" / key[:2] / f"{key}.json"


def load(key: str):
    """The stored entry (a dict) or None when there is none or it is unreadable."""
    path = entry_path(key)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    return data


def store(key: str, data: dict):
    path = entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tune", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(dict(data, format=FORMAT, key=key), f, indent=1, default=repr)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
