"""Timing and checking of compiled kernels on random inputs."""
from __future__ import annotations

import time

import numpy as np

from ..dtypes import numpy_dtype


def _cuda_in_use():
    """torch with an initialised CUDA context: work may be queued on the GPU."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def do_bench(fn, warmup=3, rep=10, **_ignored):
    """Median time of fn() in milliseconds over rep runs after warmup runs. When work can be
    queued on a CUDA device (torch has a CUDA context), each run is timed with CUDA events on
    the current stream, so the time is the GPU's, not the launch's; else with a host clock."""
    for _ in range(max(0, int(warmup))):
        fn()
    torch = _cuda_in_use()
    times = []
    if torch is not None:
        torch.cuda.synchronize()
        for _ in range(max(1, int(rep))):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return float(np.median(times))
    for _ in range(max(1, int(rep))):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


class Profiler:
    """Times and checks a compiled kernel on generated inputs: kernel.get_profiler(
    tensor_supply_type=TensorSupplyType.Auto)."""

    def __init__(self, kernel, tensor_supply_type=None, seed=None):
        from ..utils.tensor import TensorSupplyType, get_tensor_supply
        self.kernel = kernel
        self.supply_type = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
        rng = np.random.default_rng(seed) if seed is not None else None
        self.supply = get_tensor_supply(self.supply_type, rng)

    @property
    def params(self):
        return self.kernel.params

    @property
    def result_idx(self):
        return list(self.kernel.out_idx)

    def _get_params(self, with_output=False):
        """The kernel's parameters inputs are made for (upstream's name): inputs, and with
        with_output the outputs too."""
        if not with_output:
            return list(self.kernel.input_params)
        return [p for i, p in enumerate(self.kernel.params) if i not in self.kernel.workspace_idx]

    def _get_inputs(self, with_output=False):
        """One generated argument per input parameter (and per output with with_output):
        tensors of the parameter's dtype as the supply type says, 1 for scalars. torch
        tensors where torch is installed, as upstream's reference programs expect (on the
        device for CUDA targets, so that timings leave out host <-> device copies; on the
        host for the CPU); numpy arrays without torch, and for webgpu."""
        out = []
        for i, p in enumerate(self.kernel.params):
            if (i in self.kernel.out_idx and not with_output) or i in self.kernel.workspace_idx:
                continue
            out.append(1 if p.kind == "scalar" else self.supply(p))
        on_cuda = self.kernel.target.startswith("cuda")
        if on_cuda or (self.kernel.target.startswith("cpu") and _torch_installed()):
            out = [_as_torch(x, on_cuda) if isinstance(x, np.ndarray) else x for x in out]
        return out

    _inputs = _get_inputs

    def run_once(self, func=None):
        """Runs func (the kernel by default) once on generated inputs and returns its result."""
        return (func or self.kernel)(*self._get_inputs())

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    @property
    def func(self):
        """The kernel as a callable (upstream's name for its adapter): ``profiler.func(*args)``."""
        return self.kernel

    adapter = func

    def with_default_adapter(self, adapter):
        """Makes `adapter` (a compiled kernel or any callable with its signature) the
        function this profiler runs; returns the profiler."""
        if not callable(adapter):
            raise TypeError(f"with_default_adapter expects a callable kernel, got {type(adapter).__name__}")
        self.kernel = adapter if hasattr(adapter, "params") else _CallableWithParams(adapter, self.kernel)
        return self

    def assert_consistent(self, repeat=10):
        """Runs the kernel repeat + 1 times on the same inputs and asserts that every run
        gives the first run's outputs exactly (a race inside the kernel shows as a difference)."""
        args = self._get_inputs()
        first = self._outputs(self.kernel(*args))
        for run in range(repeat):
            again = self._outputs(self.kernel(*args))
            for k, (a, b) in enumerate(zip(again, first)):
                if not np.array_equal(_host(a), _host(b), equal_nan=True):
                    raise AssertionError(f"result is not consistent: output {k} of run {run + 2} differs from run 1")

    @staticmethod
    def _outputs(result):
        return [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]

    def do_bench(self, func=None, warmup=3, rep=10, n_warmup=None, n_repeat=None, input_tensors=None, **kw):
        args = input_tensors if input_tensors is not None else self._get_inputs()
        fn = func or self.kernel
        return do_bench(lambda: fn(*args), warmup=n_warmup or warmup, rep=n_repeat or rep)

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01):
        """Runs reference_program and the kernel on the same inputs and asserts that every
        output is close: `|ours - ref| <= atol + rtol * |ref|` for all but a fraction
        max_mismatched_ratio of the elements (tilelang.utils.torch_assert_close; dtypes may
        differ)."""
        from ..utils.tensor import torch_assert_close
        args = input_tensors if input_tensors is not None else self._get_inputs()
        ref = reference_program(*args)
        ours = self.kernel(*args)
        ours = [] if ours is None else list(ours) if isinstance(ours, (list, tuple)) else [ours]
        ref = [] if ref is None else list(ref) if isinstance(ref, (list, tuple)) else [ref]
        if len(ours) != len(ref):
            raise AssertionError(f"the kernel returned {len(ours)} output(s), the reference {len(ref)}")
        for a, b in zip(ours, ref):
            torch_assert_close(a, b, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                               check_dtype=False, check_device=False, base_name="tilelang", ref_name="ref")

    def manual_assert_close(self, reference_program, input_tensors=None, manual_check_prog=None):
        """Runs the kernel and reference_program on the same inputs and hands both results
        to manual_check_prog(ours, reference), which raises when they disagree."""
        args = input_tensors if input_tensors is not None else self._inputs()
        ours = self.kernel(*args)
        ref = reference_program(*args)
        manual_check_prog(ours, ref)


class _CallableWithParams:
    """A callable given to with_default_adapter, described by the kernel it stands in for."""

    def __init__(self, fn, kernel):
        self._fn, self._kernel = fn, kernel

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._kernel, name)


def _host(x):
    """A numpy view of a result (a torch tensor is copied to the host)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        return x.float().numpy() if x.dtype.is_floating_point else x.numpy()
    return np.asarray(x)


def _torch_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


# numpy (ml_dtypes) types torch.from_numpy does not take: their bits, viewed as torch's type.
_VIEWED = {"bfloat16": ("uint16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
           "float8_e5m2": ("uint8", "float8_e5m2")}


def _as_torch(x, on_cuda):
    """A torch tensor holding the array's values (bfloat16 and float8 too)."""
    import torch
    a = np.ascontiguousarray(x)
    viewed = _VIEWED.get(a.dtype.name)
    t = torch.from_numpy(a.view(viewed[0])).view(getattr(torch, viewed[1])) if viewed else torch.from_numpy(a)
    return t.cuda() if on_cuda else t


def _host(x):
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def assert_close(ours, ref, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.0):
    """Raises AssertionError unless `|ours - ref| <= atol + rtol * |ref|` everywhere but in at
    most max_mismatched_ratio of the elements. Two torch tensors on one device are compared
    there (on the GPU: a large output is not copied to the host for each check)."""
    if _is_torch(ours) and _is_torch(ref) and ours.device == ref.device:
        return _assert_close_torch(ours, ref, rtol, atol, max_mismatched_ratio)
    a = _host(ours).astype(np.float64)
    b = _host(ref).astype(np.float64)
    if not max_mismatched_ratio:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        return
    if a.shape != b.shape:
        raise AssertionError(f"shapes differ: {a.shape} vs reference {b.shape}")
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    ratio = float(bad.mean()) if bad.size else 0.0
    if ratio > max_mismatched_ratio:
        worst = float(np.nanmax(np.abs(a - b))) if bad.size else 0.0
        raise AssertionError(f"{int(bad.sum())} of {bad.size} elements ({ratio:.2%}) differ beyond rtol={rtol}, "
                             f"atol={atol} (allowed {max_mismatched_ratio:.2%}); largest difference {worst:g}")


def _is_torch(x):
    return hasattr(x, "detach") and hasattr(x, "device") and hasattr(x, "is_floating_point")


def _assert_close_torch(ours, ref, rtol, atol, max_mismatched_ratio):
    import torch
    if tuple(ours.shape) != tuple(ref.shape):
        raise AssertionError(f"shapes differ: {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
    wide = torch.float64 if torch.float64 in (ours.dtype, ref.dtype) else torch.float32
    a, b = ours.detach().to(wide), ref.detach().to(wide)
    bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    count = int(bad.sum())
    ratio = count / bad.numel() if bad.numel() else 0.0
    if count == 0 or (max_mismatched_ratio and ratio <= max_mismatched_ratio):
        return
    worst = float((a - b).abs().nan_to_num(nan=float("inf"))[bad].max())
    allowed = f" (allowed {max_mismatched_ratio:.2%})" if max_mismatched_ratio else ""
    raise AssertionError(f"{count} of {bad.numel()} elements ({ratio:.2%}) differ beyond rtol={rtol}, "
                         f"atol={atol}{allowed}; largest difference {worst:g}")
