"""The autotuner on a GEMM of 126 configurations: wall time, compile and benchmark time, the
best configuration's TFLOP/s against the reference, and how many candidates the static
filter rejected or failed. Run it twice with the same TILELANG_CACHE_DIR: the second run is
a cache hit (nothing compiled but the winner, nothing timed).

    python3 benchmarks/autotune_bench.py --target cuda      # bf16 8192^3 against torch.matmul
    python3 benchmarks/autotune_bench.py --target cpu       # float32 256^3 on the host

Prints one JSON line per run.
"""
import argparse
import itertools
import json
import os
import time
from collections import Counter

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner

# 3 x 3 x 3 x 3 x 2 candidates, less those whose accumulator tile would give a thread more
# than 128 floats (more than its registers: spills that only slow compiling and timing
# down; a first H200 run of such a space did not finish in 170 s): 126 candidates. The
# ones over the shared memory of a block are rejected by the static filter without
# compiling.
SPACE = dict(block_M=[64, 128, 256], block_N=[64, 128, 256], block_K=[32, 64, 128], num_stages=[2, 3, 4],
             threads=[128, 256])


def configs():
    keys = list(SPACE)
    out = [dict(zip(keys, values)) for values in itertools.product(*SPACE.values())]
    return [c for c in out if c["block_M"] * c["block_N"] // c["threads"] <= 128]


def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128, dtype="float16"):
    accum = "float32"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum)
            T.use_swizzle(8)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--executor", default="local", help='"local", or "ray" (a Ray instance on this machine: '
                    'compiles on its CPU workers, times on one worker per GPU)')
    args = ap.parse_args()
    os.environ.setdefault("TILELANG_AUTO_TUNING_QUIET", "1")
    cuda = args.target.startswith("cuda")
    n = args.size or (8192 if cuda else 256)
    dtype = "bfloat16" if cuda else "float32"
    if cuda:
        import torch
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        inputs = [a, b]

        def ref(x, y):
            return torch.matmul(x, y)
    else:
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(2)]

        def ref(x, y):
            return np.asarray(x) @ np.asarray(y)

    def factory(block_M=128, block_N=128, block_K=32, num_stages=2, threads=128):
        return matmul(n, n, n, block_M, block_N, block_K, num_stages, threads, dtype)

    from tilelang.autotuner import set_autotune_inputs
    t0 = time.perf_counter()
    with set_autotune_inputs(*inputs):
        result = (AutoTuner.from_kernel(kernel=factory, configs=configs())
                  .set_compile_args(out_idx=[-1], target=args.target)
                  .set_profile_args(ref_prog=ref, rtol=2e-2, atol=2e-2 if not cuda else 1.0, warmup=3, rep=10)
                  .set_executor(args.executor)
                  .run(warmup=3, rep=10))
    wall = time.perf_counter() - t0
    flops = 2.0 * n ** 3
    outcomes = Counter(r.status for r in result.records) if result.records else Counter()
    line = dict(target=args.target, size=n, dtype=dtype, configs=len(configs()), wall_s=round(wall, 2),
                tuning_s=round(result.tuning_time or 0, 2), compile_s=round(result.compile_seconds or 0, 2),
                bench_s=round(result.bench_seconds or 0, 2), best=result.config,
                best_tflops=round(flops / result.latency / 1e9, 1) if result.latency else None,
                outcomes=dict(outcomes), cache_hit=result.cache_hit, cpus=os.cpu_count(), executor=args.executor,
                workers=sorted({r.worker.split(": ")[0] for r in result.records if r.worker}))
    if cuda:
        import triton
        ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")
        line["reference_tflops"] = round(flops / ms / 1e9, 1)
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
