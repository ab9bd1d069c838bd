"""Devices a schedule is chosen for (upstream's tilelang.carver.arch): CUDA(target) and
CDNA(target), with the properties the roller (carver/template.py) sizes tiles by, and
`driver`, the CUDA device's properties read from the driver."""
from __future__ import annotations

import re

from . import driver  # noqa: F401

# Streaming multiprocessors of the reference part of each architecture, for a target
# compiled without its device (with a device present, its own count is read).
_CUDA_SMS = {70: 80, 75: 72, 80: 108, 86: 84, 87: 16, 89: 128, 90: 132, 100: 148, 120: 170}
_CDNA_CUS = {"gfx90a": 104, "gfx940": 304, "gfx941": 304, "gfx942": 304, "gfx950": 256}


class TileDevice:
    """What tiles are sized by: SMs (compute units), shared memory a block may use,
    registers and threads per block, the warp (wavefront) size."""

    platform = "generic"

    def __init__(self, arch: str, sm_count: int, smem_per_block: int, regs_per_block: int = 65536,
                 max_threads: int = 1024, warp_size: int = 32):
        self.arch, self.compute_capability = arch, arch
        self.sm_count = sm_count
        self.max_smem_usage = smem_per_block
        self.smem_cap = smem_per_block
        self.reg_cap = regs_per_block
        self.max_threads_per_block = max_threads
        self.warp_size = warp_size

    def __repr__(self):
        return (f"{type(self).__name__}({self.arch}: {self.sm_count} SMs, {self.max_smem_usage} bytes of shared "
                f"memory a block)")


def _cuda_arch_of(target: str):
    m = re.search(r"sm_(\d+)(a?)", target)
    return (int(m.group(1)), m.group(2)) if m else None


class CUDA(TileDevice):
    """An NVIDIA GPU: CUDA("cuda -arch=sm_90a") for that architecture, CUDA("cuda") for the
    device present."""

    platform = "CUDA"

    def __init__(self, target="cuda"):
        from ...autotuner.limits import shared_memory_limit
        text = str(getattr(target, "arch", None) or target)
        parsed = _cuda_arch_of(text)
        device = driver._driver() is not None
        if parsed is None:
            if not device:
                raise RuntimeError(f"CUDA({text!r}): no architecture named and no CUDA device to read it from; "
                                   "give one, e.g. CUDA(\"cuda -arch=sm_90a\")")
            major = driver.get_device_attribute(driver.COMPUTE_CAPABILITY_MAJOR)
            minor = driver.get_device_attribute(driver.COMPUTE_CAPABILITY_MINOR)
            parsed = (major * 10 + minor, "a" if major * 10 + minor == 90 else "")
        number, suffix = parsed
        arch = f"sm_{number}{suffix}"
        known = [a for a in _CUDA_SMS if a <= number]
        sms = driver.get_num_sms() if device else _CUDA_SMS[max(known)] if known else 1
        super().__init__(arch, sms, shared_memory_limit(f"cuda -arch={arch}") or 48 * 1024)


class CDNA(TileDevice):
    """An AMD Instinct GPU: CDNA("hip -arch=gfx942") (CDNA("hip"): gfx942)."""

    platform = "CDNA"

    def __init__(self, target="hip"):
        text = str(getattr(target, "arch", None) or target)
        m = re.search(r"gfx\w+", text)
        arch = m.group(0) if m else "gfx942"
        super().__init__(arch, _CDNA_CUS.get(arch, 304), 64 * 1024, warp_size=64)


__all__ = ["TileDevice", "CUDA", "CDNA", "driver"]
