"""CPU back end figures in one run: cold compile and cache-hit time of the example GEMM,
and GEMM 1024^3 fp32 against numpy's matmul measured in the same run.

    .venv/bin/python benchmarks/cpu_bench.py [--size 1024] [--reps 10]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

_CHILD = textwrap.dedent("""
    import sys, time
    t_start = time.perf_counter()
    sys.path.insert(0, {examples!r})
    import tilelang
    from gemm import matmul
    t_import = time.perf_counter()
    kernel = matmul({n}, {n}, {n})
    t_done = time.perf_counter()
    print(kernel.cache_hit or "compiled", kernel.compile_time, t_import - t_start, t_done - t_import)
""")


def run_child(n: int, cache: str):
    code = _CHILD.format(examples=str(ROOT / "examples"), n=n)
    env = dict(os.environ, TILELANG_CACHE_DIR=cache)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    status, compile_s, import_s, build_s = r.stdout.split()
    return status, float(compile_s), float(import_s), float(build_s), wall


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    n = args.size

    with tempfile.TemporaryDirectory() as cache:
        cold = run_child(n, cache)
        warm = run_child(n, cache)
    assert cold[0] == "compiled" and warm[0] == "disk", (cold, warm)

    sys.path.insert(0, str(ROOT / "examples"))
    from gemm import matmul  # noqa: E402
    kernel = matmul(n, n, n)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = kernel(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
    ours = median_ms(lambda: kernel(a, b), args.reps)
    theirs = median_ms(lambda: a @ b, args.reps)
    flop = 2.0 * n ** 3

    rows = [
        ("cold compile (parse+lower+codegen+c++), s", f"{cold[1]:.3f}"),
        ("cache hit in a new process: compile(), ms", f"{warm[1] * 1e3:.1f}"),
        ("cache hit: import tilelang, ms", f"{warm[2] * 1e3:.1f}"),
        ("cache hit: whole process, s", f"{warm[4]:.3f}"),
        (f"GEMM {n}^3 fp32 ours, ms (GFLOP/s)", f"{ours:.2f} ({flop / ours / 1e6:.1f})"),
        (f"GEMM {n}^3 fp32 numpy, ms (GFLOP/s)", f"{theirs:.2f} ({flop / theirs / 1e6:.1f})"),
        ("ratio ours / numpy speed", f"{theirs / ours:.2f}x"),
        ("max relative error vs float64", f"{rel:.2e}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
