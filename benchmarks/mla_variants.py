"""MLA decode variants timed in one process on the GPU (examples/attention/mla_decode.py):
each variant is the split kernel's tile sizes and pass configs; every shape is timed end to
end (split + combine) and the split kernel alone, in GB/s of cached rows read, beside the
device copy bandwidth measured in the same run.

    python benchmarks/mla_variants.py [--variants JSON] [--splits 2 4 balanced] [--lengths fixed]
    JSON: {"name": {"block_H": 16, "block_N": 32, "num_stages": 2, "num_blocks": 264, "fuse_combine": true,
                    "pass_configs": {"tl.disable_warp_specialized": true}}, ...}
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "attention"))
import mla_decode  # noqa: E402

SHAPES = [(128, 16, 4096), (64, 16, 8192), (128, 16, 1024), (64, 128, 4096)]  # batch, heads, longest cache
DEFAULT = {"default": {}}


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=json.dumps(DEFAULT))
    ap.add_argument("--splits", nargs="+", default=["balanced", "4"], help="shares of each sequence, or balanced")
    ap.add_argument("--lengths", default="varied", choices=["varied", "fixed"],
                    help="cache lengths drawn from S/2..S (one of them S), or all S")
    args = ap.parse_args()
    variants = json.loads(args.variants)
    x = torch.empty(2 ** 28, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    print(f"device copy: {2 * x.numel() * 2 / bench(lambda: y.copy_(x)) * 1e-6:.0f} GB/s (read + written)")
    del x, y
    rows = []
    for batch, heads, seqlen in SHAPES:
        page = 64
        max_pages = -(-seqlen // page)
        rng = np.random.default_rng(0)
        q = torch.from_numpy(rng.standard_normal((batch, heads, 576)).astype(np.float16)).cuda()
        kv = torch.from_numpy(rng.standard_normal((batch * max_pages, page, 1, 576)).astype(np.float16)).cuda()
        table = torch.from_numpy(rng.permutation(batch * max_pages).reshape(batch, max_pages).astype(np.int32)).cuda()
        lengths = rng.integers(seqlen // 2, seqlen + 1, size=batch).astype(np.int32)
        lengths[0] = seqlen
        if args.lengths == "fixed":
            lengths[:] = seqlen
        gb = lengths.sum() * 576 * 2 / 1e9
        lengths = torch.from_numpy(lengths).cuda()
        ref = mla_decode.reference_torch(q, kv, table, lengths, 576 ** -0.5)
        for name, v in variants.items():
            v = dict(v)
            pass_configs = v.pop("pass_configs", None)
            for splits in (x if x == "balanced" else int(x) for x in args.splits):
                label = f"b{batch} h{heads} s{seqlen} split {splits}"
                try:
                    dec = mla_decode.MLADecode(batch, heads, batch * max_pages, page, max_pages, splits,
                                               576 ** -0.5, target="cuda", pass_configs=pass_configs, **v)
                    work = dec.plan(lengths)  # once per decoding step, outside the timing
                    err = float((dec(q, kv, table, lengths, work).float() - ref).abs().max())
                    total = bench(lambda: dec(q, kv, table, lengths, work))
                    alone = total if dec.fuse_combine else bench(lambda: dec.split(q, kv, table, lengths, *work[:3]))
                except Exception as e:  # a variant that fails is reported, not fatal
                    rows.append((label, name, f"failed: {str(e).splitlines()[0][:80]}"))
                    continue
                rows.append((label, name, f"{gb / total * 1e3:.0f} GB/s end to end, split kernel {gb / alone * 1e3:.0f}"
                                          f"{'' if err < 2e-2 else f', WRONG (max error {err:.2e})'}"))
    width = max(len(r[0]) for r in rows)
    for label, name, text in rows:
        print(f"{label:<{width}}  {name:<12}  {text}")


if __name__ == "__main__":
    main()
