"""The WebGPU back end on this machine's adapter: a float32 GEMM 1024^3 against numpy, and the
adapter in use. Three times: a call with host arrays (it uploads the inputs and reads the
output back), a call with DeviceArrays (no transfers; waited for), and the kernel alone on
the GPU's clock (timestamp queries around 20 dispatches) where the adapter has them.

    python3 benchmarks/webgpu_bench.py [N]     (N: the GEMM size, 1024 by default)
"""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))

import tilelang  # noqa: E402
from kernels.gemm import matmul  # noqa: E402
from tilelang.jit import webgpu  # noqa: E402


def _median_call(fn, reps=7):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    reason = webgpu.unavailable_reason()
    if reason:
        print(f"webgpu: {reason}")
        return
    print("webgpu adapter:", webgpu.adapter_id())
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    kernel = tilelang.compile(matmul(n, n, n, 64, 64, 16, num_stages=1, threads=256), out_idx=[2], target="webgpu")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    c = kernel(a, b)
    err = float(np.linalg.norm(c - a.astype(np.float64) @ b) / np.linalg.norm(a.astype(np.float64) @ b))
    t = _median_call(lambda: kernel(a, b))
    t0 = time.perf_counter()
    a @ b
    t_np = time.perf_counter() - t0
    print(f"webgpu gemm fp32 {n}^3: {t * 1e3:.1f} ms per call with host arrays ({2 * n ** 3 / t / 1e9:.1f} "
          f"GFLOP/s, transfers included), rel err {err:.1e}; numpy {t_np * 1e3:.1f} ms")
    da, db = webgpu.to_device(a), webgpu.to_device(b)
    dc = kernel(da, db)
    assert np.array_equal(dc.numpy(), c)

    def on_device():
        kernel(da, db)
        webgpu.synchronize()

    t_dev = _median_call(on_device)
    print(f"webgpu gemm fp32 {n}^3: {t_dev * 1e3:.3f} ms per call with DeviceArrays "
          f"({2 * n ** 3 / t_dev / 1e9:.1f} GFLOP/s, waited for)")
    plain = tilelang.compile(matmul(n, n, n, 64, 64, 16, num_stages=1, threads=256), target="webgpu")
    ms = webgpu.time_dispatches(plain, [a, b, np.zeros((n, n), np.float32)], reps=20)
    if ms is None:
        print("webgpu gemm: the adapter has no timestamp queries (no kernel-only time)")
    else:
        print(f"webgpu gemm fp32 {n}^3, kernel alone (GPU clock): {ms:.3f} ms per dispatch "
              f"({2 * n ** 3 / ms / 1e6:.1f} GFLOP/s), subgroup size {webgpu.subgroup_size()}")


if __name__ == "__main__":
    main()
