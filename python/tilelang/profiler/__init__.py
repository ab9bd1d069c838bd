"""Timing and checking of compiled kernels on random inputs."""
from __future__ import annotations

import time

import numpy as np

from ..dtypes import numpy_dtype


def do_bench(fn, warmup=3, rep=10, **_ignored):
    """Median wall time of fn() in milliseconds over rep runs after warmup runs."""
    for _ in range(max(0, int(warmup))):
        fn()
    times = []
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
