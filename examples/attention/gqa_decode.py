"""Flash decoding: grouped-query attention for one new token per sequence.

Q is [batch, heads, dim] (the new token's queries), the KV cache is
[batch, seqlen_kv, heads_kv, dim] with cache_seqlens[b] valid positions in
sequence b. The heads_q = groups * heads_kv query heads that share a KV head
are processed together by one block, so the score multiply Q K^T has
`groups` rows (padded to block_H).

One query row alone cannot fill a GPU, so the KV length is also split into
num_split chunks, each handled by its own block (flash decoding): a block
runs the online softmax over its chunk and writes a partial output together
with its log-sum-exp (base 2, float32). A second kernel merges the partials:

    O = sum_s 2^(lse_s - lse) * O_s,   lse = log2(sum_s 2^lse_s)

    python examples/attention/gqa_decode.py
    python examples/attention/gqa_decode.py --batch 8 --heads 32 --heads-kv 8 --seqlen 8192 --num-split 8
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
from split_kv import combine  # noqa: E402

LOG2E = 1.4426950408889634


def gqa_decode_split(batch, heads, heads_kv, seqlen_kv, dim, num_split, block_H=16, block_N=64,
                     num_stages=2, threads=128, dtype="float16"):
    """Partial attention of each (KV head, split, sequence): O_part and LSE_part."""
    groups = heads // heads_kv
    assert groups * heads_kv == heads and groups <= block_H
    scale = dim ** -0.5 * LOG2E  # scores in base 2: exp2 replaces exp
    accum = "float32"

    @T.prim_func
    def split(
        Q: T.Tensor((batch, heads, dim), dtype),
        K: T.Tensor((batch, seqlen_kv, heads_kv, dim), dtype),
        V: T.Tensor((batch, seqlen_kv, heads_kv, dim), dtype),
        cache_seqlens: T.Tensor((batch,), "int32"),
        O_part: T.Tensor((batch, heads, num_split, dim), accum),
        LSE_part: T.Tensor((batch, heads, num_split), accum),
    ):
        with T.Kernel(heads_kv, num_split, batch, threads=threads) as (hk, sp, b):
            Q_s = T.alloc_shared((block_H, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            scores = T.alloc_fragment((block_H, block_N), accum)
            probs = T.alloc_fragment((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            row_max = T.alloc_fragment((block_H,), accum)
            row_max_prev = T.alloc_fragment((block_H,), accum)
            denom = T.alloc_fragment((block_H,), accum)
            rescale = T.alloc_fragment((block_H,), accum)  # per-row factors of the output

            # This split's KV tiles: an equal share of the sequence's valid tiles.
            seqlen = cache_seqlens[b]
            n_tiles = T.ceildiv(seqlen, block_N)
            per_split = T.ceildiv(n_tiles, num_split)
            first = sp * per_split
            count = T.max(T.min(per_split, n_tiles - first), 0)

            T.clear(Q_s)  # rows past `groups` stay zero
            T.copy(Q[b, hk * groups:(hk + 1) * groups, :], Q_s[0:groups, :])
            T.clear(acc_o)
            T.clear(denom)
            T.fill(row_max, -T.infinity(accum))

            for t in T.Pipelined(count, num_stages=num_stages):
                T.copy(K[b, (first + t) * block_N:(first + t + 1) * block_N, hk, :], K_s)
                for i, j in T.Parallel(block_H, block_N):
                    scores[i, j] = T.if_then_else((first + t) * block_N + j < seqlen, 0, -T.infinity(accum))
                T.gemm(Q_s, K_s, scores, transpose_B=True)
                T.copy(row_max, row_max_prev)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2((row_max_prev[i] - row_max[i]) * scale)
                    denom[i] *= rescale[i]
                for i, j in T.Parallel(block_H, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, denom, dim=1, clear=False)
                T.copy(scores, probs)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(V[b, (first + t) * block_N:(first + t + 1) * block_N, hk, :], V_s)
                T.gemm(probs, V_s, acc_o)

            # An empty split (short sequence) writes O = 0 and lse = -inf: weight 0 when merged.
            for i in T.Parallel(block_H):
                rescale[i] = T.if_then_else(denom[i] > 0, 1.0 / denom[i], 0)
            for i in T.Parallel(block_H):
                if i < groups:
                    LSE_part[b, hk * groups + i, sp] = T.if_then_else(
                        denom[i] > 0, T.log2(denom[i]) + row_max[i] * scale, -T.infinity(accum))
            for i, j in T.Parallel(block_H, dim):
                if i < groups:
                    O_part[b, hk * groups + i, sp, j] = acc_o[i, j] * rescale[i]

    return split


def tile_config(target):
    """Tile sizes for a target: on CUDA 64 query rows (one wgmma / four mma.sync row
    blocks; the rows past `groups` are padding), 16 elsewhere; on WebGPU tiles that fit
    its small workgroup memory."""
    kind = target.split()[0]
    if kind == "cuda":
        return dict(block_H=64, block_N=64, num_stages=2, threads=128)
    if kind == "webgpu":
        return dict(block_H=16, block_N=16, num_stages=1, threads=128)
    return dict(block_H=16, block_N=64, num_stages=1, threads=128)


class GQADecode:
    """The split and combine kernels compiled for one problem size and target:
    GQADecode(...)(q, k, v, cache_seqlens) returns O [batch, heads, dim]."""

    def __init__(self, batch, heads, heads_kv, seqlen_kv, dim=128, num_split=4, target="auto",
                 dtype="float16", **tiles):
        self.target = resolve_target(target)
        tiles = {**tile_config(self.target), **tiles}
        self.split = tilelang.compile(
            gqa_decode_split(batch, heads, heads_kv, seqlen_kv, dim, num_split, dtype=dtype, **tiles),
            out_idx=[4, 5], target=self.target)
        self.combine = tilelang.compile(combine(batch, heads, num_split, dim, dtype=dtype), out_idx=[2],
                                        target=self.target)

    def __call__(self, q, k, v, cache_seqlens):
        o_part, lse_part = self.split(q, k, v, cache_seqlens)
        return self.combine(o_part, lse_part)


def reference_numpy(q, k, v, cache_seqlens):
    """float64 attention of each query over the first cache_seqlens[b] cached positions."""
    groups = q.shape[1] // k.shape[2]
    k64 = np.repeat(k.astype(np.float64), groups, axis=2)
    v64 = np.repeat(v.astype(np.float64), groups, axis=2)
    s = np.einsum("bhd,bshd->bhs", q.astype(np.float64), k64) / np.sqrt(q.shape[-1])
    s = np.where(np.arange(k.shape[1])[None, None, :] < cache_seqlens[:, None, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhs,bshd->bhd", p / p.sum(-1, keepdims=True), v64)


def reference_torch(q, k, v, cache_seqlens):
    """The same in float32 with torch (on the GPU)."""
    import torch
    groups = q.shape[1] // k.shape[2]
    k32 = k.float().repeat_interleave(groups, dim=2)
    s = torch.einsum("bhd,bshd->bhs", q.float(), k32) * q.shape[-1] ** -0.5
    pos = torch.arange(k.shape[1], device=k.device)
    s = s.masked_fill(pos[None, None, :] >= cache_seqlens[:, None, None], float("-inf"))
    return torch.einsum("bhs,bshd->bhd", s.softmax(-1), v.float().repeat_interleave(groups, dim=2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--seqlen", type=int, default=None,
                        help="KV cache length (default 8192 on a GPU, 1024 else)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--num-split", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (the median is printed)")
    parser.add_argument("--target", default="auto")
    args = parser.parse_args(argv)

    target = resolve_target(args.target)
    on_gpu = target.startswith("cuda")
    B, H, HK, D = args.batch, args.heads, args.heads_kv, args.dim
    S = args.seqlen or (8192 if on_gpu else 1024)
    decode = GQADecode(B, H, HK, S, D, args.num_split, target=target)
    print(f"GQA decode: batch {B}, {H} query heads on {HK} KV heads, head dim {D}, cache {S}, "
          f"{args.num_split} splits, target {target}")

    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, D)).astype(np.float16)
    k = rng.standard_normal((B, S, HK, D)).astype(np.float16)
    v = rng.standard_normal((B, S, HK, D)).astype(np.float16)
    seqlens = rng.integers(S // 2, S + 1, size=B).astype(np.int32)  # ragged valid lengths
    seqlens[0] = S
    args_in = (q, k, v, seqlens)
    if on_gpu:
        import torch
        args_in = tuple(torch.from_numpy(a).cuda() for a in args_in)
        ref = reference_torch(*args_in).cpu().numpy()
    else:
        ref = reference_numpy(*args_in)
    out = np.asarray(decode(*args_in).cpu() if on_gpu else decode(*args_in)).astype(np.float64)
    err = float(np.max(np.abs(out - ref)))
    ok = bool(np.all(np.isfinite(out))) and err < 2e-2
    print(f"max abs error vs {'torch' if on_gpu else 'numpy'}: {err:.2e} {'PASS' if ok else 'FAIL'}")

    ms = do_bench(lambda: decode(*args_in), warmup=3, rep=args.repeat)
    kv_bytes = 2 * int(seqlens.sum()) * HK * D * 2  # K and V, float16
    print(f"time {ms:.3f} ms, KV read {kv_bytes / 1e6:.1f} MB: {kv_bytes / ms * 1e-6:.2f} GB/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
