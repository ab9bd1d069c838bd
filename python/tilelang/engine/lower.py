"""tilelang.engine.lower: a kernel lowered for a target and its generated source, without
building it (no device or compiler run is needed)."""
from __future__ import annotations

from .. import _C
from ..errors import TileLangUnsupportedError
from .param import CompiledArtifact


def lower(func_or_mod, target="auto", target_host=None, runtime_only=False, enable_host_codegen=False,
          enable_device_compile=False):
    """A CompiledArtifact of func_or_mod (a @T.prim_func) lowered for target: device_mod is
    the lowered IR (print it with .script()), kernel_source the generated CUDA / C++ (the
    CUDA source itself for a T.CUDASourceCodeKernel), params the parameters. A target such
    as "cuda -arch=sm_90a" needs no GPU. Building a runnable module is tilelang.compile's
    work: enable_host_codegen / enable_device_compile are not supported here."""
    from ..ir import PrimFunc
    from ..jit.backends import resolve_target
    from .callback import apply_cuda_postproc
    if not isinstance(func_or_mod, PrimFunc):
        raise TypeError(f"tilelang.engine.lower expects a @T.prim_func, got {type(func_or_mod).__name__}")
    if enable_host_codegen or enable_device_compile:
        raise TileLangUnsupportedError("tilelang.engine.lower builds no host or device module",
                                       hint="use tilelang.compile(func, target=...) for a runnable kernel")
    target = resolve_target(target)
    func = func_or_mod
    if func.source_kernel is not None:
        if not target.startswith("cuda"):
            raise TileLangUnsupportedError(f"T.CUDASourceCodeKernel in '{func.name}' needs the cuda target, not "
                                           f"'{target}'", func.file, func.line)
        return CompiledArtifact(None, func.handle, list(func.params),
                                apply_cuda_postproc(func.source_kernel.source, target))
    from ..jit.backends import switches
    lowered = _C.lower(func.handle, target, switches({}))
    if target.startswith("webgpu"):
        source = _C.codegen_wgsl(lowered, target, False)
    else:
        source = _C.codegen(lowered, target)
        if target.startswith("cuda"):
            source = apply_cuda_postproc(source, target)
    return CompiledArtifact(None, lowered, list(func.params), source, None, lowered.lowering_report())
