"""DeepSeek MLA decoding over a paged KV cache: split-KV blocks and a combine kernel.

Multi-head latent attention keeps one compressed KV head per token: 576 values,
the first 512 the latent vector c (which is also the value) and the last 64 the
rotary key part. Every query head attends to the same cached rows:

    s = (q[:512] . c + q[512:] . k_rope) * softmax_scale,   o = softmax(s) @ c

Q is [batch, heads, 576], the cache kv_cache [num_pages, page_size, 1, 576];
position p of sequence b lives in page block_table[b, p // page_size], row
p % page_size, and cache_seqlens[b] >= 1 positions are valid. The sequence is
walked in tiles of block_N rows; block_N divides page_size, so a tile lies inside
one page (with block_N = page_size a tile is a page) and is one T.copy from it.

The work is a list of items, each a run of whole tiles of one sequence, planned on
the host from the sequence lengths (plan_work): "balanced" gives every block (one per
SM and head tile) an equal share of all the tiles, a sequence split wherever a
share ends (the default: 19-27% above four splits a sequence on the H200, lengths
S/2..S); num_split = n gives each sequence n equal shares, a block each. A block
takes block_H query heads and its items one after another, runs the online softmax
over each item's tiles and writes a partial output with its base-2 log-sum-exp (the
TMA producer loads the next item's tiles while the block finishes the last one). The
combine kernel merges each sequence's items: O = sum_i 2^(lse_i - lse) O_i; or
(fuse_combine) the block whose item of a sequence is counted last merges them, its count
an atomic with memory_order="acq_rel" after its partial results.

    python examples/attention/mla_decode.py
    python examples/attention/mla_decode.py --batch 64 --heads 128 --seqlen 4096
    python examples/attention/mla_decode.py --batch 128 --heads 16 --num-split 4
"""

import argparse
import os
import sys

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.jit.backends import resolve_target
from tilelang.profiler import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared combine step
from split_kv import combine_items, merge_rows  # noqa: E402

LOG2E = 1.4426950408889634


def mla_decode_split(batch, heads, num_pages, page_size, max_pages, num_blocks, max_items, softmax_scale,
                     dim=512, pe_dim=64, block_H=64, block_N=64, num_stages=2, threads=256, dtype="float16",
                     fuse_combine=False, pdl=False):
    """Partial attention of each work item: O_part [item, heads, dim] and LSE_part [item, heads].
    Block bid runs items block_items[bid] .. block_items[bid + 1] - 1; item i covers tiles
    item_tiles[i, 0] .. item_tiles[i, 1] - 1 of sequence item_batch[i]. fuse_combine: the
    block that finishes a sequence's last item (counted in seq_done [batch, head tiles],
    zero before the launch and after it) merges the sequence's items into O itself. pdl: the
    combine kernel may launch once every block has started its last item."""
    assert page_size % block_N == 0, "a KV tile must lie inside one page"
    scale = softmax_scale * LOG2E  # scores in base 2: exp2 replaces exp
    accum = "float32"
    merge = merge_rows(block_H, heads, dim)

    @T.macro
    def partials(Q, KV, block_table, cache_seqlens, block_items, item_batch, item_tiles, batch_items, seq_done,
                 O_part, LSE_part, O):
        with T.Kernel(T.ceildiv(heads, block_H), num_blocks, threads=threads) as (hx, bid):
            Q_c = T.alloc_shared((block_H, dim), dtype)
            Q_pe = T.alloc_shared((block_H, pe_dim), dtype)
            KV_s = T.alloc_shared((block_N, dim), dtype)
            K_pe = T.alloc_shared((block_N, pe_dim), dtype)
            # Where P is small (16 heads), two buffers of it alternate between tiles: the next
            # tile writes the other one, so no barrier has to close each tile.
            p_stages = 2 if block_H * block_N <= 2048 else 1
            P_s = T.alloc_shared((p_stages, block_H, block_N), dtype)
            scores = T.alloc_fragment((block_H, block_N), accum)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            row_max = T.alloc_fragment((block_H,), accum)
            row_max_prev = T.alloc_fragment((block_H,), accum)
            denom = T.alloc_fragment((block_H,), accum)
            rescale = T.alloc_fragment((block_H,), accum)
            done_before = T.alloc_shared((1,), "int32")  # fuse_combine: the sequence's items counted before

            for it in T.serial(block_items[bid], block_items[bid + 1]):
                if pdl:
                    if it == block_items[bid + 1] - 1:
                        T.pdl_trigger()
                b = item_batch[it]
                first = item_tiles[it, 0]
                count = item_tiles[it, 1] - first
                seqlen = cache_seqlens[b]
                T.copy(Q[b, hx * block_H:(hx + 1) * block_H, 0:dim], Q_c)
                T.copy(Q[b, hx * block_H:(hx + 1) * block_H, dim:dim + pe_dim], Q_pe)
                T.clear(acc_o)
                T.clear(denom)
                T.fill(row_max, -T.infinity(accum))

                for t in T.Pipelined(count, num_stages=num_stages):
                    # Tile first + t: block_N rows of one page.
                    T.copy(KV[block_table[b, (first + t) * block_N // page_size],
                              (first + t) * block_N % page_size:(first + t) * block_N % page_size + block_N,
                              0, 0:dim], KV_s)
                    T.copy(KV[block_table[b, (first + t) * block_N // page_size],
                              (first + t) * block_N % page_size:(first + t) * block_N % page_size + block_N,
                              0, dim:dim + pe_dim], K_pe)
                    for i, j in T.Parallel(block_H, block_N):
                        scores[i, j] = T.if_then_else((first + t) * block_N + j < seqlen, 0, -T.infinity(accum))
                    T.gemm(Q_c, KV_s, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                    T.gemm(Q_pe, K_pe, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                    T.copy(row_max, row_max_prev)
                    T.reduce_max(scores, row_max, dim=1, clear=False)
                    for i in T.Parallel(block_H):
                        rescale[i] = T.exp2((row_max_prev[i] - row_max[i]) * scale)
                        denom[i] *= rescale[i]
                    for i, j in T.Parallel(block_H, block_N):
                        scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                    T.reduce_sum(scores, denom, dim=1, clear=False)
                    T.copy(scores, P_s[t % p_stages, :, :])
                    for i, j in T.Parallel(block_H, dim):
                        acc_o[i, j] *= rescale[i]
                    T.gemm(P_s[t % p_stages, :, :], KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)

                # An empty item (a split past a short sequence's end) writes O = 0 and
                # lse = -inf: weight 0 when merged.
                for i in T.Parallel(block_H):
                    rescale[i] = T.if_then_else(denom[i] > 0, 1.0 / denom[i], 0)
                for i in T.Parallel(block_H):
                    if hx * block_H + i < heads:
                        LSE_part[it, hx * block_H + i] = T.if_then_else(
                            denom[i] > 0, T.log2(denom[i]) + row_max[i] * scale, -T.infinity(accum))
                for i, j in T.Parallel(block_H, dim):
                    if hx * block_H + i < heads:
                        O_part[it, hx * block_H + i, j] = acc_o[i, j] * rescale[i]
                if fuse_combine:
                    # Counted with acq_rel once the block's partials are written: the last
                    # item of the sequence to be counted sees them all and merges them.
                    T.sync_threads()
                    for i in T.Parallel(1):
                        done_before[i] = T.atomic_add(seq_done[b, hx], 1, return_prev=True, memory_order="acq_rel")
                    if done_before[0] == batch_items[b + 1] - batch_items[b] - 1:
                        merge(LSE_part, O_part, batch_items[b], batch_items[b + 1], hx * block_H, row_max, denom,
                              rescale, acc_o)
                        for i, j in T.Parallel(block_H, dim):
                            if hx * block_H + i < heads:
                                O[b, hx * block_H + i, j] = acc_o[i, j]
                        for i in T.Parallel(1):
                            seq_done[b, hx] = 0  # ready for the next launch

    part_args = dict(
        Q=T.Tensor((batch, heads, dim + pe_dim), dtype),
        KV=T.Tensor((num_pages, page_size, 1, dim + pe_dim), dtype),
        block_table=T.Tensor((batch, max_pages), "int32"),
        cache_seqlens=T.Tensor((batch,), "int32"),
        block_items=T.Tensor((num_blocks + 1,), "int32"),
        item_batch=T.Tensor((max_items,), "int32"),
        item_tiles=T.Tensor((max_items, 2), "int32"),
    )
    if fuse_combine:
        @T.prim_func
        def split_merge(Q: part_args["Q"], KV: part_args["KV"], block_table: part_args["block_table"],
                        cache_seqlens: part_args["cache_seqlens"], block_items: part_args["block_items"],
                        item_batch: part_args["item_batch"], item_tiles: part_args["item_tiles"],
                        batch_items: T.Tensor((batch + 1,), "int32"),
                        seq_done: T.Tensor((batch, -(-heads // block_H)), "int32"),
                        O_part: T.Tensor((max_items, heads, dim), accum), LSE_part: T.Tensor((max_items, heads), accum),
                        O: T.Tensor((batch, heads, dim), dtype)):
            partials(Q, KV, block_table, cache_seqlens, block_items, item_batch, item_tiles, batch_items, seq_done,
                     O_part, LSE_part, O)

        return split_merge

    @T.prim_func
    def split(Q: part_args["Q"], KV: part_args["KV"], block_table: part_args["block_table"],
              cache_seqlens: part_args["cache_seqlens"], block_items: part_args["block_items"],
              item_batch: part_args["item_batch"], item_tiles: part_args["item_tiles"],
              O_part: T.Tensor((max_items, heads, dim), accum), LSE_part: T.Tensor((max_items, heads), accum)):
        partials(Q, KV, block_table, cache_seqlens, block_items, item_batch, item_tiles, None, None, O_part, LSE_part,
                 None)

    return split


def plan_work(seqlens, block_N, num_blocks, num_split="balanced", item_cost=1):
    """The work list for cache lengths `seqlens` (host integers): block_items [num_blocks + 1],
    item_batch, item_tiles [items, 2] (padded to batch + num_blocks items) and batch_items
    [batch + 1] (sequence b's items are batch_items[b] .. batch_items[b + 1] - 1).
    num_split = n: n equal shares of each sequence, one block each (num_blocks = batch * n).
    "balanced": each block an equal share of all the tiles, each item counting item_cost
    tiles more (its start and its partial output)."""
    tiles = [-(-int(n) // block_N) for n in seqlens]
    items, block_items, batch_items = [], [0], [0]
    if num_split != "balanced":
        for n in tiles:
            per = -(-n // num_split)
            for sp in range(num_split):
                items.append((len(batch_items) - 1, min(sp * per, n), min((sp + 1) * per, n)))
                block_items.append(len(items))
            batch_items.append(len(items))
    else:
        # Every block boundary inside a sequence adds an item: at most batch + num_blocks - 1.
        quota = -(-(sum(tiles) + item_cost * (len(tiles) + num_blocks - 1)) // num_blocks)
        budget = quota
        for b, n in enumerate(tiles):
            t = 0
            while t < n:
                last_block = len(block_items) == num_blocks  # it takes the rest
                if not last_block and budget <= item_cost and budget < quota:  # not a tile more: next block
                    block_items.append(len(items))
                    budget = quota
                    continue
                take = n - t if last_block else min(n - t, max(budget - item_cost, 1))
                items.append((b, t, t + take))
                t, budget = t + take, budget - take - item_cost
            batch_items.append(len(items))
    block_items += [len(items)] * (num_blocks + 1 - len(block_items))
    pad = len(seqlens) + num_blocks - len(items)
    item_batch = np.array([i[0] for i in items] + [0] * pad, dtype=np.int32)
    item_tiles = np.array([i[1:] for i in items] + [(0, 0)] * pad, dtype=np.int32).reshape(-1, 2)
    return (np.array(block_items, dtype=np.int32), item_batch, item_tiles, np.array(batch_items, dtype=np.int32))


def tile_config(target, heads):
    """Tile sizes for a target: on CUDA 64 heads per block over two warpgroups (wgmma), also
    for fewer heads (the rows past the last head padding; measured on the H100 at 16 heads:
    2,500 against 2,463 GB/s for 16-row tiles on mma.sync, +5% at s1024: the tensor cores
    work asynchronously, the waits are shorter); on WebGPU tiles that fit its small workgroup
    memory; 16 heads on the CPU."""
    kind = target.split()[0]
    if kind == "cuda":
        return dict(block_H=64, block_N=64, num_stages=2, threads=256)
    if kind == "webgpu":
        return dict(block_H=8, block_N=4, num_stages=1, threads=64)
    return dict(block_H=16, block_N=16, num_stages=1, threads=128)


def default_blocks(target, head_tiles):
    """Blocks of the balanced plan: one per SM and head tile on CUDA (all run at once)."""
    if target.startswith("cuda"):
        import torch
        return max(1, torch.cuda.get_device_properties(0).multi_processor_count // head_tiles)
    return 4


class MLADecode:
    """The split and combine kernels for one problem size and target:
    MLADecode(...)(q, kv_cache, block_table, cache_seqlens[, work]) returns O [batch, heads, 512].
    The work list comes from plan(cache_seqlens), once per decoding step for all its layers
    (the lengths are read on the host), or is planned on each call. pdl (default): the
    combine kernel is launched while the split kernel finishes (programmatic dependent launch,
    +1-2% end to end on the H100); fuse_combine: no combine kernel (measured slower)."""

    def __init__(self, batch, heads, num_pages, page_size, max_pages, num_split="balanced", softmax_scale=None,
                 dim=512, pe_dim=64, target="auto", dtype="float16", pass_configs=None, num_blocks=None,
                 fuse_combine=False, pdl=True, **tiles):
        self.target = resolve_target(target)
        tiles = {**tile_config(self.target, heads), **tiles}
        tiles["block_N"] = self.block_N = min(tiles["block_N"], page_size)
        scale = (dim + pe_dim) ** -0.5 if softmax_scale is None else softmax_scale
        self.num_split = num_split
        if num_split == "balanced":
            self.num_blocks = num_blocks or default_blocks(self.target, -(-heads // tiles["block_H"]))
        else:
            self.num_blocks = batch * num_split
        max_items = batch + self.num_blocks
        self.fuse_combine = fuse_combine
        self.split = tilelang.compile(
            mla_decode_split(batch, heads, num_pages, page_size, max_pages, self.num_blocks, max_items, scale, dim,
                             pe_dim, dtype=dtype, fuse_combine=fuse_combine, pdl=pdl and not fuse_combine,
                             **tiles),
            out_idx=[9, 10, 11] if fuse_combine else [7, 8], target=self.target, pass_configs=pass_configs or {})
        if fuse_combine:  # the sequences' counts, zero between launches (the last block resets its own)
            self.seq_done = np.zeros((batch, -(-heads // tiles["block_H"])), dtype=np.int32)
            if self.target.startswith("cuda"):
                import torch
                self.seq_done = torch.from_numpy(self.seq_done).cuda()
        else:
            self.combine = tilelang.compile(combine_items(batch, heads, max_items, dim, dtype=dtype, pdl=pdl),
                                            out_idx=[3], target=self.target)

    def plan(self, cache_seqlens):
        """The work list (plan_work) for these lengths, on the lengths' device."""
        on_device = hasattr(cache_seqlens, "cpu")
        lengths = cache_seqlens.cpu().numpy() if on_device else np.asarray(cache_seqlens)
        work = plan_work(lengths, self.block_N, self.num_blocks, self.num_split)
        if on_device:
            import torch
            work = tuple(torch.from_numpy(w).to(cache_seqlens.device) for w in work)
        return work

    def __call__(self, q, kv_cache, block_table, cache_seqlens, work=None):
        block_items, item_batch, item_tiles, batch_items = work if work is not None else self.plan(cache_seqlens)
        if self.fuse_combine:
            return self.split(q, kv_cache, block_table, cache_seqlens, block_items, item_batch, item_tiles,
                              batch_items, self.seq_done)[2]
        o_part, lse_part = self.split(q, kv_cache, block_table, cache_seqlens, block_items, item_batch, item_tiles)
        return self.combine(o_part, lse_part, batch_items)


def reference_numpy(q, kv_cache, block_table, cache_seqlens, softmax_scale, dim=512):
    """float64: each sequence's cached rows gathered through its block table, then attention."""
    page_size = kv_cache.shape[1]
    out = np.zeros(q.shape[:2] + (dim,))
    for b in range(q.shape[0]):
        pos = np.arange(cache_seqlens[b])
        rows = kv_cache[block_table[b, pos // page_size], pos % page_size, 0].astype(np.float64)
        s = q[b].astype(np.float64) @ rows.T * softmax_scale
        p = np.exp(s - s.max(-1, keepdims=True))
        out[b] = (p / p.sum(-1, keepdims=True)) @ rows[:, :dim]
    return out


def reference_torch(q, kv_cache, block_table, cache_seqlens, softmax_scale, dim=512):
    """The same in float32 with torch (on the GPU)."""
    import torch
    page_size = kv_cache.shape[1]
    out = torch.zeros(q.shape[:2] + (dim,), device=q.device)
    for b in range(q.shape[0]):
        pos = torch.arange(int(cache_seqlens[b]), device=q.device)
        rows = kv_cache[block_table[b, pos // page_size].long(), pos % page_size, 0].float()
        out[b] = (q[b].float() @ rows.T * softmax_scale).softmax(-1) @ rows[:, :dim]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=None, help="default 64 on a GPU, 2 else")
    parser.add_argument("--heads", type=int, default=None, help="default 128 on a GPU, 16 else")
    parser.add_argument("--seqlen", type=int, default=None,
                        help="longest cache (default 4096 on a GPU, 1024 else)")
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--num-split", default="balanced",
                        help="shares of each sequence, a block each, or 'balanced' (equal shares of all the tiles)")
    parser.add_argument("--block-h", type=int, default=None, help="query heads per block (the target's default)")
    parser.add_argument("--block-n", type=int, default=None, help="cached rows per tile (the target's default)")
    parser.add_argument("--num-stages", type=int, default=None, help="tiles in flight (the target's default)")
    parser.add_argument("--fuse-combine", action="store_true",
                        help="the block finishing a sequence merges its items (no combine kernel)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (the median is printed)")
    parser.add_argument("--target", default="auto")
    args = parser.parse_args(argv)

    target = resolve_target(args.target)
    on_gpu = target.startswith("cuda")
    B = args.batch or (64 if on_gpu else 2)
    H = args.heads or (128 if on_gpu else 16)
    S = args.seqlen or (4096 if on_gpu else 1024)
    P = args.page_size
    max_pages = -(-S // P)
    num_pages = B * max_pages
    scale = 576 ** -0.5
    tiles = {k: v for k, v in (("block_H", args.block_h), ("block_N", args.block_n), ("num_stages", args.num_stages)) if v}
    num_split = args.num_split if args.num_split == "balanced" else int(args.num_split)
    decode = MLADecode(B, H, num_pages, P, max_pages, num_split, scale, target=target,
                       fuse_combine=args.fuse_combine, **tiles)
    print(f"MLA decode: batch {B}, {H} heads, cache up to {S} in pages of {P}, {args.num_split} splits, "
          f"target {target}")

    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, 576)).astype(np.float16)
    kv_cache = rng.standard_normal((num_pages, P, 1, 576)).astype(np.float16)
    block_table = rng.permutation(num_pages).reshape(B, max_pages).astype(np.int32)  # pages anywhere
    seqlens = rng.integers(S // 2, S + 1, size=B).astype(np.int32)
    seqlens[0] = S
    args_in = (q, kv_cache, block_table, seqlens)
    if on_gpu:
        import torch
        args_in = tuple(torch.from_numpy(a).cuda() for a in args_in)
        ref = reference_torch(*args_in, scale).cpu().numpy()
    else:
        ref = reference_numpy(*args_in, scale)
    out = np.asarray(decode(*args_in).cpu() if on_gpu else decode(*args_in)).astype(np.float64)
    err = float(np.max(np.abs(out - ref)))
    ok = bool(np.all(np.isfinite(out))) and err < 2e-2
    print(f"max abs error vs {'torch' if on_gpu else 'numpy'}: {err:.2e} {'PASS' if ok else 'FAIL'}")

    work = decode.plan(args_in[3])  # once per decoding step
    ms = do_bench(lambda: decode(*args_in, work), warmup=3, rep=args.repeat)
    kv_bytes = int(seqlens.sum()) * 576 * 2  # the cached rows read, float16
    flops = int(seqlens.sum()) * H * (576 + 512) * 2  # scores over 576 dims, output over 512
    print(f"time {ms:.3f} ms, KV read {kv_bytes / 1e6:.1f} MB: {kv_bytes / ms * 1e-6:.2f} GB/s, "
          f"{flops / ms * 1e-9:.1f} TFLOP/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
