"""The WebGPU runtime: WGSL compiled by the adapter's driver through wgpu (PyPI), host
(numpy) arrays copied into storage buffers for each call and the written ones copied back.
Any Vulkan, Metal or D3D12 GPU works, and so does Mesa's lavapipe (Vulkan on the CPU)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _C
from .backends import switches
from ..errors import TileLangInternalError, TileLangUnsupportedError

_state = {}


@dataclass
class _Adapter:
    """The WebGPU device this process uses and what it offers, found once."""
    device: object
    description: str              # "NVIDIA H200 (Vulkan)"
    limits: dict                  # the adapter limits kernels are checked against
    has_f16: bool                 # shader-f16
    timestamps: bool              # timestamp queries (kernel-only timing)
    subgroup: int = 0             # probed subgroup size; 0: no subgroup operations
    subgroup_directive: str = ""  # what this WGSL compiler wants before subgroup builtins


def unavailable_reason():
    """None when a WebGPU adapter can be used, else why not."""
    try:
        _device()
        return None
    except TileLangUnsupportedError as e:
        return str(e).splitlines()[0]


def _device() -> _Adapter:
    """The adapter record, created once per process."""
    if "device" in _state:
        return _state["device"]
    if "error" in _state:
        raise TileLangUnsupportedError(_state["error"], None, None, "install wgpu and a Vulkan driver")
    try:
        import wgpu
    except ImportError:
        _state["error"] = "target 'webgpu' needs the wgpu package (pip install wgpu)"
        return _device()
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:  # no driver, no adapter
        adapter, err = None, e
    if adapter is None:
        _state["error"] = f"target 'webgpu' found no WebGPU adapter ({err if 'err' in locals() else 'none'})"
        return _device()
    features = [f for f in ("shader-f16", "subgroup", "timestamp-query") if f in adapter.features]
    limits = {k: adapter.limits[k] for k in ("max-compute-invocations-per-workgroup",
                                             "max-compute-workgroup-size-x",
                                             "max-compute-workgroup-size-y",
                                             "max-compute-workgroup-size-z",
                                             "max-compute-workgroup-storage-size",
                                             "max-buffer-size",
                                             "max-storage-buffer-binding-size",
                                             "max-compute-workgroups-per-dimension",
                                             "max-storage-buffers-per-shader-stage")}
    device = adapter.request_device_sync(required_features=features, required_limits=limits)
    info = adapter.info
    found = _Adapter(device, f"{info.get('device', '?')} ({info.get('backend_type', '?')})", limits,
                     has_f16="shader-f16" in features, timestamps="timestamp-query" in features)
    if "subgroup" in features:
        found.subgroup, found.subgroup_directive = _probe_subgroup(device)
    _state["device"] = found
    return found


_SUBGROUP_PROBE = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) i: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) size: u32) {
  out[2u * i] = size;
  out[2u * i + 1u] = lane;
}
"""


def _probe_subgroup(device):
    """(size, directive): the subgroup size this adapter runs compute shaders with when its
    subgroups are consecutive threads of one size (what kernels lowered with shuffles
    assume), else 0; and the directive its WGSL compiler wants first. Each kernel checks
    the size again when it runs (WebGPUExecutable._subgroups_failed)."""
    import wgpu
    # WGSL names the extension with `enable subgroups;`; wgpu's shader compiler (naga) has
    # long taken the builtins without it and refused the directive: use what this one takes.
    module = None
    for directive in ("", "enable subgroups;\n"):
        try:
            module = device.create_shader_module(code=directive + _SUBGROUP_PROBE)
            break
        except Exception:
            continue
    if module is None:
        return 0, ""
    try:
        pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        out = device.create_buffer(size=256 * 8, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0),
                                         entries=[{"binding": 0, "resource": {"buffer": out}}])
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(1, 1, 1)
        compute.end()
        device.queue.submit([encoder.finish()])
        seen = np.frombuffer(device.queue.read_buffer(out), np.uint32).reshape(256, 2)
    except Exception:  # a driver that cannot run the probe: no subgroup operations
        return 0, ""
    size = int(seen[0, 0])
    if size < 2 or size > 128 or size & (size - 1):
        return 0, ""
    if np.any(seen[:, 0] != size) or np.any(seen[:, 1] != np.arange(256) % size):
        return 0, ""
    return size, directive


def subgroup_size() -> int:
    """The subgroup size kernels for target 'webgpu' are lowered with on this adapter (0:
    reductions across threads go through workgroup memory alone)."""
    return _device().subgroup


def adapter_limits() -> dict:
    """The adapter's limits in the form _C.lower checks a kernel's launch against."""
    lim = _device().limits
    return {"max_threads_per_block": lim["max-compute-invocations-per-workgroup"],
            "max_threads_per_dim": [lim[f"max-compute-workgroup-size-{d}"] for d in "xyz"],
            "max_grid": [lim["max-compute-workgroups-per-dimension"]] * 3,
            "max_shared_bytes": lim["max-compute-workgroup-storage-size"]}


def adapter_id() -> str:
    description = _device().description  # a typed error first when wgpu or an adapter is missing
    import wgpu
    return f"wgpu {wgpu.__version__} on {description}, subgroup {subgroup_size()}"


def _storage_usage():
    import wgpu
    return wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


class DeviceArray:
    """A contiguous array kept in a WebGPU storage buffer, so that kernels called with it
    neither upload nor read back. Make one with to_device(array) or empty(shape, dtype);
    kernels given one for an input return their outputs as DeviceArrays too; .numpy()
    copies it back."""
    __tilelang_webgpu__ = True

    def __init__(self, shape, dtype, buffer=None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        # Storage buffers are arrays of 4-byte words (and a binding may not be empty).
        size = max(4, (self.nbytes + 3) // 4 * 4)
        self.buffer = buffer or _device().device.create_buffer(size=size, usage=_storage_usage())

    def numpy(self) -> np.ndarray:
        raw = np.frombuffer(_device().device.queue.read_buffer(self.buffer), np.uint8)[:self.nbytes]
        return raw.view(self.dtype).reshape(self.shape).copy()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, webgpu)"


def _padded_bytes(array) -> np.ndarray:
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    padded = np.zeros(max(4, (data.size + 3) // 4 * 4), np.uint8)
    padded[:data.size] = data
    return padded


def to_device(array) -> DeviceArray:
    """A DeviceArray holding a copy of a host array."""
    a = np.asarray(array)
    return DeviceArray(a.shape, a.dtype, _device().device.create_buffer_with_data(
        data=_padded_bytes(a), usage=_storage_usage()))


def empty(shape, dtype) -> DeviceArray:
    """An uninitialised DeviceArray."""
    return DeviceArray(shape, dtype)


def synchronize():
    """Waits until the GPU has finished the work submitted so far: reads back a 4-byte
    buffer, which the queue orders after everything before it (wgpu 0.32's
    on_submitted_work_done does not work)."""
    if "fence" not in _state:
        _state["fence"] = _device().device.create_buffer(size=4, usage=_storage_usage())
    _device().device.queue.read_buffer(_state["fence"])


class WebGPUExecutable:
    def __init__(self, info: dict, report: str, fallback=None):
        """fallback: when the kernel uses subgroup operations, a function that builds the
        same kernel without them, for an adapter whose subgroups turn out not to be as
        assumed."""
        import wgpu
        self.wgpu = wgpu
        adapter = _device()
        device, limits = adapter.device, adapter.limits
        self.device = device
        self.timestamps = adapter.timestamps
        self.source = info["source"]
        if info["status_binding"] >= 0:
            self.source = adapter.subgroup_directive + self.source
        self.report = report
        self.grid = info["grid"]
        self.buffers = info["buffers"]
        self.uniforms = info["uniforms"]
        self.status_binding = info["status_binding"]
        self.fallback = fallback
        self.replaced_by = None
        # A subgroup kernel's status word is read after its first dispatch only: the size and
        # order of a pipeline's subgroups do not change between dispatches.
        self.subgroups_checked = False
        self.status = None
        self.max_buffer_bytes = min(limits["max-buffer-size"], limits["max-storage-buffer-binding-size"])
        self.max_groups = limits["max-compute-workgroups-per-dimension"]
        # Threads, workgroup memory and constant grids were checked against the adapter's
        # limits when the kernel was lowered (adapter_limits); the binding count is the
        # runtime's. The error points at the T.Kernel line.
        where = (info.get("kernel_file") or None, info.get("kernel_line") or None)
        if len(self.buffers) > limits["max-storage-buffers-per-shader-stage"]:
            raise TileLangUnsupportedError(
                f"not supported on webgpu: {len(self.buffers)} buffer parameters; the adapter allows "
                f"{limits['max-storage-buffers-per-shader-stage']}", *where, "pass fewer tensors")
        try:
            module = device.create_shader_module(code=self.source)
            entries = [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": wgpu.BufferBindingType.storage if written
                                   else wgpu.BufferBindingType.read_only_storage}}
                       for i, (_, _, _, written) in enumerate(self.buffers)]
            if self.uniforms:
                entries.append({"binding": len(self.buffers), "visibility": wgpu.ShaderStage.COMPUTE,
                                "buffer": {"type": wgpu.BufferBindingType.uniform}})
            if self.status_binding >= 0:
                entries.append({"binding": self.status_binding, "visibility": wgpu.ShaderStage.COMPUTE,
                                "buffer": {"type": wgpu.BufferBindingType.storage}})
            self.layout = device.create_bind_group_layout(entries=entries)
            self.pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[self.layout]),
                compute={"module": module, "entry_point": "main"})
        except Exception as e:  # the driver rejected the WGSL: a bug of the code generator
            raise TileLangInternalError(f"internal: the WebGPU driver rejected the generated WGSL: {e}", None, None,
                                        "this is a compiler bug; please report it with the kernel") from e

    def lowering_report(self) -> str:
        return self.report

    def run(self, arrays: dict, shape_values: dict):
        """arrays: {param index: numpy array or Python scalar}; shape_values: {name: int}."""
        if self.replaced_by is not None:
            return self.replaced_by.run(arrays, shape_values)
        bound = self._bind(arrays, shape_values)
        if bound is None:
            return
        group, grid, gpu_buffers = bound
        # Before the subgroup check, device arrays the kernel writes are saved, so that a
        # failed check can put them back for the rerun.
        saved = [] if self.subgroups_checked else self._save_written(arrays, gpu_buffers)
        self._submit(group, grid)
        if self._subgroups_failed():
            self._restore(saved)
            return self.replaced_by.run(arrays, shape_values)
        for binding, (index, _, _, written) in enumerate(self.buffers):
            out = arrays[index]
            if not written or not isinstance(out, np.ndarray):
                continue
            flat = out.reshape(-1).view(np.uint8)
            flat[:] = np.frombuffer(self.device.queue.read_buffer(gpu_buffers[binding]), np.uint8)[:flat.size]

    def _save_written(self, arrays, gpu_buffers):
        if self.status_binding < 0:
            return []
        saved = []
        encoder = self.device.create_command_encoder()
        for binding, (index, _, _, written) in enumerate(self.buffers):
            if written and isinstance(arrays[index], DeviceArray):
                src = gpu_buffers[binding]
                copy = self.device.create_buffer(size=src.size, usage=_storage_usage())
                encoder.copy_buffer_to_buffer(src, 0, copy, 0, src.size)
                saved.append((src, copy))
        if saved:
            self.device.queue.submit([encoder.finish()])
        return saved

    def _restore(self, saved):
        if not saved:
            return
        encoder = self.device.create_command_encoder()
        for dst, copy in saved:
            encoder.copy_buffer_to_buffer(copy, 0, dst, 0, dst.size)
        self.device.queue.submit([encoder.finish()])

    def time_dispatches(self, arrays: dict, shape_values: dict, reps: int = 20):
        """Milliseconds per dispatch on the GPU's clock (timestamp queries), the arguments
        uploaded once and nothing read back; None when the adapter has no timestamp queries."""
        if self.replaced_by is not None:
            return self.replaced_by.time_dispatches(arrays, shape_values, reps)
        if not self.timestamps:
            return None
        wgpu, device = self.wgpu, self.device
        bound = self._bind(arrays, shape_values)
        if bound is None:
            return 0.0
        group, grid, _ = bound
        self._submit(group, grid)  # warm-up, and the subgroup check
        if self._subgroups_failed():
            return self.replaced_by.time_dispatches(arrays, shape_values, reps)
        queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2)
        resolved = device.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        self._submit(group, grid, reps, {"query_set": queries, "beginning_of_pass_write_index": 0,
                                         "end_of_pass_write_index": 1}, (queries, resolved))
        ticks = np.frombuffer(device.queue.read_buffer(resolved), np.uint64)
        return float(ticks[1] - ticks[0]) * _timestamp_period(device.queue) / 1e6 / reps

    def _bind(self, arrays, shape_values):
        """Uploads the host arguments (device arrays are bound as they are): (bind group,
        grid, storage buffers), or None for an empty grid."""
        wgpu, device = self.wgpu, self.device
        grid = [_C.eval_int(g, shape_values) for g in self.grid]
        if min(grid) <= 0:
            return None
        if max(grid) > self.max_groups:
            raise ValueError(f"not supported on webgpu: a grid of {grid} blocks; the adapter allows "
                             f"{self.max_groups} per dimension")
        while len(grid) < 3:
            grid.append(1)
        usage = _storage_usage()
        gpu_buffers, entries = [], []
        for binding, (index, name, _, _) in enumerate(self.buffers):
            a = arrays[index]
            if a.nbytes > self.max_buffer_bytes:
                raise ValueError(f"not supported on webgpu: argument '{name}' is {a.nbytes} bytes; the adapter "
                                 f"binds at most {self.max_buffer_bytes} bytes per buffer")
            if isinstance(a, DeviceArray):
                buf = a.buffer
            else:
                buf = device.create_buffer_with_data(data=_padded_bytes(a), usage=usage)
            gpu_buffers.append(buf)
            entries.append({"binding": binding, "resource": {"buffer": buf}})
        if self.uniforms:
            fields = []
            for index, name, dtype in self.uniforms:
                value = arrays[index] if index >= 0 else shape_values[name]
                np_t = {"float32": np.float32, "uint32": np.uint32}.get(dtype, np.int32)
                fields.append(np.array([value], dtype=np_t).view(np.uint8))
            raw = np.concatenate(fields)
            packed = np.zeros((raw.size + 15) // 16 * 16, np.uint8)
            packed[:raw.size] = raw
            ubuf = device.create_buffer_with_data(data=packed, usage=wgpu.BufferUsage.UNIFORM)
            entries.append({"binding": len(self.buffers), "resource": {"buffer": ubuf}})
        if self.status_binding >= 0:
            if self.status is None:
                self.status = device.create_buffer_with_data(data=np.zeros(4, np.uint8), usage=usage)
            entries.append({"binding": self.status_binding, "resource": {"buffer": self.status}})
        return device.create_bind_group(layout=self.layout, entries=entries), grid, gpu_buffers

    def _submit(self, group, grid, reps=1, timestamp_writes=None, resolve=None):
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass(timestamp_writes=timestamp_writes)
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, group)
        for _ in range(reps):
            compute.dispatch_workgroups(*grid[:3])
        compute.end()
        if resolve is not None:
            encoder.resolve_query_set(resolve[0], 0, 2, resolve[1], 0)
        self.device.queue.submit([encoder.finish()])

    def _subgroups_failed(self) -> bool:
        """After the first dispatch of a kernel with subgroup operations: when its threads
        found the subgroups other than assumed, swaps in the kernel built without them (the
        caller restores what it saved and reruns; nothing has been copied back yet) and
        says so."""
        if self.status is None or self.subgroups_checked:
            return False
        self.subgroups_checked = True
        if not np.frombuffer(self.device.queue.read_buffer(self.status), np.uint32)[0]:
            return False
        self.replaced_by = self.fallback()
        self.report += ("\nwebgpu: the adapter's subgroups did not match the compiled size or thread order; "
                        "this kernel now runs without subgroup operations\n")
        return True


def _timestamp_period(queue) -> float:
    """Nanoseconds per timestamp tick (wgpu resolves raw ticks; the Python API does not
    expose the period, the native library does)."""
    try:
        from wgpu.backends.wgpu_native._ffi import lib
        return float(lib.wgpuQueueGetTimestampPeriod(queue._internal))
    except Exception:
        return 1.0


def time_dispatches(kernel, args, reps: int = 20):
    """GPU time per launch, in milliseconds, of a kernel compiled for target webgpu, on
    the adapter's timestamp queries: args (one array per parameter, outputs included; host
    arrays are uploaded once) and the kernel dispatched reps times in one compute pass.
    None when the adapter has no timestamp queries."""
    arrays = {i: a for i, a in enumerate(args)}
    return kernel._executable.time_dispatches(arrays, {}, reps)


class WebGPUBackend:
    device = "cpu"  # host arrays, which the runtime moves for each call...
    devices = ("cpu", "webgpu")  # ...or DeviceArrays, which stay on the GPU
    takes_arrays = True

    def compiler_id(self) -> str:
        return adapter_id()

    def build(self, prim_func, target, key, flags, include_dir, pass_configs=None):
        adapter = _device()
        if "-subgroup=" not in target and adapter.subgroup > 1:
            target = f"{target} -subgroup={adapter.subgroup}"

        def compile_for(t):
            lowered = _C.lower(prim_func.handle, t, switches(pass_configs), adapter_limits())
            return _C.codegen_wgsl(lowered, t, adapter.has_f16), lowered.lowering_report()

        def without_subgroups():
            return WebGPUExecutable(*compile_for("webgpu -subgroup=1"))

        return WebGPUExecutable(*compile_for(target), without_subgroups), None
