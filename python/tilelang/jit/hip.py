"""Target hip (AMD GPUs): HIP C++ from the GPU lowering, compiled by hipcc into a code
object and launched through the HIP runtime (libamdhip64, loaded at run time through
ctypes, as the CUDA driver is). Generating the source needs nothing from ROCm; a call
without a runtime, an AMD GPU or hipcc says which is missing."""
from __future__ import annotations

import ctypes
import functools
import os

from .. import _C
from ..errors import TileLangInternalError, TileLangUnsupportedError
from .backends import switches

# $TILELANG_HIP_RUNTIME names another library (a test double, a ROCm outside the loader's path).
_RUNTIME_NAMES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")


class HipRuntime:
    """The HIP runtime calls a launch needs, with their C signatures."""

    def __init__(self, lib):
        self.lib = lib
        vp, u, i = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
        sig = {
            "hipGetDeviceCount": [ctypes.POINTER(i)],
            "hipModuleLoadData": [ctypes.POINTER(vp), vp],
            "hipModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "hipModuleLaunchKernel": [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)],
            "hipModuleUnload": [vp],
        }
        for name, argtypes in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, i
        lib.hipGetErrorName.argtypes, lib.hipGetErrorName.restype = [i], ctypes.c_char_p

    def error_name(self, err: int) -> str:
        name = self.lib.hipGetErrorName(err)
        return name.decode() if name else f"error {err}"

    def check(self, err: int, what: str):
        if err != 0:
            raise TileLangInternalError(f"{what} failed: {self.error_name(err)} ({err})")

    def device_count(self) -> tuple[int, int]:
        count = ctypes.c_int(0)
        return self.lib.hipGetDeviceCount(ctypes.byref(count)), count.value


@functools.lru_cache(maxsize=None)
def _runtime():
    """(HipRuntime or None, why it could not be loaded)."""
    names = [os.environ["TILELANG_HIP_RUNTIME"]] if os.environ.get("TILELANG_HIP_RUNTIME") else _RUNTIME_NAMES
    tried = []
    for name in names:
        try:
            return HipRuntime(ctypes.CDLL(name)), ""
        except (OSError, AttributeError) as e:
            tried.append(f"{name}: {e}")
    return None, "no HIP runtime (libamdhip64) could be loaded: " + "; ".join(tried)


@functools.lru_cache(maxsize=None)
def hip_device_status() -> str:
    """Why HIP kernels cannot run in this process ("" when they can): the runtime's absence,
    its error for the device count, or hipcc's absence."""
    runtime, why = _runtime()
    if runtime is None:
        return why
    err, count = runtime.device_count()
    if err != 0 or count == 0:
        return f"no AMD GPU is present (hipGetDeviceCount: {runtime.error_name(err) if err else 'no device'})"
    if hipcc_path() is None:
        return f"{count} AMD GPU(s) present, but hipcc is not installed to compile for them"
    return ""


# The ctypes type of a scalar parameter, by the IR's dtype name.
_SCALAR_TYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
                 "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
                 "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double,
                 "bool": ctypes.c_bool}


class HipExecutable:
    """The generated HIP source and its kernels' launch shapes; compiled by hipcc for the
    target's architecture and loaded on the first call that finds an AMD GPU."""

    def __init__(self, infos, source: str, report: str, target: str, include_dir: str):
        self.infos = infos
        self.source = source
        self.report = report
        self.target = target
        self.arch = target.split("-arch=")[1].split()[0] if "-arch=" in target else ""
        self.include_dir = include_dir
        self._functions = None  # [(hipFunction_t, info)] once loaded

    def lowering_report(self) -> str:
        return self.report

    def require_device(self):
        why = hip_device_status()
        if why:
            raise TileLangUnsupportedError(
                f"cannot run a kernel compiled for '{self.target}': {why}", None, None,
                "kernel.get_kernel_source() gives the HIP source; compile it with hipcc --offload-arch=<gfx...>, "
                "or run on target=\"cuda\" or \"cpu\"")

    def _load(self, runtime: HipRuntime):
        code_object = hipcc_compile(self.source, self.arch, self.include_dir)
        module = ctypes.c_void_p()
        err = runtime.lib.hipModuleLoadData(ctypes.byref(module), code_object)
        if err != 0:
            # hipErrorNoBinaryForGpu and friends: the device is not the target's architecture.
            raise TileLangUnsupportedError(
                f"the code object for {self.arch} does not load on this AMD GPU "
                f"(hipModuleLoadData: {runtime.error_name(err)})", None, None,
                "compile for the device's architecture: target=\"hip -arch=<its gfx name>\" (rocminfo lists it)")
        self._module = module
        functions = []
        for info in self.infos:
            fn = ctypes.c_void_p()
            runtime.check(runtime.lib.hipModuleGetFunction(ctypes.byref(fn), module, info["name"].encode()),
                          f"hipModuleGetFunction({info['name']})")
            functions.append((fn, info))
        self._functions = functions

    def run(self, values, shape_values, stream):
        """values: {param index: pointer or scalar}; shape_values: {name: int}; stream: a
        hipStream_t (torch's current stream on a ROCm build) or 0."""
        self.require_device()
        for kind, name, _, index in (p for info in self.infos for p in info["params"]):
            if kind == "buffer" and values[index] % 16:
                raise ValueError(f"argument '{name}' is not 16-byte aligned (address {values[index]:#x}); "
                                 "kernels use vector accesses: pass a tensor that starts on an aligned "
                                 "address (e.g. .clone())")
        runtime = _runtime()[0]
        if self._functions is None:
            self._load(runtime)
        for fn, info in self._functions:
            grid = [_C.eval_int(g, shape_values) for g in info["grid"]]
            if min(grid) <= 0:
                continue  # an empty grid (a dynamic size of 0): nothing to launch
            # Each parameter's value in its C type, and the array of their addresses.
            boxes = []
            for kind, name, dtype, index in info["params"]:
                if kind == "buffer":
                    boxes.append(ctypes.c_void_p(values[index]))
                elif kind == "scalar":
                    if dtype not in _SCALAR_TYPES:
                        raise TileLangUnsupportedError(f"a {dtype} scalar parameter ('{name}') cannot be passed "
                                                       "to a HIP kernel", None, None, "pass it as a tensor")
                    boxes.append(_SCALAR_TYPES[dtype](values[index]))
                else:  # a shape variable
                    boxes.append(ctypes.c_int64(shape_values[name]))
            params = (ctypes.c_void_p * max(1, len(boxes)))(*[ctypes.cast(ctypes.byref(b), ctypes.c_void_p)
                                                               for b in boxes])
            block = list(info["block"])
            runtime.check(runtime.lib.hipModuleLaunchKernel(fn, *grid, *block, int(info["dynamic_shared_bytes"]),
                                                            ctypes.c_void_p(stream or None), params, None),
                          f"hipModuleLaunchKernel({info['name']})")


class HipBackend:
    device = "hip"
    # The arrays a HIP kernel takes: torch's ROCm build names the AMD GPU "cuda" (host
    # arrays are staged through it, as on CUDA).
    devices = ("cuda",)

    def compiler_id(self) -> str:
        return "hip-source"  # hipcc runs at the first call: only the core's identity matters here

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        lowered = _C.lower(prim_func.handle, target, switches(pass_configs))
        source = _C.codegen(lowered, target)
        # Same entry points, parameters, grid and block as on CUDA.
        infos = _C.cuda_kernel_infos(lowered)
        return HipExecutable(infos, source, lowered.lowering_report(), target, include_dir), None


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
