"""FlashAttention-backward sweep: examples/attention/flash_attn_bwd.py (preprocess for
Delta, the dK/dV kernel with dQ by atomics, the dQ postprocess), timed end to end against
torch SDPA's backward with the cuDNN and the flash back ends on the same inputs.
Prints JSON lines in gemm_sweep.py's format; benchmarks/hopper_table.py joins them.

    python3 benchmarks/attention_bwd_sweep.py --label ours --refs
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

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "attention", "flash_attn_bwd.py")


def load_example(path):
    """FlashAttention of the example at `path` (the project's, or a variant of it)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FlashAttention

# (block_M, block_N, num_stages, threads, how dQ is accumulated) of the backward: "laid out"
# (atomics into dQ stored for coalescing), "plain" (atomics), "tma" (a TMA reduction of a
# shared tile per step, sm_90a).
CONFIGS = [(64, 64, 1, 128, "laid out"), (64, 64, 2, 128, "laid out"), (64, 128, 2, 256, "laid out"),
           (128, 64, 2, 256, "laid out"), (64, 64, 2, 128, "plain"), (64, 128, 2, 256, "plain"),
           (64, 64, 2, 128, "tma"), (64, 128, 2, 256, "tma")]
# (batch, heads, seq, dim, causal)
SHAPES = [(4, 16, 4096, 64, False), (4, 16, 4096, 64, True), (4, 16, 4096, 128, False),
          (4, 16, 4096, 128, True)]


def emit(**kw):
    print(json.dumps(kw), flush=True)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def kernel_times(fa, q, k, v, o, lse, do, bench):
    """Milliseconds of each of the backward's three kernels (and of zeroing dQ's accumulator)."""
    delta = fa.pre(o, do)
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    return {"ms_pre": bench(lambda: fa.pre(o, do)), "ms_zero": bench(lambda: dq_acc.zero_()),
            "ms_main": bench(lambda: fa.main(q, k, v, do, lse, delta, dq_acc)),
            "ms_post": bench(lambda: fa.post(dq_acc))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--refs", action="store_true")
    ap.add_argument("--pass-configs", default="{}", help="JSON dict of pass configs for the main kernel")
    ap.add_argument("--configs", default=None,
                    help='JSON list of [block_M, block_N, stages, threads, "laid out" | "plain" | "tma" (, tile_order)] (default: all)')
    ap.add_argument("--example", default=EXAMPLE, help="a variant of examples/attention/flash_attn_bwd.py")
    ap.add_argument("--dims", default=None, help="JSON list of head dims to run (default: all)")
    args = ap.parse_args()
    FlashAttention = load_example(args.example)
    shapes = [sh for sh in SHAPES if args.dims is None or sh[3] in json.loads(args.dims)]
    configs = [tuple(c) for c in json.loads(args.configs)] if args.configs else CONFIGS
    pass_configs = json.loads(args.pass_configs) or None
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    tilelang.disable_cache()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")  # noqa: E731
    for b, h, s, d, causal in shapes:
        torch.manual_seed(0)
        # The example's layout: [batch, seq, heads, dim].
        q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
        leaves = [x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v)]
        grad_out = do.transpose(1, 2)

        def sdpa_backward(backend):
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
            return lambda: torch.autograd.grad(out, leaves, grad_out, retain_graph=True)

        expected = [g.transpose(1, 2) for g in sdpa_backward(SDPBackend.CUDNN_ATTENTION)()]
        flops = 5 * 2.0 * b * h * s * s * d * (0.5 if causal else 1.0)  # five S-sized products
        kind = f"fa bwd d{d}{' causal' if causal else ''}"
        shape = f"b{b} h{h} s{s}"
        for cfg in configs:
            bm, bn, stages, threads, dq_mode, *order = cfg  # an optional sixth entry: tile_order
            try:
                t0 = time.perf_counter()
                fa = FlashAttention(b, h, s, d, causal, bm, bn, stages, threads, target="cuda",
                                    dq_laid_out=dq_mode == "laid out", dq_by_tma=dq_mode == "tma",
                                    **({"tile_order": order[0]} if order else {}),
                                    pass_configs=pass_configs)
                compile_s = time.perf_counter() - t0
                o, lse = fa.fwd(q, k, v)
                grads = fa.bwd(q, k, v, o, lse, do)
                err = max(rel_err(g, e) for g, e in zip(grads, expected))
                ms = bench(lambda: fa.bwd(q, k, v, o, lse, do))
            except Exception as e:  # a configuration that fails is reported, not fatal
                emit(label=args.label, dtype=kind, shape=shape, cfg=list(cfg), error=str(e).splitlines()[0][:160])
                if context_lost():
                    print(f"the CUDA context is lost after {kind} {shape} {cfg}: stopping the sweep", file=sys.stderr)
                    sys.exit(2)
                continue
            emit(label=args.label, dtype=kind, shape=shape, cfg=list(cfg), tflops=flops / ms / 1e9, err=err,
                 compile_s=compile_s, **kernel_times(fa, q, k, v, o, lse, do, bench))
            dump = os.environ.get("ATTENTION_BWD_DUMP")  # the main kernel's source, one per configuration at d128
            if dump and d == 128 and not causal:
                with open(f"{dump}.{'_'.join(map(str, cfg)).replace(' ', '_')}.cu", "w") as f:
                    f.write(fa.main.get_kernel_source())
        if args.refs:
            for name, backend in (("cuDNN SDPA", SDPBackend.CUDNN_ATTENTION), ("flash SDPA", SDPBackend.FLASH_ATTENTION)):
                try:
                    emit(label=name, dtype=kind, shape=shape, cfg=None,
                         tflops=flops / bench(sdpa_backward(backend)) / 1e9, err=0.0)
                except Exception as e:  # a back end torch does not have here
                    print(f"{name} backward: {str(e).splitlines()[0][:160]}", file=sys.stderr)
        del q, k, v, do, leaves, grad_out, expected
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
