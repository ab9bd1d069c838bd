"""Embedded CUDA: T.CUDASourceCodeKernel, a kernel whose body is CUDA source, launched
through the same JIT, cache and argument checks as any other kernel; and the finer-grained
forms inside a DSL kernel: T.import_source (source placed before the kernel),
T.call_extern (a call of a function it defines), T.access_ptr (an element's address to
pass to it), T.reinterpret (a bit cast) and T.evaluate."""
from __future__ import annotations

import os
import re

from .. import _C
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


def call_extern(*args, dtype=None):
    """A call of the device (or, on the CPU target, C++) function `func_name`, which the
    program brings (T.import_source, T.Kernel(prelude=), or a header of the toolchain), with
    `args`; its value has `dtype` ("handle" or "void" for a call made for its effect, used
    as a statement). ``T.call_extern(dtype, func_name, *args)``, or, as upstream also
    accepts, ``T.call_extern(func_name, *args, dtype=dtype)``."""
    b = _builder.require("T.call_extern")
    if dtype is None:
        if len(args) < 2:
            raise _builder.error(TileLangTypeError, "T.call_extern takes a dtype and a function name, then the "
                                 "arguments: T.call_extern(dtype, func_name, *args)")
        dtype, func_name, args = args[0], args[1], args[2:]
    else:
        if not args:
            raise _builder.error(TileLangTypeError, "T.call_extern: the function name is missing")
        func_name, args = args[0], args[1:]
    if not isinstance(func_name, str) or not func_name.isidentifier() and "::" not in func_name:
        raise _builder.error(TileLangTypeError, f"T.call_extern: the function name must be an identifier, got "
                             f"{func_name!r}")
    return _C.call_typed(_dtype_name(dtype), "call_extern", [_C.string(func_name)] + [_as_expr(a) for a in args])


def import_source(source=None):
    """Source text (CUDA on cuda targets, C++ on the CPU) placed before the generated kernel,
    where T.call_extern can call what it defines. None imports nothing."""
    b = _builder.require("T.import_source")
    if source is None:
        return
    if not isinstance(source, str):
        raise _builder.error(TileLangTypeError, f"T.import_source takes source text, got {type(source).__name__}")
    b.prelude.append(source)


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """The address of an element (A[i, j]), of a region's first element (A[i:, j:]) or of a
    buffer's first element, plus `offset` elements: a pointer to pass to T.call_extern.
    access_type ("r", "w", "rw" or 1, 2, 3) and the extents say what the callee touches
    (accepted as upstream's; the compiler does not use them)."""
    from ..ir import Buffer, Region, is_expr
    b = _builder.require("T.access_ptr")
    if access_type not in ("r", "w", "rw", 1, 2, 3):
        raise _builder.error(TileLangTypeError, f"T.access_ptr: access_type must be 'r', 'w', 'rw' (or 1, 2, 3), "
                             f"got {access_type!r}")
    if ignore_last_ndim:
        raise _builder.error(TileLangUnsupportedError, "T.access_ptr: ignore_last_ndim is not supported",
                             "take the address of the element you mean (A[i, 0])")
    if isinstance(base, Buffer):
        load = base[tuple([0] * base.ndim)] if base.ndim > 1 else base[0]
    elif isinstance(base, Region):
        load = base.buffer[tuple(m for m, _ in base.ranges)] if len(base.ranges) > 1 else base.buffer[base.ranges[0][0]]
    elif is_expr(base) and base.kind == "BufferLoad":
        load = base
    else:
        raise _builder.error(TileLangTypeError, f"T.access_ptr: expected a buffer, a region or an element, got "
                             f"{type(base).__name__}")
    return _C.call_typed("handle", "address_of", [load, _as_expr(offset)])


def address_of(element):
    """The address of a buffer element (A[i, j]): upstream's T.address_of, the pointer
    T.access_ptr(A[i, j]) gives."""
    from ..ir import is_expr
    _builder.require("T.address_of")
    if not (is_expr(element) and element.kind == "BufferLoad"):
        raise _builder.error(TileLangTypeError, f"T.address_of: expected a buffer element such as A[i, j], got "
                             f"{type(element).__name__}")
    return access_ptr(element, "rw")


def reinterpret(*args, dtype=None):
    """The bits of a value as another type of the same width: T.reinterpret(value, dtype)
    (upstream's order; T.reinterpret(dtype, value) as in TVM and T.reinterpret(value,
    dtype=...) are accepted too)."""
    from ..ir import is_expr
    _builder.require("T.reinterpret")
    if dtype is not None:
        args = args + (dtype,)
    if len(args) != 2:
        raise _builder.error(TileLangTypeError, f"T.reinterpret takes a value and a dtype, got {len(args)} arguments")
    a, b = args
    value, dtype = (b, a) if _is_dtype(a) and not _is_dtype(b) else (a, b)
    if not _is_dtype(dtype):
        raise _builder.error(TileLangTypeError, f"T.reinterpret: {dtype!r} is not a dtype")
    return _C.call_typed(_dtype_name(dtype), "reinterpret", [_as_expr(value)])


def evaluate(value):
    """The call `value` made for its effect, as a statement (upstream's T.evaluate)."""
    b = _builder.require("T.evaluate")
    from ..ir import is_expr
    if not is_expr(value):
        return
    b.emit(_C.evaluate(value))


def _is_dtype(x):
    try:
        _dtype_name(x)
        return True
    except Exception:
        return False


def _dtype_name(dtype):
    from .types import dtype as _dtype
    name = str(_dtype(dtype)) if not isinstance(dtype, str) else dtype
    if name == "void":
        return "void"
    _C.const(0, name)  # raises for an unknown dtype
    return name


def _as_expr(v):
    from ..ir import is_expr
    if is_expr(v):
        return v
    if isinstance(v, bool):
        return _C.const(int(v), "bool")
    if isinstance(v, int):
        return _C.const(v, "int32" if -2**31 <= v < 2**31 else "int64")
    if isinstance(v, float):
        return _C.const(v, "float32")
    if isinstance(v, str):
        return _C.string(v)
    raise _builder.error(TileLangTypeError, f"a value of Python type {type(v).__name__!r} cannot be passed here")
