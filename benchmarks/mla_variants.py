"""MLA decode variants timed in one process on the GPU (examples/attention/mla_decode.py):
each variant is the split kernel's tile sizes and pass configs; every shape is timed end to
end (split + combine) and the split kernel alone, in GB/s of cached rows read, beside the
device copy bandwidth measured in the same run.

    python benchmarks/mla_variants.py [--variants JSON] [--splits 2 4 balanced] [--lengths fixed] [--probe]
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

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


def loads_only(batch, heads, num_pages, page_size, max_pages, num_blocks, max_items, block_H=16, block_N=64,
               num_stages=2, threads=128, dim=512, pe_dim=64):
    """The split kernel's memory pipeline with almost none of its arithmetic (the probe): the
    same work list, the same TMA producer and stages, a consumer that multiplies only the
    rotary part (Q_pe K_pe^T, which keeps the TMA producer) and reads one row of the latent
    tile. Its GB/s is the ceiling of the split kernel's schedule (start, tail, item ends)."""

    @T.prim_func
    def probe(Q: T.Tensor((batch, heads, dim + pe_dim), "float16"),
              KV: T.Tensor((num_pages, page_size, 1, dim + pe_dim), "float16"),
              block_table: T.Tensor((batch, max_pages), "int32"),
              block_items: T.Tensor((num_blocks + 1,), "int32"), item_batch: T.Tensor((max_items,), "int32"),
              item_tiles: T.Tensor((max_items, 2), "int32"), out: T.Tensor((max_items, heads, dim), "float32")):
        with T.Kernel(T.ceildiv(heads, block_H), num_blocks, threads=threads) as (hx, bid):
            Q_pe = T.alloc_shared((block_H, pe_dim), "float16")
            KV_s = T.alloc_shared((block_N, dim), "float16")
            K_pe = T.alloc_shared((block_N, pe_dim), "float16")
            scores = T.alloc_fragment((block_H, block_N), "float32")
            acc = T.alloc_fragment((block_H, dim), "float32")
            for it in T.serial(block_items[bid], block_items[bid + 1]):
                b = item_batch[it]
                first = item_tiles[it, 0]
                T.copy(Q[b, hx * block_H:(hx + 1) * block_H, dim:dim + pe_dim], Q_pe)
                T.clear(acc)
                T.clear(scores)
                for t in T.Pipelined(item_tiles[it, 1] - first, num_stages=num_stages):
                    page = block_table[b, (first + t) * block_N // page_size]
                    row = (first + t) * block_N % page_size
                    T.copy(KV[page, row:row + block_N, 0, 0:dim], KV_s)
                    T.copy(KV[page, row:row + block_N, 0, dim:dim + pe_dim], K_pe)
                    T.gemm(Q_pe, K_pe, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                    for i, j in T.Parallel(block_H, dim):
                        acc[i, j] += KV_s[i, j] * scores[i, 0]
                for i, j in T.Parallel(block_H, dim):
                    if hx * block_H + i < heads:
                        out[it, hx * block_H + i, j] = acc[i, j]

    return probe


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
    ap.add_argument("--probe", action="store_true",
                    help="also the split kernel's loads alone (the default tiles) and a read-only pass over the cache")
    args = ap.parse_args()
    variants = json.loads(args.variants)
    x = torch.empty(2 ** 28, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    print(f"device copy: {2 * x.numel() * 2 / bench(lambda: y.copy_(x)) * 1e-6:.0f} GB/s (read + written)")
    if args.probe:
        print(f"device read: {x.numel() * 2 / bench(lambda: x.sum(dtype=torch.float32)) * 1e-6:.0f} GB/s (a sum)")
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
        if args.probe:
            dec = mla_decode.MLADecode(batch, heads, batch * max_pages, page, max_pages, "balanced", 576 ** -0.5,
                                       target="cuda")
            work = dec.plan(lengths)
            tiles = mla_decode.tile_config("cuda", heads)
            kern = tilelang.compile(loads_only(batch, heads, batch * max_pages, page, max_pages, dec.num_blocks,
                                               batch + dec.num_blocks, **tiles), out_idx=[6], target="cuda")
            alone = bench(lambda: kern(q, kv, table, *work[:3]))
            rows.append((f"b{batch} h{heads} s{seqlen} split balanced", "loads only", f"{gb / alone * 1e3:.0f} GB/s"))
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
