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
    def __init__(self, kernel, tensor_supply_type=None, seed=0):
        self.kernel = kernel
        self.rng = np.random.default_rng(seed)

    def _inputs(self):
        binder_vals = {}
        out = []
        for p in self.kernel.input_params:
            if p.kind == "scalar":
                out.append(1)
                continue
            shape = []
            for e in p.shape:
                if e.kind != "IntImm":
                    raise ValueError(f"profiler: parameter '{p.name}' has a dynamic shape; pass inputs yourself")
                shape.append(e.value)
            npd = numpy_dtype(p.dtype)
            if np.issubdtype(np.dtype(npd), np.integer):
                out.append(self.rng.integers(-4, 4, size=shape).astype(npd))
            else:
                out.append(self.rng.standard_normal(shape).astype(npd))
        if self.kernel.target.startswith("cuda"):
            # On the device, so that timings leave out the host <-> device copies.
            import torch
            out = [torch.from_numpy(np.ascontiguousarray(x)).cuda() if isinstance(x, np.ndarray) else x
                   for x in out]
        return out

    def do_bench(self, func=None, warmup=3, rep=10, n_warmup=None, n_repeat=None, input_tensors=None, **kw):
        args = input_tensors if input_tensors is not None else self._inputs()
        fn = func or self.kernel
        return do_bench(lambda: fn(*args), warmup=n_warmup or warmup, rep=n_repeat or rep)

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.0):
        args = input_tensors if input_tensors is not None else self._inputs()
        ours = self.kernel(*args)
        ref = reference_program(*args)
        ours = ours if isinstance(ours, (list, tuple)) else [ours]
        ref = ref if isinstance(ref, (list, tuple)) else [ref]
        for a, b in zip(ours, ref):
            np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                                       rtol=rtol, atol=atol)
