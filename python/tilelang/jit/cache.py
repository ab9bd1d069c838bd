"""The kernel cache: compiled kernels on disk, keyed by a content hash of what determines
the binary (the IR, the target, the compiler and its flags), so a new process that
compiles the same kernel loads it instead."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
import warnings
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


# An entry is complete when its meta.json lists the SHA-256 of each of its files and every
# file has that hash: a library cut short (a full disk, a killed copy), a flipped byte or
# unreadable metadata make the entry missing, and the kernel is built again.

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lookup(key: str, files=("kernel.so",)):
    """(entry directory, metadata) of a complete cached kernel with these files, or None."""
    d = entry_dir(key)
    try:
        meta = json.loads((d / "meta.json").read_text())
        digests = meta["files"]
        for name in files:
            if digests[name] != _digest(d / name):
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return d, meta


def write_atomic(path: Path, data):
    """Writes a file under a temporary name in its directory, then renames it into place:
    a reader sees the old file or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def store_meta(key: str, meta: dict, files=("kernel.so",)):
    """Marks an entry complete: its metadata with the hash of each file, written last."""
    d = entry_dir(key)
    meta = dict(meta, files={name: _digest(d / name) for name in files})
    write_atomic(d / "meta.json", json.dumps(meta, indent=1))


def lock_timeout() -> float:
    return float(os.environ.get("TILELANG_CACHE_LOCK_TIMEOUT", "600"))


@contextlib.contextmanager
def entry_lock(key: str):
    """Holds the entry's lock (an flock on its `lock` file) while one process looks the
    kernel up and builds it, so that processes compiling the same kernel at once build it
    once and never see each other's files half-written. The lock goes with a process that
    dies; one held longer than lock_timeout() seconds is given up on. Yields True when held,
    False when not (no flock on this system, or the wait ran out): the caller then builds
    the kernel in a directory of its own."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): every process builds privately
        yield False
        return
    d = entry_dir(key)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + lock_timeout()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    warnings.warn(f"tilelang: the kernel cache entry {d} stayed locked for over "
                                  f"{lock_timeout():.0f} s; building this kernel without the cache")
                    yield False
                    return
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
