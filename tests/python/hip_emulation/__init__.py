"""Host emulation of the HIP C++ that target hip generates, to check its results without an
AMD GPU. The source is compiled by g++ as plain C++ against the stand-in headers in
include/ (hip/hip_runtime.h and friends: LDS as static storage, per-thread indices, barriers,
wavefront-collective shuffles and matrix-core builtins written from AMD's register layouts),
with the project's own tl/hip/tl_hip.h; a launcher runs the grid block by block, one
std::thread per GPU thread. Launch shapes come from _C.cuda_kernel_infos, as the hip back end
takes them."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tilelang import _C
from tilelang.jit.kernel import _include_dir

HERE = Path(__file__).resolve().parent
EMU_INCLUDE = HERE / "include"
WAVEFRONT = {"gfx90a": 64, "gfx940": 64, "gfx942": 64, "gfx950": 64, "gfx1100": 32}
CXXFLAGS = ["-std=c++20", "-O1", "-pthread", "-fPIC", "-shared", "-fvisibility=hidden",
            # the generated code moves data through reinterpret_cast'ed vector types
            "-fno-strict-aliasing", "-Wno-unknown-pragmas", "-Wno-psabi"]
TIMEOUT_S = 120.0

try:
    import ml_dtypes
    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bfloat16 arrays then travel as their uint16 bits
    BFLOAT16 = None

NUMPY_DTYPE = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8,
               "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
CTYPES_SCALAR = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int8": ctypes.c_int8,
                 "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
                 "uint8": ctypes.c_uint8, "uint32": ctypes.c_uint32, "bool": ctypes.c_bool}

PROBE = """
#include <atomic>
#include <barrier>
extern "C" int probe() { std::barrier<> b(1); b.arrive_and_wait(); _Float16 h = (_Float16)1.5f; int x = 0;
                         std::atomic_ref<int>(x).fetch_add(1); return (int)(float)h + x; }
"""


def cxx() -> str:
    return os.environ.get("CXX", "g++")


@functools.lru_cache(maxsize=None)
def toolchain_problem() -> str | None:
    """Why the emulation cannot be built here (None when it can): g++ needs C++20's <barrier>
    and std::atomic_ref, and _Float16."""
    with tempfile.TemporaryDirectory(prefix="tilelang-hip-emu-") as d:
        src = Path(d) / "probe.cc"
        src.write_text(PROBE)
        try:
            done = subprocess.run([cxx(), *CXXFLAGS, str(src), "-o", str(Path(d) / "probe.so")],
                                  capture_output=True, text=True)
        except OSError as e:
            return f"no C++ compiler ({cxx()}): {e}"
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
            return (f"{cxx()} cannot build the emulation (C++20 <barrier> / std::atomic_ref and _Float16 "
                    f"needed): {first}")
    return None


def _cache_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"tilelang-hip-emulation-{os.getuid()}"
    d.mkdir(exist_ok=True)
    return d


def _headers_digest() -> str:
    h = hashlib.sha256()
    for root in (EMU_INCLUDE, Path(_include_dir()) / "tl"):
        for path in sorted(root.rglob("*.h")):
            h.update(str(path).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def host_source(source: str, infos) -> str:
    """The generated source as host C++: its dynamic LDS declaration refers to the stand-in
    runtime's buffer (a static local cannot be extern), and one exported launcher per kernel."""
    assert source.count("extern __shared__") <= len(infos), "one dynamic LDS declaration per kernel"
    text = source.replace("extern __shared__", "extern")
    text += '\n#include "tl_emu/launch.h"\n'
    for info in infos:
        name = info["name"]
        text += (f'extern "C" __attribute__((visibility("default"))) int tl_emu_launch_{name}(const unsigned* grid, '
                 f'const unsigned* block, void** args, size_t dynamic_shared, double timeout_s) {{\n'
                 f'  return tl_emu::launch({name}, grid, block, args, dynamic_shared, timeout_s);\n}}\n')
    return text


def compile_library(text: str, arch: str) -> Path:
    key = hashlib.sha256((text + arch + cxx() + " ".join(CXXFLAGS) + _headers_digest()).encode()).hexdigest()[:24]
    out = _cache_dir() / f"{key}.so"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(prefix="tilelang-hip-emu-") as d:
        src = Path(d) / "kernel.cc"
        src.write_text(text)
        tmp = Path(d) / "kernel.so"
        cmd = [cxx(), *CXXFLAGS, f"-DTL_EMU_WAVE_SIZE={WAVEFRONT[arch]}", f"-I{EMU_INCLUDE}", f"-I{_include_dir()}",
               str(src), "-o", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"g++ could not compile the emulated kernel:\n{' '.join(cmd)}\n" +
                               "\n".join(done.stderr.splitlines()[:80]))
        os.replace(tmp, out)  # atomic: parallel runs never load a half-written library
    return out


class EmulationError(AssertionError):
    """A run found something a device would compute garbage from (e.g. WMMA operand copies that differ)."""


class EmulatedKernel:
    """A prim_func lowered and generated for `hip -arch=<arch>`, compiled for the host; calling
    it with numpy arrays (one per tensor parameter, in order) runs every kernel of it."""

    def __init__(self, func, arch: str):
        if arch not in WAVEFRONT:
            raise ValueError(f"no wavefront size known for {arch}")
        self.arch = arch
        target = f"hip -arch={arch}"
        lowered = _C.lower(func.handle, target)
        self.report = lowered.lowering_report()
        self.source = _C.codegen(lowered, target)
        self.infos = _C.cuda_kernel_infos(lowered)
        self.library = ctypes.CDLL(str(compile_library(host_source(self.source, self.infos), arch)))
        self.library.tl_emu_error.restype = ctypes.c_char_p

    def __call__(self, *values):
        for info in self.infos:
            fn = getattr(self.library, f"tl_emu_launch_{info['name']}")
            fn.restype = ctypes.c_int
            keep, slots = [], []
            for kind, name, dtype, index in info["params"]:
                value = values[index]
                if kind == "buffer":
                    self._check_array(name, dtype, value)
                    cell = ctypes.c_void_p(value.ctypes.data)
                elif kind == "scalar":
                    cell = CTYPES_SCALAR[dtype](value)
                else:
                    raise NotImplementedError(f"parameter kind {kind} ({name}) is not emulated")
                keep.append(cell)
                slots.append(ctypes.cast(ctypes.pointer(cell), ctypes.c_void_p))
            grid = [int(g) for g in info["grid"]]
            block = [int(b) for b in info["block"]]
            args = (ctypes.c_void_p * max(1, len(slots)))(*slots)
            status = fn((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), args,
                        ctypes.c_size_t(int(info["dynamic_shared_bytes"])), ctypes.c_double(TIMEOUT_S))
            if status != 0:
                raise EmulationError(f"{info['name']} on {self.arch}: {self.library.tl_emu_error().decode()}")

    @staticmethod
    def _check_array(name, dtype, value):
        if not isinstance(value, np.ndarray) or not value.flags.c_contiguous:
            raise TypeError(f"argument '{name}' must be a C-contiguous numpy array")
        if dtype == "bfloat16":
            ok = value.dtype == BFLOAT16 or value.dtype == np.uint16
        else:
            ok = value.dtype == NUMPY_DTYPE.get(dtype)
        if not ok:
            raise TypeError(f"argument '{name}' is {dtype} in the kernel, {value.dtype} here")
