"""Where the time of a short Hopper GEMM goes: the kernel alone (CUDA-graph replay), a
call as do_bench times it, and the host's time per call (launches without waiting).

    python3 benchmarks/hopper_overhead.py
"""
import time

import torch
import triton

import tilelang
from gemm_sweep import matmul

for n in (2048, 4096):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    k = tilelang.compile(matmul(n, n, n, 128, 256, 64, 4, 256, "bfloat16"), out_idx=[2], target="cuda")
    call = lambda: k(a, b, c)  # noqa: E731
    call()
    torch.cuda.synchronize()
    flops = 2 * n ** 3
    t_bench = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
    t_graph = triton.testing.do_bench_cudagraph(call, rep=100, return_mode="median")
    t0 = time.perf_counter()
    for _ in range(200):
        call()
    host = (time.perf_counter() - t0) / 200
    torch.cuda.synchronize()
    ref = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")
    print(f"{n}^3: do_bench {flops / t_bench / 1e9:.0f} TFLOP/s ({t_bench * 1e3:.1f} us), graph replay "
          f"{flops / t_graph / 1e9:.0f} ({t_graph * 1e3:.1f} us), host per call {host * 1e6:.1f} us, "
          f"cuBLAS {flops / ref / 1e9:.0f}")
