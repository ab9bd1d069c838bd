"""Target hip (AMD GPUs): HIP C++ from the GPU lowering, and the question of whether it can
run here. Generating the source needs nothing from ROCm; launching is not implemented yet,
so a call says why it cannot run: no HIP runtime, no AMD GPU, or (with both) that this
build does not launch HIP kernels."""
from __future__ import annotations

import ctypes
import functools

from .. import _C
from ..errors import TileLangUnsupportedError
from .backends import switches

_RUNTIME_NAMES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")


@functools.lru_cache(maxsize=None)
def hip_device_status() -> str:
    """Why HIP kernels cannot run in this process: the runtime's absence, its error for the
    device count, or that devices exist but launching is not implemented."""
    lib, tried = None, []
    for name in _RUNTIME_NAMES:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            tried.append(f"{name}: {e}")
    if lib is None:
        return "no HIP runtime (libamdhip64) could be loaded: " + "; ".join(tried)
    count = ctypes.c_int(0)
    err = lib.hipGetDeviceCount(ctypes.byref(count))
    if err != 0 or count.value == 0:
        lib.hipGetErrorName.restype = ctypes.c_char_p
        name = lib.hipGetErrorName(err).decode() if err else "no device"
        return f"no AMD GPU is present (hipGetDeviceCount: {name})"
    return f"{count.value} AMD GPU(s) present, but this build does not launch HIP kernels yet"


class HipExecutable:
    """The generated HIP source and the launch shapes of its kernels; nothing to run."""

    def __init__(self, infos, source: str, report: str, target: str):
        self.infos = infos
        self.source = source
        self.report = report
        self.target = target

    def lowering_report(self) -> str:
        return self.report

    def require_device(self):
        raise TileLangUnsupportedError(
            f"cannot run a kernel compiled for '{self.target}': {hip_device_status()}", None, None,
            "kernel.get_kernel_source() gives the HIP source; compile it with hipcc --offload-arch=<gfx...>, "
            "or run on target=\"cuda\" or \"cpu\"")

    def run(self, *args, **kwargs):
        self.require_device()


class HipBackend:
    device = "hip"

    def compiler_id(self) -> str:
        return "hip-source"  # the source is the product: only the core's identity matters

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        lowered = _C.lower(prim_func.handle, target, switches(pass_configs))
        source = _C.codegen(lowered, target)
        # Same entry points, parameters, grid and block as on CUDA.
        infos = _C.cuda_kernel_infos(lowered)
        return HipExecutable(infos, source, lowered.lowering_report(), target), None


# ---------------------------------------------------------------------- hipcc

def hipcc_path():
    """The hipcc to use: $TILELANG_HIPCC, else the first on PATH; None when there is none."""
    import os
    import shutil
    given = os.environ.get("TILELANG_HIPCC")
    return given if given and os.access(given, os.X_OK) else shutil.which("hipcc")


def hipcc_compile(source: str, arch: str, include_dir: str, assembly: bool = False) -> bytes:
    """The device code object (an AMDGPU ELF) of HIP source for one architecture, or its
    assembly with assembly=True, which needs no device libraries (hipcc links ROCm's
    device-library bitcode into a code object, and a ROCm release only has it for the
    architectures it knows). Raises TileLangUnsupportedError without hipcc and
    TileLangInternalError with hipcc's messages when it fails."""
    import subprocess
    import tempfile
    from pathlib import Path
    from ..errors import TileLangInternalError
    hipcc = hipcc_path()
    if hipcc is None:
        raise TileLangUnsupportedError("hipcc is not installed (not on PATH, TILELANG_HIPCC not set)", None, None,
                                       "install ROCm's hipcc (Debian: apt-get install hipcc)")
    with tempfile.TemporaryDirectory(prefix="tilelang-hip-") as d:
        src, out = Path(d) / "kernel.hip", Path(d) / ("kernel.s" if assembly else "kernel.co")
        src.write_text(source)
        cmd = [hipcc, "-std=c++17", "-O3", "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
               f"-I{include_dir}", "-Wno-unused-command-line-argument"]
        cmd += ["-S", "-nogpulib"] if assembly else ["-c", "--no-gpu-bundle-output"]
        cmd += [str(src), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            log = "\n".join((done.stderr or done.stdout).splitlines()[:60])
            raise TileLangInternalError(f"hipcc failed for {arch} (exit status {done.returncode}): "
                                        f"{' '.join(cmd)}\n{log}")
        return out.read_bytes()
