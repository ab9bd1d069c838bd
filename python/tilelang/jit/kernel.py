"""JITKernel: a compiled kernel you call like a function."""
from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import numpy as np

from .. import _C
from ..dtypes import numpy_dtype
from ..errors import TileLangPerformanceWarning
from . import cache
from .adapter import Binder, allocate, check_scalar, dim_spec, scalar_rule, shape_text, view_of
from .backends import backend_for, resolve_target

_PACKAGE_VERSION = "0.1.0"
_memory_cache = {}


def _include_dir() -> str:
    here = Path(__file__).resolve().parent.parent
    installed = here / "include"
    if (installed / "tl").is_dir():
        return str(installed)
    return str(here.parent.parent / "include")  # a source checkout


_core_id = None


def _core_identity() -> str:
    """Identifies the compiler core and device headers in use, so that a rebuilt compiler
    never reuses kernels an older one produced: the extension's size and modification
    time, and a hash of the headers generated code includes."""
    global _core_id
    if _core_id is None:
        import hashlib
        ext = Path(_C.__file__).stat()
        h = hashlib.sha256(f"{ext.st_size}:{ext.st_mtime_ns}".encode())
        for header in sorted(Path(_include_dir(), "tl").rglob("*.h")):
            h.update(header.name.encode())
            h.update(header.read_bytes())
        _core_id = h.hexdigest()[:16]
    return _core_id


def _normalise_out_idx(out_idx, params):
    """out_idx as sorted parameter indices: ints (negative ones count from the end), each
    naming a different parameter."""
    if out_idx is None:
        return []
    items = [out_idx] if isinstance(out_idx, (int, np.integer)) else out_idx
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"out_idx must be an int or a list of ints, got {out_idx!r} ({type(out_idx).__name__})")
    n = len(params)
    seen = {}
    for i in items:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"out_idx must be an int or a list of ints, got the entry {i!r} ({type(i).__name__})")
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise ValueError(f"out_idx {i} is out of range for a kernel with {n} parameters")
        if j in seen:
            raise ValueError(f"out_idx names parameter '{params[j].name}' twice ({seen[j]} and {i})")
        seen[j] = i
    return sorted(seen)


# Pass configuration keys of TileLang: accepted so that kernels written for it compile
# unchanged (as strings or tilelang.PassConfigKey members). The switches in
# backends.SWITCHES turn lowering features off; the others do not change what this
# compiler generates today. A key outside this list is a typo or an option of another
# compiler, and is rejected.
KNOWN_PASS_CONFIGS = frozenset({
    "tl.Simplify", "tl.dynamic_alignment", "tl.disable_dynamic_tail_split", "tl.disable_warp_specialized",
    "tl.enable_warpgroup_pingpong", "tl.disable_wgmma_overlap",
    "tl.enable_fast_math", "tl.disable_fast_math", "tl.ptxas_register_usage_level", "tl.enable_ptxas_verbose_output",
    "tl.device_compile_flags", "tl.config_index_bitwidth", "tl.disable_tma_lower", "tl.disable_safe_memory_legalize",
    "tl.disable_vectorize_256", "tl.disable_wgmma", "tl.debug_merge_shared_memory_allocations",
    "tl.enable_aggressive_shared_memory_merge", "tl.disable_shared_memory_reuse", "tl.disable_shuffle_elect",
    "tl.disable_loop_unswitching", "tl.disable_thread_storage_sync", "tl.force_let_inline",
    "tl.disable_out_of_bound_warning", "tl.enable_dump_ir", "tl.dump_ir_path", "tl.enable_async_copy",
    "tl.enable_lower_ldgstg", "tl.enable_lower_ldgstg_predicated", "tl.disable_data_race_check",
    "tl.disable_buffer_init_check", "tl.enable_fp32x2_reduction", "tl.emit_line_directives",
    "tl.ast_print_enable", "tl.layout_visualization_enable", "tl.layout_visualization_formats",
    "tl.storage_rewrite_detect_inplace", "tl.pass_profile", "tl.pass_profile_threshold_ms",
    "tl.enable_vectorize_planner_verbose",
    "tir.disable_vectorize", "tir.disable_storage_rewrite", "tir.disable_cse_tir", "tir.enable_debug",
    "tir.merge_static_smem", "tir.noalias", "tir.use_async_copy", "tir.enable_equiv_terms_in_cse_tir",
    "tir.Simplify", "tir.add_lower_pass", "cuda.kernels_output_dir",
})


def _known_pass_configs():
    """The keys above, every tilelang.PassConfigKey value, and the 'tirx.*' spelling newer
    TileLang releases use for the 'tir.*' keys."""
    from ..transform import PassConfigKey
    keys = set(KNOWN_PASS_CONFIGS) | {m.value for m in PassConfigKey if "." in m.value}
    keys |= {"tirx." + k[len("tir."):] for k in keys if k.startswith("tir.")}
    return frozenset(keys)


KNOWN_PASS_CONFIGS = _known_pass_configs()


def _check_pass_configs(pass_configs):
    if pass_configs is None:
        return {}
    if not hasattr(pass_configs, "items"):
        raise TypeError(f"pass_configs must be a dict {{'tl.<option>': value}}, got {type(pass_configs).__name__}")
    out = {}
    for key, value in pass_configs.items():
        name = getattr(key, "value", key)  # an enum member of pass config keys
        if not isinstance(name, str) or name not in KNOWN_PASS_CONFIGS:
            import difflib
            close = difflib.get_close_matches(str(name), sorted(KNOWN_PASS_CONFIGS), n=1)
            raise ValueError(f"unknown pass config {name!r}: pass configs are TileLang's 'tl.<option>' keys"
                             + (f"; did you mean {close[0]!r}?" if close else ""))
        out[name] = value
    return out


def _user_location(fallback=("", 0)):
    """(file, line) of the innermost caller outside this package and Python's own library:
    where a compile call that names a bad target was written. A compile from a worker
    thread (the autotuner's) has no such caller: `fallback` then (the kernel's definition)."""
    import sys
    import sysconfig
    skipped = [str(Path(__file__).resolve().parent.parent)]
    skipped += [str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")]
    frame = sys._getframe(1)
    while frame is not None and any(str(Path(frame.f_code.co_filename).resolve()).startswith(p) for p in skipped):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else fallback


def _current_torch_stream(device):
    """torch's current stream on the tensor's device, as a raw pointer (the cheap query)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


def _stage(arr, keep):
    """Host (numpy) arrays given to a GPU kernel are copied to device memory for the call
    and back afterwards: a convenience for tests and debugging, not a fast path."""
    import torch
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    dev = torch.from_numpy(flat.copy()).to("cuda")
    keep.append((arr, dev))
    return dev.data_ptr()


def _unstage(keep, written):
    """Copies back the staged arrays the kernel wrote (written: their ids); inputs, which may
    be read-only, are left alone."""
    if not keep:
        return
    import torch
    torch.cuda.synchronize()
    for arr, dev in keep:
        if id(arr) in written:
            arr.reshape(-1).view(np.uint8)[:] = dev.cpu().numpy()


_warned = set()


def _warn_slower_paths(report: str):
    """One TileLangPerformanceWarning per slower path the lowering report names."""
    for line in report.splitlines():
        if "[slower path:" in line and line not in _warned:
            _warned.add(line)
            warnings.warn(line, TileLangPerformanceWarning, stacklevel=4)


class JITKernel:
    """A kernel compiled for one target; call it with arrays (inputs first, outputs by out_idx)."""

    # Set by the autotuner on the kernel it chose (upstream's attributes).
    latency = None
    config = None
    ref_latency = None

    @property
    def workspace_idx(self):
        """Parameter indices of the T.alloc_global workspaces (each call allocates them)."""
        return list(self._workspace_idx)

    def update_tuner_result(self, latency, config, ref_latency):
        self.latency, self.config, self.ref_latency = latency, config, ref_latency
        return self

    def __init__(self, func, out_idx=None, target="auto", target_host=None, execution_backend="auto",
                 verbose=False, pass_configs=None, compile_flags=None):
        from ..ir import PrimFunc
        if not isinstance(func, PrimFunc):
            raise TypeError(f"tilelang.compile expects a @T.prim_func, got {type(func).__name__}")
        self.prim_func = func
        if func.out_idx is not None:  # outputs declared with T.empty and returned
            if out_idx is not None:
                raise ValueError("Out index conflict: out_idx is specified and prim_func have returned `T.empty` "
                                 "tensors")
            out_idx = func.out_idx
        # A bad target is the compile call's mistake: its error points there, not at the
        # kernel's last parsed line.
        _C.set_span(*_user_location((func.file or "", func.line or 0)), 0)
        self.target = resolve_target(target)
        self.pass_configs = _check_pass_configs(pass_configs)
        self.compile_flags = list(compile_flags or [])
        self.verbose = verbose
        params = func.params
        # T.alloc_global workspaces are the last parameters: out_idx counts without them.
        n_workspaces = len(getattr(func, "workspace_idx", []) or [])
        self.out_idx = _normalise_out_idx(out_idx, params[:len(params) - n_workspaces])
        for j in self.out_idx:
            if params[j].kind != "buffer":
                raise ValueError(f"out_idx names parameter '{params[j].name}', which is a scalar")
        self.params = params
        # T.alloc_global workspaces: allocated by each call like outputs, never passed or returned.
        self._workspace_idx = list(getattr(func, "workspace_idx", []) or [])
        self._allocated_idx = sorted(set(self.out_idx) | set(self._workspace_idx))
        self.input_params = [p for i, p in enumerate(params) if i not in self._allocated_idx]
        self._shape_vars = func.handle.shape_vars()
        self._compile()
        self._prepare_call()

    # ------------------------------------------------------------------ compile
    def _compile(self):
        t0 = time.perf_counter()
        self._backend = backend_for(self.target, self.prim_func)
        parts = {
            "ir": self.prim_func.script(),
            "ir_hash": self.prim_func.handle.structural_hash(),
            "target": self.target,
            "compiler": self._backend.compiler_id(),
            "flags": self.compile_flags,
            "pass_configs": self.pass_configs,
            "version": _PACKAGE_VERSION,
            "core": _core_identity(),
        }
        self.cache_key = cache.key_of(parts)
        use_cache = cache.enabled()
        executable = _memory_cache.get(self.cache_key) if use_cache else None
        self.cache_hit = "memory" if executable else None
        if executable is None:
            executable, self.cache_hit = self._backend.build(self.prim_func, self.target, self.cache_key,
                                                             self.compile_flags, _include_dir(), self.pass_configs)
            if use_cache:
                _memory_cache[self.cache_key] = executable
            _warn_slower_paths(executable.lowering_report())
        self._executable = executable
        self._source = executable.source
        self.compile_time = time.perf_counter() - t0
        if self.verbose:
            print(f"[tilelang] {self.prim_func.name}: {'cache ' + self.cache_hit if self.cache_hit else 'compiled'} "
                  f"in {self.compile_time * 1e3:.1f} ms")

    # ------------------------------------------------------------------ call
    def _prepare_call(self):
        self._param_np_dtypes = [numpy_dtype(p.dtype) for p in self.params]
        self._scalar_rules = [scalar_rule(p.dtype) if p.kind == "scalar" else None for p in self.params]
        # The buffers a call must be able to write: those the kernel writes, and outputs.
        self._written = set(self.prim_func.handle.written_params()) | set(self._allocated_idx)
        if self.prim_func.source_kernel is not None:  # CUDA source: any buffer may be written
            self._written |= {i for i, p in enumerate(self.params) if p.kind == "buffer"}
        # The fast path (see _signature): parameter positions of the arguments, with and
        # without the outputs given.
        takes_arrays = getattr(self._backend, "takes_arrays", False)
        no_scalars = all(p.kind == "buffer" for p in self.params)
        self._plans = {} if no_scalars and not takes_arrays else None
        self._last_plan = None
        self._int_scalars = [i for i, p in enumerate(self.params) if p.kind == "scalar" and "int" in str(p.dtype)]
        n_passed = len(self.params) - len(self._workspace_idx)  # outputs given too
        self._arg_positions = {n_passed: [i for i in range(len(self.params)) if i not in self._workspace_idx],
                               len(self.input_params): [i for i in range(len(self.params))
                                                        if i not in self._allocated_idx]}
        self._shape_var_names = [v.name for v in self._shape_vars]
        self._dim_specs = [[dim_spec(e) for e in p.shape] if p.kind == "buffer" else None for p in self.params]
        self._stride_specs = [[dim_spec(e) for e in p.strides] if p.kind == "buffer" else None
                              for p in self.params]

    # Calls whose arguments look exactly like an earlier call's (same array types, shapes,
    # strides, dtypes, devices and writeability) skip the checks that call passed: only the
    # pointers are read. Kernels with scalar parameters, staged host arrays and back ends
    # that take arrays always go the whole way.
    _MAX_PLANS = 64

    def _signature(self, args):
        sig = []
        for a in args:
            if isinstance(a, np.ndarray):
                sig.append((a.shape, a.strides, a.dtype.str, a.flags.writeable))
            elif type(a).__module__ == "torch" and hasattr(a, "data_ptr"):
                sig.append((a.shape, a.stride(), a.dtype, a.device))
            else:
                return None
        return (len(args),) + tuple(sig)

    def _fast_call(self, args, plan, stream):
        out_shapes, shapes, lib, like_pos = plan
        values = {}
        positions = self._arg_positions[len(args)]
        for i, a in zip(positions, args):
            values[i] = a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data_ptr()
        like = args[like_pos] if like_pos is not None else None
        outputs, keep_alive = [], []
        for i, shape in out_shapes:
            out = allocate(lib, shape, self.params[i].dtype, like)
            (keep_alive if i in self._workspace_idx else outputs).append(out)
            values[i] = out.__array_interface__["data"][0] if isinstance(out, np.ndarray) else out.data_ptr()
        if self._backend.device in ("cuda", "hip"):
            if stream is None and lib == "torch":
                stream = _current_torch_stream(like.device)
            self._executable.run(values, shapes, int(stream or 0))
        else:
            self._run_cpu(values, shapes, [])
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def __call__(self, *args, stream=None):
        sig = self._signature(args) if self._plans is not None else None
        if sig is not None:
            plan = self._plans.get(sig)
            if plan is not None:
                return self._fast_call(args, plan, stream)
        result = self._checked_call(args, stream)
        if sig is not None and self._last_plan is not None:
            if len(self._plans) >= self._MAX_PLANS:
                self._plans.clear()
            self._plans[sig] = self._last_plan
        return result

    def _checked_call(self, args, stream):
        self._last_plan = None
        name = self.prim_func.name
        n_in = len(self.input_params)
        if len(args) == len(self.params) - len(self._workspace_idx) and self.out_idx:
            outputs_given = True
        elif len(args) == n_in:
            outputs_given = False
        else:
            names = ", ".join(p.name for p in self.input_params)
            raise TypeError(f"{name}() takes {n_in} argument(s) ({names}), got {len(args)}")
        device = self._backend.device
        gpu = device in ("cuda", "hip")  # host arrays staged, launched on a stream
        if device == "hip":  # no runtime, AMD GPU or hipcc: say which before reading arguments
            self._executable.require_device()
        accepted = getattr(self._backend, "devices", (device,))
        binder = Binder(name)
        values = {}  # param index -> pointer (buffers) or Python number (scalars)
        arrays = {}  # param index -> the array object (buffers)
        keep = []
        lib, like = "numpy", None
        arg_iter = iter(args)
        for i, p in enumerate(self.params):
            if (i in self.out_idx and not outputs_given) or i in self._workspace_idx:
                continue
            a = next(arg_iter)
            if p.kind == "scalar":
                a = check_scalar(name, p, self._scalar_rules[i], a)
                values[i] = a
                binder.values.setdefault(p.name, a)
                continue
            v = view_of(a, p.name)
            if v.readonly and i in self._written:
                raise ValueError(f"{name}: argument '{p.name}' is a read-only array, but the kernel writes it; "
                                 "pass a writeable array (a.copy(), or set a.flags.writeable = True if the "
                                 "memory may be written)")
            if v.lib in ("torch", "webgpu"):
                lib, like = v.lib, v.obj
            staged = gpu and v.device == "cpu" and v.lib == "numpy"
            self._check_buffer_arg(binder, i, p, v, ("cpu",) if staged else accepted)
            values[i] = _stage(v.obj, keep) if staged else v.ptr
            arrays[i] = v.obj
        binder.finish()
        outputs = []
        allocated = []  # (index, array): outputs not given, and workspaces
        for i in ([] if outputs_given else self.out_idx) + self._workspace_idx:
            p = self.params[i]
            shape = tuple(binder.evaluate(e) for e in p.shape)
            out = allocate(lib, shape, p.dtype, like)
            allocated.append((i, out))
            if i not in self._workspace_idx:
                outputs.append(out)
            v = view_of(out, p.name)
            values[i] = _stage(out, keep) if gpu and v.lib == "numpy" else v.ptr
            arrays[i] = out
        shapes = {n: binder.values.get(n, 0) for n in self._shape_var_names}
        for i in self._int_scalars:  # a launch grid may name them: T.ceildiv(max_seqlen_q, 64)
            shapes.setdefault(self.params[i].name, int(values[i]))
        if self._plans is not None and not keep and lib in ("numpy", "torch"):
            like_pos = next((k for k, a in enumerate(args) if a is like), None) if like is not None else None
            if like is None or like_pos is not None:
                self._last_plan = ([(i, tuple(o.shape)) for i, o in allocated], shapes, lib, like_pos)
        if gpu:
            if stream is None and lib == "torch":
                stream = _current_torch_stream(like.device)
            self._executable.run(values, shapes, int(stream or 0))
            _unstage(keep, {id(arrays[i]) for i in self._written if i in arrays})
        elif getattr(self._backend, "takes_arrays", False):
            # Host arrays as numpy; WebGPU DeviceArrays stay where they are.
            host = {i: a if isinstance(a, np.ndarray) or getattr(a, "__tilelang_webgpu__", False)
                    else np.asarray(a) for i, a in arrays.items()}
            for i, p in enumerate(self.params):
                if p.kind == "scalar":
                    host[i] = values[i]
            self._executable.run(host, shapes)
        else:
            self._run_cpu(values, shapes, keep)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _run_cpu(self, values, shapes, keep):
        ptrs = []
        for i, p in enumerate(self.params):
            if p.kind == "scalar":
                box = np.array([values[i]], dtype=self._param_np_dtypes[i])
                keep.append(box)
                ptrs.append(box.__array_interface__["data"][0])
            else:
                ptrs.append(values[i])
        if not self._shape_var_names:
            self._executable.run(ptrs, [])
            return
        shape_values = np.array([shapes[n] for n in self._shape_var_names], dtype=np.int64)
        keep.append(shape_values)
        base = shape_values.__array_interface__["data"][0]
        self._executable.run(ptrs, [base + 8 * k for k in range(len(self._shape_var_names))])

    def _check_buffer_arg(self, binder, i, p, v, devices):
        name = self.prim_func.name
        if v.device not in devices:
            raise ValueError(f"{name}: argument '{p.name}' is on device '{v.device}', but the kernel was "
                             f"compiled for target '{self.target}' and needs {' or '.join(devices)} memory")
        if v.dtype != p.dtype:
            raise TypeError(f"{name}: argument '{p.name}' has dtype {v.dtype}, expected {p.dtype}")
        specs = self._dim_specs[i]
        if len(v.shape) != len(specs):
            raise ValueError(f"{name}: argument '{p.name}' has shape {tuple(v.shape)} ({len(v.shape)}-D), "
                             f"expected {shape_text(p.shape)} ({len(p.shape)}-D)")
        for d, (spec, actual) in enumerate(zip(specs, v.shape)):
            binder.dim(spec, int(actual), f"{p.name}.shape[{d}]", p.name, p.shape, v.shape)
        # Strides: explicit ones are checked as declared, else the array must be row-major
        # contiguous (dimensions of extent 1 may have any stride; an empty array has no
        # elements to lay out).
        if self._stride_specs[i]:
            for d, (spec, actual) in enumerate(zip(self._stride_specs[i], v.strides)):
                binder.dim(spec, int(actual), f"{p.name}.strides[{d}]", p.name, p.shape, v.shape)
            return
        if 0 in tuple(v.shape):
            return
        expected = 1
        for d in range(len(v.shape) - 1, -1, -1):
            if v.shape[d] != 1 and v.strides[d] != expected:
                raise ValueError(
                    f"{name}: argument '{p.name}' has strides {tuple(v.strides)} (in elements), expected a "
                    f"contiguous row-major array; pass np.ascontiguousarray(...) / .contiguous()")
            expected *= v.shape[d]

    # ------------------------------------------------------------------ inspection
    def get_kernel_source(self) -> str:
        """The generated source of the kernel."""
        return self._source

    def get_lowering_report(self, pictures=None) -> str:
        """What the compiler decided, one line each: the instruction every T.gemm runs on (and
        why not the tensor cores, when not), each T.Pipelined loop's schedule, the shared
        buffers it swizzled; on CUDA, per kernel, the registers, spills and shared memory
        read from the compiled binary. With pictures (a directory), also writes a PNG of each
        fragment's thread mapping and of each swizzled shared buffer there, and lists them."""
        report = self._executable.lowering_report()
        if pictures is None:
            return report
        from ..tools.lowering_pictures import write_pictures
        return report + write_pictures(self, pictures)

    def torch_op(self, name=None):
        """This kernel as a torch.library custom operator named name ("namespace::op"),
        traceable by torch.compile(fullgraph=True); see tilelang.jit.torch_op."""
        from .torch_op import register_torch_op
        return register_torch_op(self, name)

    def get_host_source(self) -> str:
        return self._source

    def show_source(self):
        print(self._source)

    print_source_code = show_source  # upstream's name

    def show_ir(self):
        print(self.prim_func.script())

    def get_profiler(self, tensor_supply_type=None):
        """A Profiler of this kernel whose generated inputs are filled as tensor_supply_type
        (a tilelang.TensorSupplyType; default TensorSupplyType.Auto) says."""
        from ..profiler import Profiler
        from ..utils.tensor import TensorSupplyType
        if tensor_supply_type is None:
            tensor_supply_type = TensorSupplyType.Auto
        return Profiler(self, tensor_supply_type)

    @property
    def kernel_source(self):
        return self._source

    def __repr__(self):
        return f"JITKernel({self.prim_func.name}, target={self.target})"
