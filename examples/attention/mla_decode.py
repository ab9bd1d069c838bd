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
A block takes block_H query heads of one sequence and one of num_split equal
shares of the sequence's tiles; it runs the online softmax over them and writes
a partial output with its base-2 log-sum-exp. The combine kernel merges the
shares: O = sum_s 2^(lse_s - lse) O_s.

    python examples/attention/mla_decode.py
    python examples/attention/mla_decode.py --batch 64 --heads 128 --seqlen 4096 --num-split 4
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


def mla_decode_split(batch, heads, num_pages, page_size, max_pages, num_split, softmax_scale,
                     dim=512, pe_dim=64, block_H=64, block_N=64, num_stages=2, threads=256, dtype="float16"):
    """Partial attention of each (head tile, split, sequence): O_part and LSE_part."""
    assert page_size % block_N == 0, "a KV tile must lie inside one page"
    scale = softmax_scale * LOG2E  # scores in base 2: exp2 replaces exp
    accum = "float32"

    @T.prim_func
    def split(
        Q: T.Tensor((batch, heads, dim + pe_dim), dtype),
        KV: T.Tensor((num_pages, page_size, 1, dim + pe_dim), dtype),
        block_table: T.Tensor((batch, max_pages), "int32"),
        cache_seqlens: T.Tensor((batch,), "int32"),
        O_part: T.Tensor((batch, heads, num_split, dim), accum),
        LSE_part: T.Tensor((batch, heads, num_split), accum),
    ):
        with T.Kernel(T.ceildiv(heads, block_H), num_split, batch, threads=threads) as (hx, sp, b):
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

            seqlen = cache_seqlens[b]
            n_tiles = T.ceildiv(seqlen, block_N)
            per_split = T.ceildiv(n_tiles, num_split)
            first = sp * per_split
            count = T.max(T.min(per_split, n_tiles - first), 0)

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

            # An empty split (short sequence) writes O = 0 and lse = -inf: weight 0 when merged.
            for i in T.Parallel(block_H):
                rescale[i] = T.if_then_else(denom[i] > 0, 1.0 / denom[i], 0)
            for i in T.Parallel(block_H):
                if hx * block_H + i < heads:
                    LSE_part[b, hx * block_H + i, sp] = T.if_then_else(
                        denom[i] > 0, T.log2(denom[i]) + row_max[i] * scale, -T.infinity(accum))
            for i, j in T.Parallel(block_H, dim):
                if hx * block_H + i < heads:
                    O_part[b, hx * block_H + i, sp, j] = acc_o[i, j] * rescale[i]

    return split


def tile_config(target, heads):
    """Tile sizes for a target: on CUDA 64 heads per block over two warpgroups (wgmma), or
    with fewer heads a block of them rounded up to 16 on mma.sync over 4 warps (a 64-row
    tile would be mostly padding, and the memory-bound decode would wait on its products); on WebGPU
    tiles that fit its small workgroup memory; 16 heads on the CPU."""
    kind = target.split()[0]
    if kind == "cuda":
        if heads >= 64:
            return dict(block_H=64, block_N=64, num_stages=2, threads=256)
        # 16-row tiles on 4 warps (measured on the H100: 2,398 against 2,351 GB/s on 8 warps,
        # whose 8-column score slices need wider cross-warp reductions).
        return dict(block_H=-(-heads // 16) * 16, block_N=64, num_stages=2, threads=128)
    if kind == "webgpu":
        return dict(block_H=8, block_N=4, num_stages=1, threads=64)
    return dict(block_H=16, block_N=16, num_stages=1, threads=128)


class MLADecode:
    """The split and combine kernels for one problem size and target:
    MLADecode(...)(q, kv_cache, block_table, cache_seqlens) returns O [batch, heads, 512]."""

    def __init__(self, batch, heads, num_pages, page_size, max_pages, num_split=4, softmax_scale=None,
                 dim=512, pe_dim=64, target="auto", dtype="float16", pass_configs=None, **tiles):
        self.target = resolve_target(target)
        tiles = {**tile_config(self.target, heads), **tiles}
        tiles["block_N"] = min(tiles["block_N"], page_size)
        scale = (dim + pe_dim) ** -0.5 if softmax_scale is None else softmax_scale
        self.split = tilelang.compile(
            mla_decode_split(batch, heads, num_pages, page_size, max_pages, num_split, scale, dim, pe_dim,
                             dtype=dtype, **tiles), out_idx=[4, 5], target=self.target,
            pass_configs=pass_configs or {})
        self.combine = tilelang.compile(combine(batch, heads, num_split, dim, dtype=dtype), out_idx=[2],
                                        target=self.target)

    def __call__(self, q, kv_cache, block_table, cache_seqlens):
        o_part, lse_part = self.split(q, kv_cache, block_table, cache_seqlens)
        return self.combine(o_part, lse_part)


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
    parser.add_argument("--num-split", type=int, default=4)
    parser.add_argument("--block-h", type=int, default=None, help="query heads per block (the target's default)")
    parser.add_argument("--block-n", type=int, default=None, help="cached rows per tile (the target's default)")
    parser.add_argument("--num-stages", type=int, default=None, help="tiles in flight (the target's default)")
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
    decode = MLADecode(B, H, num_pages, P, max_pages, args.num_split, scale, target=target, **tiles)
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

    ms = do_bench(lambda: decode(*args_in), warmup=3, rep=args.repeat)
    kv_bytes = int(seqlens.sum()) * 576 * 2  # the cached rows read, float16
    flops = int(seqlens.sum()) * H * (576 + 512) * 2  # scores over 576 dims, output over 512
    print(f"time {ms:.3f} ms, KV read {kv_bytes / 1e6:.1f} MB: {kv_bytes / ms * 1e-6:.2f} GB/s, "
          f"{flops / ms * 1e-9:.1f} TFLOP/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
