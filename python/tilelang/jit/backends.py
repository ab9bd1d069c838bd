"""Per-target compilation and launch: how a lowered kernel becomes something to call.

A backend builds an executable for a cache key (loading it from the disk cache when it is
there) and runs it with the checked arguments: buffer pointers, scalar values and the
values of the shape variables.
"""
from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path

from .. import _C
from ..errors import TileLangError
from . import cache


@contextlib.contextmanager
def _build_dir(key: str):
    """(directory, shared): where a kernel is looked up and built. With the cache on, its
    entry, held under the entry's lock (shared=True); else, or when the lock cannot be had,
    a directory of this build's own."""
    if cache.enabled():
        with cache.entry_lock(key) as held:
            if held:
                d = cache.entry_dir(key)
                d.mkdir(parents=True, exist_ok=True)
                yield d, True
                return
    yield Path(tempfile.mkdtemp(prefix="tilelang-")), False


# The pass configs that switch a lowering feature off, as the compiler core knows them.
SWITCHES = ("tl.disable_wgmma", "tl.disable_tma_lower", "tl.disable_warp_specialized", "tl.enable_warpgroup_pingpong",
            "tl.disable_wgmma_overlap", "tl.disable_producer_tile_loads")


def switches(pass_configs) -> list:
    """The names of the switch pass configs that are set (truthy)."""
    return [k for k in SWITCHES if (pass_configs or {}).get(k)]


# ptxas' notes on the wgmma code it made (in the compiler's log even without -v): C7510-C7516
# say it serialised the wgmma instructions (each waited for before the next), C7517 that it
# waited for the groups in flight before registers one of them wrote were used.
_PTXAS_SERIALISED = re.compile(r"\(C751[0-6]\) Potential Performance Loss: wgmma\.mma_async instructions are "
                               r"serialized due to (.*?)(?: (?:for|in) (?:the )?function '[^']*')?\s*$")
_PTXAS_WAIT = re.compile(r"\(C7517\) warpgroup\.wait is injected")


_PTXAS_FUNCTION = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
# The lowering's estimate of the registers a thread needs (every per-thread array at once);
# where ptxas has said what went to local memory, its figures replace the estimate.
_ESTIMATED_SPILL = re.compile(r"each thread holds \d+ bytes of arrays \[slower path: more than the \d+ registers")


def ptxas_local_memory(log: str) -> dict:
    """{kernel: (bytes of stack frame, of spill stores, of spill loads)} from ptxas' resource
    lines: what each thread keeps in local memory (arrays ptxas could not keep in registers,
    and the registers it spilled)."""
    frames, function = {}, None
    for raw in log.splitlines():
        if m := _PTXAS_FUNCTION.search(raw):
            function = m.group(1)
        elif (m := _PTXAS_FRAME.search(raw)) and function:
            frames[function] = tuple(int(g) for g in m.groups())
    return frames


def with_ptxas_spills(report: str, log: str, where: str) -> str:
    """The lowering report with the estimate of spilled registers replaced by what ptxas did."""
    frames = ptxas_local_memory(log)
    if not frames:
        return report
    lines = [line for line in report.splitlines() if not _ESTIMATED_SPILL.search(line)]
    for function, (frame, stores, loads) in frames.items():
        if frame or stores or loads:
            lines.append(f"{where}: ptxas keeps {frame} bytes of each thread of {function} in local memory "
                         f"({stores} bytes of spill stores, {loads} of spill loads) [slower path: the thread's "
                         "arrays and temporaries do not fit its registers; smaller tiles, more threads or fewer "
                         "fragments alive together avoid it]")
    return "".join(line + "\n" for line in lines)


def ptxas_notes(log: str, where: str) -> list:
    """Lowering-report lines for ptxas' notes on the wgmma code in a compiler log; `where` is the
    kernel's file:line."""
    lines = []
    for raw in log.splitlines():
        if m := _PTXAS_SERIALISED.search(raw):
            lines.append(f"{where}: ptxas serialised the kernel's wgmma instructions ({m.group(1)}) [slower path: "
                         "each wgmma waits for the one before; fewer registers live across the products (smaller "
                         "tiles, fewer fragments) or accumulators written only by T.gemm avoid it]")
        elif _PTXAS_WAIT.search(raw):
            lines.append(f"{where}: ptxas waits for the wgmma groups in flight before registers one of them wrote "
                         "are used (a wait the compiler did not place)")
    return list(dict.fromkeys(lines))


class CpuExecutable:
    """A shared object built by the host compiler; one entry taking a pointer array."""

    def __init__(self, prim_func, lib_path: Path, source: str, report: str):
        self.module = _C.HostModule(str(lib_path))
        self.entry = self.module.entry(f"{prim_func.name}_entry")
        self.source = source
        self.report = report

    def lowering_report(self) -> str:
        return self.report

    def run(self, param_ptrs, shape_ptrs, stream=None):
        self.entry(param_ptrs + shape_ptrs)


class CpuBackend:
    device = "cpu"

    def compiler_id(self) -> str:
        return _C.host_compiler_id()

    FILES = ("kernel.so", "kernel.cpp", "report.txt")  # of a cache entry

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        with _build_dir(key) as (d, shared):
            if shared and cache.lookup(key, self.FILES) is not None:
                try:
                    return CpuExecutable(prim_func, d / "kernel.so", (d / "kernel.cpp").read_text(),
                                         (d / "report.txt").read_text()), "disk"
                except (TileLangError, OSError):
                    pass  # built again below
            lowered = _C.lower(prim_func.handle, target, switches(pass_configs))
            source = _C.codegen(lowered, target)
            lib_path = d / "kernel.so"
            # The compiler driver writes the library and its source (kernel.cpp) beside it,
            # each under a temporary name renamed into place.
            _C.compile_host(source, str(lib_path), include_dir, flags)
            report = lowered.lowering_report()
            cache.write_atomic(d / "report.txt", report)
            if shared:
                cache.store_meta(key, {"name": prim_func.name, "target": target}, self.FILES)
            return CpuExecutable(prim_func, lib_path, source, report), None


def _compile_call():
    """(file, line) of the compile call being served (tilelang.compile sets the span), or
    (None, None)."""
    file, line = _C.get_span()
    return (file, line) if file else (None, None)


def _extent(expr, shape_values) -> int:
    return expr.value if expr.kind == "IntImm" else _C.eval_int(expr, shape_values)


class _TensorMapParam:
    """A kernel's TMA tensor map of one global buffer, encoded at launch for the buffer's
    address and the shape and strides (elements) it is declared with, which the call has
    checked the argument against. Dimensions of extent 1 take the declared stride too, since
    the kernel indexes the buffer by its declaration. Encoded maps are kept by (position,
    address, shape, strides), so repeated calls with the same tensors encode nothing."""

    _MAX_CACHED = 4096  # maps of tensors that come and go; dropped all at once past this

    def __init__(self, position, param, func_params):
        _, self.name, self.dtype, self.index, box, self.swizzle = param[:6]
        self.position = position
        self.box = list(box)
        declared = func_params[self.index]
        self._shape = list(declared.shape)
        self._strides = list(declared.strides or [])
        # A layout by hand that reorders the dimensions stores the tensor row-major in that
        # order: the map describes the reordered shape (the box is already in that order).
        order = list(param[6]) if len(param) > 6 else []
        if order:
            self._shape = [self._shape[d] for d in order]
            self._strides = []
        self._static = None  # (shape, strides) when no shape variable appears in them
        if all(e.kind == "IntImm" for e in self._shape + self._strides):
            self._static = self._layout({})
        self._cache = {}

    def _layout(self, shape_values):
        shape = tuple(_extent(e, shape_values) for e in self._shape)
        if self._strides:
            return shape, tuple(_extent(e, shape_values) for e in self._strides)
        strides, step = [], 1
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        return shape, tuple(reversed(strides))

    _EMPTY = bytes(128)

    def encode(self, address, shape_values) -> bytes:
        shape, strides = self._static or self._layout(shape_values)
        if 0 in shape:
            # An empty tensor has no box inside it: the pipeline that would read it runs no
            # iteration (its trip count or grid comes from that extent), so no map is read.
            return self._EMPTY
        key = (self.position, address, shape, strides)
        found = self._cache.get(key)
        if found is None:
            found = _C.encode_tensor_map(self.dtype, address, list(shape), list(strides), self.box, self.swizzle)
            if len(self._cache) >= self._MAX_CACHED:
                self._cache.clear()
            self._cache[key] = found
        return found


class CudaExecutable:
    """A cubin loaded into the current context, with the launch shape of each kernel."""

    def __init__(self, infos, cubin: bytes, source: str, report: str, func_params=()):
        self.module = _C.CudaModule(cubin)
        self.source = source
        self.report = report
        self.kernels = []
        self.pointer_params = {p[3]: p[1] for info in infos for p in info["params"] if p[0] == "buffer"}
        for info in infos:
            fn = self.module.function(info["name"])
            smem = int(info["dynamic_shared_bytes"])
            if smem > 0:  # static + dynamic above 48 KiB needs the opt-in, so always opt in
                fn.set_max_dynamic_shared_memory(smem)
            self.kernels.append((fn, info))
        # What each launch needs, decided once: a grid without shape variables is constant.
        self._launches = []
        for fn, info in self.kernels:
            try:
                grid = [_C.eval_int(g, {}) for g in info["grid"]]
            except Exception:  # names a shape variable
                grid = None
            params = [p for p in info["params"] if p[0] != "tensormap"]
            maps = [_TensorMapParam(pos, p, func_params) for pos, p in enumerate(info["params"])
                    if p[0] == "tensormap"]
            self._launches.append((fn, info, params, maps, grid, list(info["block"]),
                                   int(info["dynamic_shared_bytes"])))

    def lowering_report(self) -> str:
        lines = [self.report.rstrip("\n")] if self.report.strip() else []
        for fn, info in self.kernels:
            a = fn.attributes()
            block = "x".join(str(b) for b in info["block"])
            spills = f", {a['local_bytes']} bytes of local memory (spills)" if a["local_bytes"] else ", no spills"
            lines.append(f"{info['name']}: {block} threads, {a['registers']} registers{spills}, shared memory "
                         f"{info['dynamic_shared_bytes']} bytes dynamic + {info['static_shared_bytes']} static")
        return "\n".join(lines) + "\n"

    def run(self, values, shape_values, stream):
        """values: {param index: pointer or scalar}; shape_values: {name: int}."""
        for index, name in self.pointer_params.items():
            if values[index] % 16:
                raise ValueError(f"argument '{name}' is not 16-byte aligned (address {values[index]:#x}); "
                                 "kernels use vector accesses: pass a tensor that starts on an aligned "
                                 "address (e.g. .clone())")
        for fn, info, params, maps, grid, block, smem in self._launches:
            args = [("handle", values[index]) if kind == "buffer" else
                    (dtype, values[index]) if kind == "scalar" else ("int64", shape_values[name])
                    for kind, name, dtype, index in params]
            if grid is None:  # depends on dynamic shapes
                grid = [_C.eval_int(g, shape_values) for g in info["grid"]]
            if min(grid) <= 0:
                continue  # an empty grid (a dynamic size of 0): nothing to launch
            if maps:  # tensor maps come last, after buffers, scalars and shape variables
                args += [("tensormap", m.encode(values[m.index], shape_values)) for m in maps]
            fn.launch(grid, block, smem, stream, args, info.get("programmatic_launch", False),
                      info.get("cooperative_launch", False))


class CudaBackend:
    device = "cuda"

    def compiler_id(self) -> str:
        from ..engine.callback import cuda_postproc_identity
        return _C.nvrtc_id() + cuda_postproc_identity()

    FILES = ("kernel.cubin", "kernel.cu", "ptxas.log")  # of a cache entry

    @staticmethod
    def _report(report: str, log: str, prim_func) -> str:
        """The lowering report with what ptxas said of the code: its spills, its notes."""
        where = f"{prim_func.file}:{prim_func.line}"
        return with_ptxas_spills(report, log, where) + "".join(line + "\n" for line in ptxas_notes(log, where))

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        lowered = _C.lower(prim_func.handle, target, switches(pass_configs))
        infos = _C.cuda_kernel_infos(lowered)
        report = lowered.lowering_report()
        with _build_dir(key) as (d, shared):
            if shared and cache.lookup(key, self.FILES) is not None:
                try:
                    return CudaExecutable(infos, (d / "kernel.cubin").read_bytes(), (d / "kernel.cu").read_text(),
                                          self._report(report, (d / "ptxas.log").read_text(), prim_func),
                                          prim_func.params), "disk"
                except (TileLangError, OSError):
                    pass  # built again below
            from ..engine.callback import apply_cuda_postproc
            source = apply_cuda_postproc(_C.codegen(lowered, target), target)
            arch = target.split("-arch=")[1].split()[0]
            # tl.enable_fast_math: approximate division, square roots and exponentials (off by
            # default, as upstream).
            fast_math = bool((pass_configs or {}).get("tl.enable_fast_math"))
            cubin, log = _C.nvrtc_compile(source, f"{prim_func.name}.cu", arch, [include_dir], fast_math, True)
            cache.write_atomic(d / "kernel.cu", source)
            cache.write_atomic(d / "kernel.cubin", cubin)
            cache.write_atomic(d / "ptxas.log", log)
            if shared:
                cache.store_meta(key, {"name": prim_func.name, "target": target}, self.FILES)
            return CudaExecutable(infos, cubin, source, self._report(report, log, prim_func), prim_func.params), None


def backend_for(target: str, prim_func=None):
    if prim_func is not None and prim_func.source_kernel is not None:  # T.CUDASourceCodeKernel
        from .source_kernel import SourceKernelBackend
        return SourceKernelBackend(prim_func, target)
    if target.startswith("cuda"):
        return CudaBackend()
    if target.startswith("hip"):
        from .hip import HipBackend
        return HipBackend()
    if target.startswith("webgpu"):
        from .webgpu import WebGPUBackend
        return WebGPUBackend()
    return CpuBackend()


def resolve_target(target) -> str:
    """The canonical target string; "auto" is a GPU when one is usable, else the CPU, and
    "cuda" without an architecture takes the device's."""
    text = target if isinstance(target, str) else str(target)
    if text.strip() == "auto":  # TILELANG_TARGET, as upstream, else the device there is
        import os
        text = os.environ.get("TILELANG_TARGET", "").strip() or "auto"
    if text.strip() == "auto":
        text = "cuda" if _C.cuda_device_available() else "cpu"
    canonical = _C.normalise_target(text)
    if canonical == "cuda":
        if not _C.cuda_device_available():
            from ..errors import TileLangUnsupportedError
            raise TileLangUnsupportedError(
                f"target 'cuda' needs a CUDA device ({_C.cuda_unavailable_reason()})", *_compile_call(),
                "give an architecture (target=\"cuda -arch=sm_90a\") to generate code without a device, "
                "or use target=\"cpu\"")
        canonical = f"cuda -arch={_C.cuda_device_arch(0)}"
    if canonical == "hip":
        from ..errors import TileLangUnsupportedError
        raise TileLangUnsupportedError(
            "target 'hip' needs an AMD architecture (the wavefront is 64 lanes on CDNA, 32 on RDNA)", *_compile_call(),
            "give one, e.g. target=\"hip -arch=gfx942\" (MI300) or \"hip -arch=gfx1100\" (RDNA 3)")
    return canonical
