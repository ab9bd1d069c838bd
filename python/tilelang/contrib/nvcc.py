"""tilelang.contrib.nvcc: the compute capability of the CUDA device (or of a target) as
upstream programs ask for it, e.g. `float(nvcc.get_target_compute_version()) >= 9.0`."""
from __future__ import annotations

import re

from .. import _C


def _digits_of(arch: str) -> str:
    m = re.search(r"sm_(\d+)", arch)
    if not m:
        raise ValueError(f"no compute capability in {arch!r} (expected sm_XY, e.g. sm_90a)")
    return m.group(1)


def get_target_compute_version(target=None) -> str:
    """"major.minor" of `target` (a target string or object naming -arch=sm_XY), else of
    CUDA device 0. Raises RuntimeError without a target and without a usable device."""
    if target is not None:
        digits = _digits_of(str(getattr(target, "arch", None) or target))
    else:
        if not _C.cuda_device_available():
            raise RuntimeError("no CUDA device to read the compute capability of: " + _C.cuda_unavailable_reason())
        digits = _digits_of(_C.cuda_device_arch(0))
    return f"{digits[:-1]}.{digits[-1]}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """(major, minor) of "9.0"."""
    parts = str(compute_version).split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"compute version {compute_version!r} is not of the form major.minor")
    return int(parts[0]), int(parts[1])


def have_tensorcore(compute_version: str | None = None, target=None) -> bool:
    """Whether the device (or target) has tensor cores (sm_70 and later)."""
    major, _ = parse_compute_version(compute_version or get_target_compute_version(target))
    return major >= 7
