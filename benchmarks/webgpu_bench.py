"""The WebGPU back end on this machine's adapter: a float32 GEMM 1024^3 against numpy, and the
adapter in use. Two times: a call (it uploads its inputs and reads its output back: the
runtime keeps no tensors on the device), and the kernel alone on the GPU's clock
(timestamp queries around 20 dispatches), where the adapter has timestamp queries.

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
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        kernel(a, b)
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    t0 = time.perf_counter()
    a @ b
    t_np = time.perf_counter() - t0
    print(f"webgpu gemm fp32 {n}^3: {t * 1e3:.1f} ms per call ({2 * n ** 3 / t / 1e9:.1f} GFLOP/s, transfers "
          f"included), rel err {err:.1e}; numpy {t_np * 1e3:.1f} ms")
    plain = tilelang.compile(matmul(n, n, n, 64, 64, 16, num_stages=1, threads=256), target="webgpu")
    ms = webgpu.time_dispatches(plain, [a, b, np.zeros((n, n), np.float32)], reps=20)
    if ms is None:
        print("webgpu gemm: the adapter has no timestamp queries (no kernel-only time)")
    else:
        print(f"webgpu gemm fp32 {n}^3, kernel alone (GPU clock): {ms:.3f} ms per dispatch "
              f"({2 * n ** 3 / ms / 1e6:.1f} GFLOP/s), subgroup size {webgpu.subgroup_size()}")


if __name__ == "__main__":
    main()
