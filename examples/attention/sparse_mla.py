"""Sparse MLA forward (DeepSeek V3.2 style): each query attends to its top-k KV rows.

Queries are [batch, seq_q, heads, 576] and the latent KV cache [batch, seq_kv, 1, 576]
(512 latent values, also the value vector, then 64 rotary key values), as in MLA.
An indexer has already chosen, for every query position, topk KV positions:
indices [batch, seq_q, topk] (int32), each in [0, seq_kv) or -1 for an unused slot.
The query attends to those rows only:

    s_j = q . kv[idx_j] * softmax_scale  (-inf where idx_j = -1),   o = softmax(s) @ kv[idx, :512]

A block takes block_H heads of one query position. It walks the index list in tiles
of block_I: the indexed rows are gathered into shared memory by a T.Parallel load
(a -1 slot reads row 0 and is masked), then the scores, online softmax and output
update run as in FlashAttention. The kernel also writes the log-sum-exp (natural
log) of each row's scores, -inf for a row whose slots are all -1 (its output is 0).

    python examples/attention/sparse_mla.py
    python examples/attention/sparse_mla.py --seq-q 1024 --seq-kv 8192 --heads 128 --topk 2048
"""

import argparse
import sys

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.jit.backends import resolve_target
from tilelang.profiler import do_bench

LOG2E = 1.4426950408889634


def sparse_mla_fwd(batch, seq_q, seq_kv, heads, topk, softmax_scale, dim=512, pe_dim=64, block_H=64,
                   block_I=64, threads=256, dtype="float16"):
    """O [batch, seq_q, heads, dim] and LSE [batch, seq_q, heads]."""
    assert topk % block_I == 0, "the index list is walked in whole tiles of block_I"
    scale = softmax_scale * LOG2E  # scores in base 2: exp2 replaces exp
    accum = "float32"
    floor = -1e30  # a finite start: after a tile of -1 slots, max - max_prev is 0, not -inf - (-inf)

    @T.prim_func
    def fwd(
        Q: T.Tensor((batch, seq_q, heads, dim + pe_dim), dtype),
        KV: T.Tensor((batch, seq_kv, 1, dim + pe_dim), dtype),
        Indices: T.Tensor((batch, seq_q, topk), "int32"),
        O: T.Tensor((batch, seq_q, heads, dim), dtype),
        LSE: T.Tensor((batch, seq_q, heads), accum),
    ):
        with T.Kernel(seq_q, T.ceildiv(heads, block_H), batch, threads=threads) as (s, hx, b):
            Q_c = T.alloc_shared((block_H, dim), dtype)
            Q_pe = T.alloc_shared((block_H, pe_dim), dtype)
            KV_s = T.alloc_shared((block_I, dim), dtype)
            K_pe = T.alloc_shared((block_I, pe_dim), dtype)
            P_s = T.alloc_shared((block_H, block_I), dtype)
            scores = T.alloc_fragment((block_H, block_I), accum)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            row_max = T.alloc_fragment((block_H,), accum)
            row_max_prev = T.alloc_fragment((block_H,), accum)
            denom = T.alloc_fragment((block_H,), accum)
            rescale = T.alloc_fragment((block_H,), accum)

            T.copy(Q[b, s, hx * block_H:(hx + 1) * block_H, 0:dim], Q_c)
            T.copy(Q[b, s, hx * block_H:(hx + 1) * block_H, dim:dim + pe_dim], Q_pe)
            T.clear(acc_o)
            T.clear(denom)
            T.fill(row_max, floor)

            for t in T.serial(topk // block_I):
                # Gather the indexed rows (a -1 slot reads row 0; its score is masked below).
                for j, d in T.Parallel(block_I, dim):
                    KV_s[j, d] = KV[b, T.max(Indices[b, s, t * block_I + j], 0), 0, d]
                for j, d in T.Parallel(block_I, pe_dim):
                    K_pe[j, d] = KV[b, T.max(Indices[b, s, t * block_I + j], 0), 0, dim + d]
                for i, j in T.Parallel(block_H, block_I):
                    scores[i, j] = T.if_then_else(Indices[b, s, t * block_I + j] >= 0, 0, -T.infinity(accum))
                T.gemm(Q_c, KV_s, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe, K_pe, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(row_max, row_max_prev)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2((row_max_prev[i] - row_max[i]) * scale)
                    denom[i] *= rescale[i]
                for i, j in T.Parallel(block_H, block_I):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, denom, dim=1, clear=False)
                T.copy(scores, P_s)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= rescale[i]
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i in T.Parallel(block_H):
                rescale[i] = T.if_then_else(denom[i] > 0, 1.0 / denom[i], 0)
            for i in T.Parallel(block_H):
                if hx * block_H + i < heads:
                    LSE[b, s, hx * block_H + i] = T.if_then_else(
                        denom[i] > 0, (T.log2(denom[i]) + row_max[i] * scale) / LOG2E, -T.infinity(accum))
            for i, j in T.Parallel(block_H, dim):
                if hx * block_H + i < heads:
                    O[b, s, hx * block_H + i, j] = acc_o[i, j] * rescale[i]

    return fwd


def tile_config(target):
    """Tile sizes for a target: on CUDA 64 heads per block over two warpgroups (wgmma);
    on WebGPU tiles that fit its small workgroup memory; 16 heads on the CPU."""
    kind = target.split()[0]
    if kind == "cuda":
        return dict(block_H=64, block_I=64, threads=256)
    if kind == "webgpu":
        return dict(block_H=8, block_I=4, threads=64)
    return dict(block_H=16, block_I=32, threads=128)


class SparseMLA:
    """The kernel for one problem size and target: SparseMLA(...)(q, kv, indices) returns
    O [batch, seq_q, heads, 512], and with return_lse=True also LSE [batch, seq_q, heads]."""

    def __init__(self, batch, seq_q, seq_kv, heads, topk, softmax_scale=None, dim=512, pe_dim=64,
                 target="auto", dtype="float16", return_lse=False, **tiles):
        self.target = resolve_target(target)
        self.return_lse = return_lse
        tiles = {**tile_config(self.target), **tiles}
        scale = (dim + pe_dim) ** -0.5 if softmax_scale is None else softmax_scale
        self.kernel = tilelang.compile(
            sparse_mla_fwd(batch, seq_q, seq_kv, heads, topk, scale, dim, pe_dim, dtype=dtype, **tiles),
            out_idx=[3, 4], target=self.target)

    def __call__(self, q, kv, indices):
        out, lse = self.kernel(q, kv, indices)
        return (out, lse) if self.return_lse else out


def reference_numpy(q, kv, indices, softmax_scale, dim=512):
    """float64 attention of each query over its valid (>= 0) indexed KV rows."""
    B, SQ, H, _ = q.shape
    out, lse = np.zeros((B, SQ, H, dim)), np.full((B, SQ, H), -np.inf)
    for b in range(B):
        for s in range(SQ):
            rows = kv[b, indices[b, s][indices[b, s] >= 0], 0].astype(np.float64)
            if len(rows):
                sc = q[b, s].astype(np.float64) @ rows.T * softmax_scale
                m = sc.max(-1, keepdims=True)
                p = np.exp(sc - m)
                lse[b, s] = np.log(p.sum(-1)) + m[:, 0]
                out[b, s] = (p / p.sum(-1, keepdims=True)) @ rows[:, :dim]
    return out, lse


def reference_torch(q, kv, indices, softmax_scale, dim=512):
    """The same in float32 with torch (on the GPU), all queries at once."""
    import torch
    B, SQ, H, _ = q.shape
    rows = kv[:, :, 0].float()[torch.arange(B, device=kv.device)[:, None, None], indices.clamp(min=0).long()]
    s = torch.einsum("bqhd,bqkd->bqhk", q.float(), rows) * softmax_scale
    s = s.masked_fill((indices < 0)[:, :, None, :], float("-inf"))
    return torch.einsum("bqhk,bqkd->bqhd", s.softmax(-1), rows[..., :dim]), torch.logsumexp(s, -1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-q", type=int, default=None, help="query positions (default 1024 on a GPU, 8 else)")
    parser.add_argument("--seq-kv", type=int, default=None, help="KV positions (default 8192 on a GPU, 1024 else)")
    parser.add_argument("--heads", type=int, default=None, help="default 128 on a GPU, 16 else")
    parser.add_argument("--topk", type=int, default=None, help="default 2048 on a GPU, 256 else")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (the median is printed)")
    parser.add_argument("--target", default="auto")
    args = parser.parse_args(argv)

    target = resolve_target(args.target)
    on_gpu = target.startswith("cuda")
    B = args.batch
    SQ = args.seq_q or (1024 if on_gpu else 8)
    SKV = args.seq_kv or (8192 if on_gpu else 1024)
    H = args.heads or (128 if on_gpu else 16)
    topk = args.topk or (2048 if on_gpu else 256)
    scale = 576 ** -0.5
    attn = SparseMLA(B, SQ, SKV, H, topk, scale, target=target, return_lse=True)
    print(f"sparse MLA: batch {B}, {SQ} queries x {H} heads, {SKV} KV rows, top-{topk}, target {target}")

    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, SQ, H, 576)).astype(np.float16)
    kv = rng.standard_normal((B, SKV, 1, 576)).astype(np.float16)
    # Distinct random positions per query; a few trailing slots unused (-1).
    indices = np.argsort(rng.random((B, SQ, SKV)), axis=-1)[..., :topk].astype(np.int32)
    indices[..., topk - topk // 8:] = np.where(rng.random((B, SQ, topk // 8)) < 0.5, -1,
                                               indices[..., topk - topk // 8:])
    args_in = (q, kv, indices)
    if on_gpu:
        import torch
        args_in = tuple(torch.from_numpy(a).cuda() for a in args_in)
        ref, ref_lse = [r.cpu().numpy() for r in reference_torch(*args_in, scale)]
    else:
        ref, ref_lse = reference_numpy(*args_in, scale)
    out, lse = [np.asarray(r.cpu() if on_gpu else r).astype(np.float64) for r in attn(*args_in)]
    err = float(np.max(np.abs(out - ref)))
    lse_err = float(np.max(np.abs(lse - ref_lse)))
    ok = bool(np.all(np.isfinite(out))) and err < 2e-2 and lse_err < 1e-3
    print(f"max abs error vs {'torch' if on_gpu else 'numpy'}: out {err:.2e}, lse {lse_err:.2e} "
          f"{'PASS' if ok else 'FAIL'}")

    ms = do_bench(lambda: attn(*args_in), warmup=3, rep=args.repeat)
    kv_bytes = B * SQ * topk * 576 * 2  # the gathered rows, float16
    flops = 2 * B * SQ * H * topk * (576 + 512)
    print(f"time {ms:.3f} ms, KV gathered {kv_bytes / 1e6:.1f} MB: {kv_bytes / ms * 1e-6:.2f} GB/s, "
          f"{flops / ms * 1e-6:.1f} GFLOP/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
