"""Building and launching a T.CUDASourceCodeKernel: the user's CUDA source compiled by
NVRTC (with the package's headers on the include path), cached like generated kernels,
and launched with the checked call's arguments.

The entry's parameters: the function's parameters in order (buffers as pointers, scalars
by value), then the shape variables' values as 32-bit ints, in the order the parameters'
shapes first use them."""
from __future__ import annotations

import hashlib

from .. import _C
from ..errors import TileLangError, TileLangUnsupportedError
from . import cache


def compile_cubin(prim_func, target: str, include_dir: str, pass_configs=None) -> tuple:
    """(source after the CUDA post-processing callback, cubin) for target."""
    from ..engine.callback import apply_cuda_postproc
    spec = prim_func.source_kernel
    source = apply_cuda_postproc(spec.source, target)
    arch = target.split("-arch=")[1].split()[0]
    fast_math = bool((pass_configs or {}).get("tl.enable_fast_math"))
    return source, _C.nvrtc_compile(source, f"{spec.entry_name}.cu", arch, [include_dir], fast_math)


class SourceKernelExecutable:
    def __init__(self, prim_func, cubin: bytes, source: str):
        spec = prim_func.source_kernel
        self.source = source
        self.module = _C.CudaModule(cubin)
        self.function = self.module.function(spec.entry_name)
        self.params = prim_func.params
        self.shape_vars = [(v.name, v.dtype) for v in prim_func.handle.shape_vars()]
        self.grid = spec.grid
        self.block = spec.block
        self.entry_name = spec.entry_name

    def lowering_report(self) -> str:
        a = self.function.attributes()
        return (f"{self.entry_name}: CUDA source kernel, {'x'.join(map(str, self.block))} threads, "
                f"{a['registers']} registers\n")

    def run(self, values, shape_values, stream):
        args = [("handle", values[i]) if p.kind == "buffer" else (p.dtype, values[i])
                for i, p in enumerate(self.params)]
        args += [(dtype, shape_values[name]) for name, dtype in self.shape_vars]
        grid = [g if isinstance(g, int) else _C.eval_int(g, shape_values) for g in self.grid]
        if min(grid) <= 0:
            return  # an empty grid (a dynamic size of 0)
        self.function.launch(grid, self.block, 0, stream, args)


class SourceKernelBackend:
    device = "cuda"

    def __init__(self, prim_func, target: str):
        if not target.startswith("cuda"):
            raise TileLangUnsupportedError(
                f"T.CUDASourceCodeKernel in '{prim_func.name}' needs the cuda target, not '{target}'",
                prim_func.file, prim_func.line, "compile it with target=\"cuda\" on a machine with a CUDA GPU")
        spec = prim_func.source_kernel
        self._source_hash = hashlib.sha256(f"{spec.entry_name}\0{spec.source}".encode()).hexdigest()[:16]

    def compiler_id(self) -> str:
        from ..engine.callback import cuda_postproc_identity
        # The IR of a source kernel is an empty body: the source is what identifies it.
        return f"{_C.nvrtc_id()} source {self._source_hash}{cuda_postproc_identity()}"

    FILES = ("kernel.cubin", "kernel.cu")  # of a cache entry

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        from .backends import _build_dir
        with _build_dir(key) as (d, shared):
            if shared and cache.lookup(key, self.FILES) is not None:
                try:
                    return SourceKernelExecutable(prim_func, (d / "kernel.cubin").read_bytes(),
                                                  (d / "kernel.cu").read_text()), "disk"
                except (TileLangError, OSError):
                    pass  # built again below
            source, cubin = compile_cubin(prim_func, target, include_dir, pass_configs)
            cache.write_atomic(d / "kernel.cu", source)
            cache.write_atomic(d / "kernel.cubin", cubin)
            if shared:
                cache.store_meta(key, {"name": prim_func.name, "target": target}, self.FILES)
            return SourceKernelExecutable(prim_func, cubin, source), None
