"""FlashAttention-forward sweep in the plain TileLang dialect (tests/python/kernels/
attention.py, the upstream-style kernel: T.gemm, T.reduce_max/sum, T.Pipelined), run
unchanged by whichever `tilelang` package is importable, so this project and upstream
TileLang (in a separate process) compile the same source with the same configurations.
Prints JSON lines in gemm_sweep.py's format; benchmarks/hopper_table.py joins the runs.

    python3 benchmarks/attention_sweep.py --label ours [--refs]

--refs also measures torch SDPA with the cuDNN back end on the same inputs.
"""
import argparse
import json
import os
import sys
import time

import torch
import triton

from sweep_common import context_lost

import tilelang

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from kernels.attention import flash_attention_fwd  # noqa: E402

# (block_M, block_N, num_stages, threads): the same list for every implementation.
CONFIGS = [(64, 64, 2, 128), (128, 64, 2, 256), (128, 128, 2, 256), (128, 128, 1, 256), (192, 128, 2, 384)]
# (batch, heads, seq, dim, causal)
SHAPES = [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (4, 16, 4096, 64, False),
          (4, 16, 4096, 64, True), (1, 32, 8192, 128, False), (4, 16, 4096, 256, False), (4, 16, 4096, 256, True)]


def emit(**kw):
    print(json.dumps(kw), flush=True)



def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--refs", action="store_true")
    ap.add_argument("--pass-configs", default="{}", help="JSON dict of pass configs for every kernel")
    ap.add_argument("--configs", default=None, help="JSON list of [block_M, block_N, stages, threads] (default: all)")
    ap.add_argument("--shapes", default=None, help="JSON list of [batch, heads, seq, dim, causal] (default: all)")
    ap.add_argument("--persistent", type=int, default=None, help="B blocks taking the query tiles in turn")
    ap.add_argument("--tile-order", default=None, help="causal tiles: head_groups (default), by_head or longest_first")
    ap.add_argument("--schedule", default=None, help="JSON dict of T.Pipelined's order / stage / group (ours only)")
    args = ap.parse_args()
    configs = [tuple(c) for c in json.loads(args.configs)] if args.configs else CONFIGS
    pass_configs = json.loads(args.pass_configs)
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    if hasattr(tilelang, "disable_cache"):
        tilelang.disable_cache()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")  # noqa: E731
    shapes = [tuple(x) for x in json.loads(args.shapes)] if args.shapes else SHAPES
    for b, h, s, d, causal in shapes:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # SDPA's native layout

        def sdpa(backend=SDPBackend.CUDNN_ATTENTION):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        try:
            expected = sdpa().transpose(1, 2)
            have_cudnn = True
        except RuntimeError:  # no cuDNN kernel for this shape / build: the math back end checks
            expected = sdpa(SDPBackend.MATH).transpose(1, 2)
            have_cudnn = False
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        kind = f"fa fwd d{d}{' causal' if causal else ''}"
        shape = f"b{b} h{h} s{s}"
        for cfg in configs:
            bm, bn, stages, threads = cfg
            try:
                t0 = time.perf_counter()
                sched = {"schedule": json.loads(args.schedule)} if args.schedule else {}
                if args.persistent:
                    sched["persistent"] = args.persistent
                if args.tile_order:
                    sched["tile_order"] = args.tile_order
                kern = tilelang.compile(flash_attention_fwd(b, h, s, d, causal, block_M=bm, block_N=bn,
                                                            num_stages=stages, threads=threads, **sched),
                                        out_idx=[-1], target="cuda", **({"pass_configs": pass_configs} if pass_configs else {}))
                compile_s = time.perf_counter() - t0
                err = rel_err(kern(q, k, v), expected)
                ms = bench(lambda: kern(q, k, v))
            except Exception as e:  # a configuration that fails is reported, not fatal
                emit(label=args.label, dtype=kind, shape=shape, cfg=list(cfg), error=str(e).splitlines()[0][:160])
                if context_lost():
                    print(f"the CUDA context is lost after {kind} {shape} {cfg}: stopping the sweep", file=sys.stderr)
                    sys.exit(2)
                continue
            emit(label=args.label, dtype=kind, shape=shape, cfg=list(cfg), tflops=flops / ms / 1e9, err=err,
                 compile_s=compile_s)
            dump = os.environ.get("ATTENTION_SWEEP_DUMP")
            if dump and d == 128 and not causal and cfg == (128, 128, 2, 256) and not os.path.exists(dump):
                with open(dump, "w") as f:
                    f.write(kern.get_kernel_source())
        if args.refs and have_cudnn:
            emit(label="cuDNN SDPA", dtype=kind, shape=shape, cfg=None, tflops=flops / bench(sdpa) / 1e9, err=0.0)
        elif args.refs:
            emit(label="cuDNN SDPA", dtype=kind, shape=shape, cfg=None, error="no cuDNN kernel for this shape")
        if args.refs:
            try:  # torch's FlashAttention back end (FlashAttention-2 kernels)
                flash = lambda: sdpa(SDPBackend.FLASH_ATTENTION)  # noqa: E731
                err = rel_err(flash().transpose(1, 2), expected)
                emit(label="flash SDPA", dtype=kind, shape=shape, cfg=None, tflops=flops / bench(flash) / 1e9, err=err)
            except RuntimeError as e:  # no flash kernel for this shape / build
                emit(label="flash SDPA", dtype=kind, shape=shape, cfg=None, error=str(e).splitlines()[0][:160])
        del q, k, v, qt, kt, vt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
