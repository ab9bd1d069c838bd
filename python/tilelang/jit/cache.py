"""The kernel cache: compiled kernels on disk, keyed by a content hash of what determines
the binary (the IR, the target, the compiler and its flags), so a new process that
compiles the same kernel loads it instead."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("TILELANG_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tilelang"


_switch = None  # set by enable_cache() / disable_cache(); None: the environment decides


def enabled() -> bool:
    """Whether compiled kernels are looked up and stored (in memory and on disk): as
    enable_cache() / disable_cache() last said, else unless TILELANG_DISABLE_CACHE is set
    to something other than 0."""
    if _switch is not None:
        return _switch
    return os.environ.get("TILELANG_DISABLE_CACHE", "0").strip().lower() in ("", "0", "false", "off", "no")


def enable_cache():
    """Turns the kernel cache on for this process (overrides TILELANG_DISABLE_CACHE)."""
    global _switch
    _switch = True


def disable_cache():
    """Turns the kernel cache off for this process: every compile builds the kernel anew,
    neither reading nor writing the memory or disk cache."""
    global _switch
    _switch = False


def is_cache_enabled() -> bool:
    """Whether the kernel cache is on."""
    return enabled()


def clear_cache():
    """Empties the kernel cache: this process's compiled kernels and the cache directory."""
    import shutil
    from . import kernel
    kernel._memory_cache.clear()
    d = cache_dir()
    if d.is_dir():
        shutil.rmtree(d, ignore_errors=True)


def key_of(parts: dict) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:40]


def entry_dir(key: str) -> Path:
    return cache_dir() / key[:2] / key


def lookup(key: str):
    """(library path, metadata) of a cached kernel, or None."""
    d = entry_dir(key)
    lib, meta = d / "kernel.so", d / "meta.json"
    if not (lib.exists() and meta.exists()):
        return None
    try:
        return lib, json.loads(meta.read_text())
    except (OSError, ValueError):
        return None


def store_meta(key: str, meta: dict):
    """Marks an entry complete (written last, atomically, after its library)."""
    d = entry_dir(key)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="meta", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(meta, indent=1))
    os.replace(tmp, d / "meta.json")
