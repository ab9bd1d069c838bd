"""FlashAttention forward in TileLang: O = softmax(Q K^T / sqrt(d) [+ causal mask]) V.

One block of the grid owns one tile of block_M queries of one head. The query tile
stays in shared memory while tiles of block_N keys and values stream through a
pipelined loop (T.Pipelined overlaps the copies of the next tiles with the math of
the current one). The softmax is computed online: a running row maximum m and row sum
l rescale the output accumulator after every key tile, so the full score matrix never
exists. Scores are kept in base 2: log2(e) / sqrt(d) is folded into one scale, so
exp2 replaces exp.

- MHA and GQA: heads_q is a multiple of heads_kv; query head h reads KV head
  h // (heads_q // heads_kv) (heads_kv == 1 is multi-query attention).
- Layouts: "bhsd" ([batch, heads, seq, dim]) or "bshd" ([batch, seq, heads, dim]).
- Causal: query i sees keys j <= i; key tiles wholly above the diagonal are skipped.
- Any seq_len: keys past the end are masked with -inf, and T.copy clips the query
  and output tiles at the edge.
- return_lse: also writes the natural-log log-sum-exp of each query row's scaled
  scores (float32, [batch, heads, seq]), what a backward pass needs.

    python examples/attention/flash_attn_fwd.py
    python examples/attention/flash_attn_fwd.py --batch 4 --heads 32 --heads-kv 8 --seq 4096 --causal
    python examples/attention/flash_attn_fwd.py --dim 256 --layout bshd --block 64 64
"""

import argparse
import sys
import time

import numpy as np

import tilelang
import tilelang.language as T

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def flash_attn_fwd(batch, heads, seq_len, dim, heads_kv=None, is_causal=False, layout="bhsd",
                   block_M=64, block_N=64, num_stages=1, threads=128, dtype="float16",
                   return_lse=False):
    """Parameters: Q, K, V, O (and LSE when return_lse). Q and O have `heads` heads,
    K and V `heads_kv` (default: heads)."""
    heads_kv = heads_kv or heads
    assert heads % heads_kv == 0, "heads must be a multiple of heads_kv"
    assert layout in ("bhsd", "bshd"), layout
    groups = heads // heads_kv
    scale = LOG2E / dim ** 0.5  # scores * scale are in base-2 units
    accum = "float32"
    q_shape = (batch, heads, seq_len, dim) if layout == "bhsd" else (batch, seq_len, heads, dim)
    kv_shape = (batch, heads_kv, seq_len, dim) if layout == "bhsd" else (batch, seq_len, heads_kv, dim)
    masked = is_causal or seq_len % block_N != 0
    q_tiles = (seq_len + block_M - 1) // block_M
    grid = (q_tiles, heads, batch)
    group = max(g for g in range(1, 9) if batch * heads % g == 0)  # (batch, head) pairs a group

    def rows(X, b, h, start, n):
        """The n x dim tile of sequence positions [start, start + n) of head h."""
        return X[b, h, start:start + n, :] if layout == "bhsd" else X[b, start:start + n, h, :]

    @T.macro
    def attention(Q, K, V, O, LSE):
        with T.Kernel(*grid, threads=threads) as (g0, g1, g2):
            bx, by, bz = g0, g1, g2
            if is_causal:
                # Blocks in launch order t take the (batch, head) pairs in groups of up to 8,
                # each group's query tiles longest first across its heads: the blocks running
                # together share the keys and values of a few heads in L2, and the grid ends
                # with its shortest tiles, so that the last blocks finish together.
                t = g0 + q_tiles * (g1 + heads * g2)
                r = t % (group * q_tiles)
                pair = t // (group * q_tiles) * group + r % group
                bx, by, bz = q_tiles - 1 - r // group, pair % heads, pair // heads
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), accum)  # scores, then probabilities
            P = T.alloc_fragment((block_M, block_N), dtype)  # probabilities for the second gemm
            acc = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)  # running row max (unscaled)
            m_prev = T.alloc_fragment((block_M,), accum)
            alpha = T.alloc_fragment((block_M,), accum)  # rescale factor of this step
            l = T.alloc_fragment((block_M,), accum)  # running row sum  # noqa: E741
            l_tile = T.alloc_fragment((block_M,), accum)

            kv_head = by // groups
            T.copy(rows(Q, bz, by, bx * block_M, block_M), Q_s)
            T.clear(acc)
            T.clear(l)
            T.fill(m, -T.infinity(accum))
            n_tiles = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                       if is_causal else T.ceildiv(seq_len, block_N))

            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(rows(K, bz, kv_head, k * block_N, block_N), K_s)
                if masked:  # start the scores at 0 where a key is visible, -inf where not
                    for i, j in T.Parallel(block_M, block_N):
                        # causal: key j <= query i (which also keeps real rows off the tail)
                        visible = (bx * block_M + i >= k * block_N + j if is_causal
                                   else k * block_N + j < seq_len)
                        S[i, j] = T.if_then_else(visible, 0, -T.infinity(accum))
                else:
                    T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, l_tile, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_tile[i]
                T.copy(S, P)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= alpha[i]
                T.copy(rows(V, bz, kv_head, k * block_N, block_N), V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= l[i]
            T.copy(acc, rows(O, bz, by, bx * block_M, block_M))
            if LSE is not None:
                for i in T.Parallel(block_M):
                    l_tile[i] = (m[i] * scale + T.log2(l[i])) * LN2
                T.copy(l_tile, LSE[bz, by, bx * block_M:(bx + 1) * block_M])

    if return_lse:
        @T.prim_func
        def flash_attn(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                       V: T.Tensor(kv_shape, dtype), O: T.Tensor(q_shape, dtype),
                       LSE: T.Tensor((batch, heads, seq_len), accum)):
            attention(Q, K, V, O, LSE)
    else:
        @T.prim_func
        def flash_attn(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                       V: T.Tensor(kv_shape, dtype), O: T.Tensor(q_shape, dtype)):
            attention(Q, K, V, O, None)
    return flash_attn


def reference(q, k, v, is_causal, layout="bhsd"):
    """O and LSE in float64 numpy (GQA: each KV head repeated for its query heads)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if layout == "bshd":
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if is_causal:
        s = np.where(np.tri(s.shape[-1], dtype=bool), s, -np.inf)
    row_max = s.max(axis=-1, keepdims=True)
    p = np.exp(s - row_max)
    denom = p.sum(axis=-1, keepdims=True)
    o = (p / denom) @ v
    lse = (row_max + np.log(denom))[..., 0]
    return (o.transpose(0, 2, 1, 3) if layout == "bshd" else o), lse


def torch_reference(q, k, v, is_causal, layout="bhsd", with_lse=False):
    """O through scaled_dot_product_attention and, with_lse, the LSE in float32 (torch tensors)."""
    import torch
    import torch.nn.functional as F
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    gqa = dict(enable_gqa=True) if k.shape[1] != q.shape[1] else {}
    o = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, **gqa)
    lse = None
    if with_lse:  # one batch entry at a time: the scores of all of them may not fit
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        lse = []
        for qb, kb in zip(q, k):
            sb = qb.float() @ kb.float().transpose(-1, -2) / q.shape[-1] ** 0.5
            if is_causal:
                above = ~torch.ones(sb.shape[-2:], dtype=torch.bool, device=sb.device).tril()
                sb.masked_fill_(above, -torch.inf)
            lse.append(torch.logsumexp(sb, dim=-1))
        lse = torch.stack(lse)
    return (o.transpose(1, 2) if layout == "bshd" else o), lse


def main(argv=None):
    gpu = tilelang.cuda_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4 if gpu else 1)
    parser.add_argument("--heads", type=int, default=32 if gpu else 4)
    parser.add_argument("--heads-kv", type=int, default=None, help="KV heads (GQA); default: --heads")
    parser.add_argument("--seq", type=int, default=4096 if gpu else 500)
    parser.add_argument("--dim", type=int, default=128 if gpu else 64, choices=[64, 128, 256])
    parser.add_argument("--layout", choices=["bhsd", "bshd"], default="bhsd")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--lse", action="store_true", help="also output the log-sum-exp and check it")
    parser.add_argument("--block", type=int, nargs=2, default=None, metavar=("BLOCK_M", "BLOCK_N"),
                        help="default on a GPU: 128 x 128, 192 x 128 at head dim 64 (three consumer "
                             "warpgroups: measured 408 against 360-397 TFLOP/s on an H100); 64 x 64 else")
    parser.add_argument("--stages", type=int, default=2 if gpu else 1, help="T.Pipelined num_stages")
    parser.add_argument("--threads", type=int, default=None, help="default: 128 per 64 query rows on a GPU, else 128")
    parser.add_argument("--repeat", type=int, default=20 if gpu else 3, help="timed runs (median)")
    args = parser.parse_args(argv)

    b, h, s, d = args.batch, args.heads, args.seq, args.dim
    if args.block is None:
        args.block = ([192, 128] if d == 64 else [128, 128]) if gpu else [64, 64]
    if args.threads is None:
        args.threads = 128 * max(1, args.block[0] // 64) if gpu else 128
    hkv = args.heads_kv or h
    func = flash_attn_fwd(b, h, s, d, heads_kv=hkv, is_causal=args.causal, layout=args.layout,
                          block_M=args.block[0], block_N=args.block[1], num_stages=args.stages,
                          threads=args.threads, return_lse=args.lse)
    t0 = time.perf_counter()
    kernel = tilelang.compile(func, out_idx=[3, 4] if args.lse else [3], target="auto")
    print(f"FlashAttention forward: batch {b}, heads {h}/{hkv} (q/kv), seq {s}, dim {d}, {args.layout}, "
          f"{'causal' if args.causal else 'non-causal'}, float16; target {kernel.target}, "
          f"compiled in {time.perf_counter() - t0:.2f} s")

    rng = np.random.default_rng(0)
    shape = lambda n: (b, n, s, d) if args.layout == "bhsd" else (b, s, n, d)  # noqa: E731
    q, k, v = (rng.standard_normal(shape(n)).astype(np.float16) for n in (h, hkv, hkv))
    try:
        import torch
    except ImportError:
        torch = None
    on_gpu = torch is not None and kernel.target.startswith("cuda") and torch.cuda.is_available()
    if on_gpu:
        inputs = tuple(torch.from_numpy(x).cuda() for x in (q, k, v))
        ref_o, ref_lse = torch_reference(*inputs, args.causal, args.layout, with_lse=args.lse)
        to_np = lambda x: None if x is None else x.double().cpu().numpy()  # noqa: E731
        ref_o, ref_lse = to_np(ref_o), to_np(ref_lse)
    else:
        inputs = (q, k, v)
        ref_o, ref_lse = reference(q, k, v, args.causal, args.layout)
        to_np = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    out = kernel(*inputs)
    o = to_np(out[0] if args.lse else out)
    err = np.abs(o - ref_o).max()
    rel = np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o)
    ok = bool(np.isfinite(o).all()) and err <= 2e-2 and rel <= 1e-2
    print(f"output: max abs error {err:.2e}, relative Frobenius error {rel:.2e} "
          f"(vs {'torch' if on_gpu else 'numpy, float64'})")
    if args.lse:
        lse_err = np.abs(to_np(out[1]) - ref_lse).max()
        ok = ok and lse_err <= 1e-3
        print(f"log-sum-exp: max abs error {lse_err:.2e}")
    print("PASS" if ok else "FAIL")

    flops = 4.0 * b * h * s * s * d * (0.5 if args.causal else 1.0)
    unit, div = ("TFLOP/s", 1e9) if on_gpu else ("GFLOP/s", 1e6)
    ours = tilelang.do_bench(lambda: kernel(*inputs), warmup=2, rep=args.repeat)
    print(f"tilelang: {ours:9.3f} ms  {flops / ours / div:8.2f} {unit}")
    if torch is not None:
        # torch's own attention: float16 on the GPU; float32 on the CPU (its float16 path there is slow).
        tin = inputs if on_gpu else tuple(torch.from_numpy(x).float() for x in inputs)
        theirs = tilelang.do_bench(lambda: torch_reference(*tin, args.causal, args.layout), warmup=2,
                                   rep=args.repeat)
        print(f"torch   : {theirs:9.3f} ms  {flops / theirs / div:8.2f} {unit}  "
              "(scaled_dot_product_attention)")
        print(f"ratio   : {theirs / ours:.2f}x torch's speed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
