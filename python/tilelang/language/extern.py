"""Embedded CUDA: T.CUDASourceCodeKernel, a kernel whose body is CUDA source, launched
through the same JIT, cache and argument checks as any other kernel. The finer-grained
forms (T.call_extern, T.import_source, T.access_ptr, T.reinterpret) need support in the
compiler core that it does not have yet; they are rejected with the reason."""
from __future__ import annotations

import os
import re

from ..errors import TileLangSyntaxError, TileLangTypeError, TileLangUnsupportedError
from ..parser import builder as _builder

_GLOBAL_FN = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                        r"([A-Za-z_]\w*)\s*\(")


class SourceKernel:
    """What T.CUDASourceCodeKernel records on its function."""

    __slots__ = ("grid", "block", "source", "entry_name")

    def __init__(self, grid, block, source, entry_name):
        self.grid, self.block, self.source, self.entry_name = grid, block, source, entry_name


def load_cuda_source(source_code_or_path) -> str:
    """The CUDA source: the file's contents when the argument names an existing file, else
    the argument itself (source text is recognised by a newline, `__global__`, `extern "C"`
    or `#include`; anything else that looks like a path is a missing file)."""
    source = os.fspath(source_code_or_path)
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source_code_or_path must be a non-empty source string or source path")
    expanded = os.path.expanduser(source)
    if os.path.isfile(expanded):
        with open(expanded, encoding="utf-8") as f:
            return f.read()
    if any(marker in source for marker in ("\n", "__global__", 'extern "C"', "#include")):
        return source
    if os.path.sep in source or source.endswith((".cu", ".cuh", ".cuda", ".cpp", ".cc", ".c")):
        raise FileNotFoundError(f"CUDA source file not found: {source}")
    return source


def global_functions(source: str):
    return _GLOBAL_FN.findall(source)


def _extents(values, what, limit=3):
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    if not 1 <= len(items) <= limit:
        raise _builder.error(TileLangTypeError, f"T.CUDASourceCodeKernel: {what} takes 1 to {limit} extents, "
                             f"got {len(items)}")
    return items + [1] * (3 - len(items))


def CUDASourceCodeKernel(*blocks, threads=None, source_code_or_path, entry_name="main_kernel", cluster_dims=None,
                         prelude=None):
    """Launches the `__global__` function entry_name of the given CUDA source (inline text
    or a file) on a grid of `blocks` with `threads` threads per block (128 when omitted).

    The entry takes the function's parameters in order (a buffer as a pointer to its
    element type, a scalar by value), then the values of the shape variables (T.dynamic)
    the parameters' shapes use, as 32-bit ints, in the order they first appear. It must be
    declared extern "C" so that it is found by its name."""
    b = _builder.require("T.CUDASourceCodeKernel")
    if b.kernels or len(b.frames) != 1:
        raise _builder.error(TileLangSyntaxError, "T.CUDASourceCodeKernel is used inside a kernel body or a loop",
                             "it is the whole body of its function")
    if getattr(b, "source_kernel", None) is not None:
        raise _builder.error(TileLangSyntaxError, "a function launches T.CUDASourceCodeKernel twice",
                             "write one function per source kernel")
    if cluster_dims is not None:
        raise _builder.error(TileLangUnsupportedError, "T.CUDASourceCodeKernel: cluster_dims is not supported yet",
                             "launch without a cluster, or write the kernel in the DSL")
    if not blocks:
        raise _builder.error(TileLangTypeError, "T.CUDASourceCodeKernel needs at least one grid extent")
    if not isinstance(entry_name, str) or not entry_name.strip():
        raise _builder.error(TileLangTypeError, "T.CUDASourceCodeKernel: entry_name must be a non-empty string")
    source = load_cuda_source(source_code_or_path)
    if prelude is not None:
        source = prelude + "\n" + source
    names = global_functions(source)
    if not names:
        raise _builder.error(TileLangTypeError, "T.CUDASourceCodeKernel expects external CUDA source to declare at "
                             "least one __global__ kernel", 'declare the entry: extern "C" __global__ void name(...)')
    if entry_name not in names:
        raise _builder.error(TileLangTypeError, f"T.CUDASourceCodeKernel: entry `{entry_name}` is not a __global__ "
                             f"kernel of the provided CUDA source. Available entries: {', '.join(names)}",
                             "pass entry_name= one of them")
    grid = _extents(blocks, "the grid")
    block = [int(t) for t in _extents(128 if threads is None else threads, "threads")]
    b.source_kernel = SourceKernel(grid, block, source, entry_name)


def _not_yet(name, instead):
    def reject(*args, **kwargs):
        raise _builder.error(TileLangUnsupportedError, f"T.{name} is not supported by this compiler yet", instead)
    reject.__name__ = name
    reject.__doc__ = f"Not supported yet: {instead}"
    return reject


call_extern = _not_yet("call_extern", "calls of external device functions need code generation support that is "
                       "missing; put the whole kernel in CUDA source with T.CUDASourceCodeKernel")
import_source = _not_yet("import_source", "source imported into generated code is not supported; put the whole "
                         "kernel in CUDA source with T.CUDASourceCodeKernel")
access_ptr = _not_yet("access_ptr", "raw pointers into buffers exist only for external calls, which are not "
                      "supported; use T.CUDASourceCodeKernel for hand-written CUDA")
reinterpret = _not_yet("reinterpret", "bit casts between types are not in the IR yet; use T.cast for a value "
                       "conversion")
