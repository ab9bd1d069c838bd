"""FlashAttention forward over a batch of sequences of different lengths (varlen).

The sequences are packed without padding, as in FlashAttention's varlen interface:
Q is [total_q, heads, dim], K and V are [total_k, heads_kv, dim], and sequence b owns
rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of Q (int32 prefix sums of the lengths,
batch + 1 entries) and rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of K and V. The
grid is sized by max_seqlen_q (a Python int); a block whose query tile starts past
its sequence's end does no work. total_q and total_k are dynamic dimensions: one
compiled kernel serves every packing of `batch` sequences.

Inside a sequence the kernel is the one of flash_attn_fwd.py (online softmax in base
2, pipelined key/value tiles, GQA through query head h -> KV head h // (heads //
heads_kv)), with two differences: key positions past the sequence's own length are
masked with -inf (they belong to the next sequence), and output rows past it are not
written. Causal masking is aligned to the bottom right, as FlashAttention does when
a sequence has fewer queries than keys: query i sees keys j <= i + (len_k - len_q). A
query row that sees no key at all gets output 0 (and log-sum-exp -inf).

    python examples/attention/flash_attn_fwd_varlen.py
    python examples/attention/flash_attn_fwd_varlen.py --seqlens 1000 17 4096 333 --causal --heads-kv 2
"""

import argparse
import sys
import time

import numpy as np

import tilelang
import tilelang.language as T

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def flash_attn_varlen_fwd(batch, heads, dim, max_seqlen_q, heads_kv=None, is_causal=False,
                          block_M=64, block_N=64, num_stages=1, threads=128, dtype="float16",
                          return_lse=False):
    """Parameters: Q, K, V, cu_seqlens_q, cu_seqlens_k, O (and LSE, float32
    [heads, total_q], when return_lse)."""
    heads_kv = heads_kv or heads
    assert heads % heads_kv == 0, "heads must be a multiple of heads_kv"
    groups = heads // heads_kv
    scale = LOG2E / dim ** 0.5
    accum = "float32"
    total_q, total_k = T.dynamic("total_q"), T.dynamic("total_k")
    ninf = -T.infinity(accum)

    def rows(X, start, n, h):
        """Rows [start, start + n) of head h of a packed tensor."""
        return X[start:start + n, h, :]

    @T.macro
    def attention(Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE):
        with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), accum)
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            m_scaled = T.alloc_fragment((block_M,), accum)
            alpha = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)  # noqa: E741
            l_tile = T.alloc_fragment((block_M,), accum)

            q_start = cu_seqlens_q[bz]
            q_len = cu_seqlens_q[bz + 1] - q_start
            k_start = cu_seqlens_k[bz]
            k_len = cu_seqlens_k[bz + 1] - k_start
            q0 = bx * block_M  # first query of this tile, within its sequence
            kv_head = by // groups
            diag = k_len - q_len  # causal: query i sees keys j <= i + diag

            T.copy(rows(Q, q_start + q0, block_M, by), Q_s)
            T.clear(acc)
            T.clear(l)
            T.fill(m, ninf)
            n_tiles = T.ceildiv(k_len, block_N)
            if is_causal:
                n_tiles = T.max(T.min(n_tiles, T.ceildiv(q0 + block_M + diag, block_N)), 0)
            n_tiles = T.if_then_else(q0 < q_len, n_tiles, 0)

            # k * block_N is written out in the copies: the pipeline issues ahead the copies
            # whose regions are expressions of the loop variable.
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(rows(K, k_start + k * block_N, block_N, kv_head), K_s)
                for i, j in T.Parallel(block_M, block_N):
                    visible = k * block_N + j < k_len
                    if is_causal:
                        visible = visible & (k * block_N + j <= q0 + i + diag)
                    S[i, j] = T.if_then_else(visible, 0, ninf)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    # a row with no visible key yet has m = -inf: subtract 0 instead (no NaN)
                    m_scaled[i] = T.if_then_else(m[i] == ninf, 0, m[i] * scale)
                    alpha[i] = T.exp2(m_prev[i] * scale - m_scaled[i])
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m_scaled[i])
                T.reduce_sum(S, l_tile, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_tile[i]
                T.copy(S, P)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= alpha[i]
                T.copy(rows(V, k_start + k * block_N, block_N, kv_head), V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                if q0 + i < q_len:  # rows past the sequence belong to the next one
                    O[q_start + q0 + i, by, j] = T.if_then_else(l[i] > 0, acc[i, j] / l[i], 0)
            if LSE is not None:
                for i in T.Parallel(block_M):
                    if q0 + i < q_len:
                        LSE[by, q_start + q0 + i] = T.if_then_else(
                            l[i] > 0, (m[i] * scale + T.log2(l[i])) * LN2, ninf)

    if return_lse:
        @T.prim_func
        def flash_attn_varlen(Q: T.Tensor((total_q, heads, dim), dtype),
                              K: T.Tensor((total_k, heads_kv, dim), dtype),
                              V: T.Tensor((total_k, heads_kv, dim), dtype),
                              cu_seqlens_q: T.Tensor((batch + 1,), "int32"),
                              cu_seqlens_k: T.Tensor((batch + 1,), "int32"),
                              O: T.Tensor((total_q, heads, dim), dtype),
                              LSE: T.Tensor((heads, total_q), accum)):
            attention(Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE)
    else:
        @T.prim_func
        def flash_attn_varlen(Q: T.Tensor((total_q, heads, dim), dtype),
                              K: T.Tensor((total_k, heads_kv, dim), dtype),
                              V: T.Tensor((total_k, heads_kv, dim), dtype),
                              cu_seqlens_q: T.Tensor((batch + 1,), "int32"),
                              cu_seqlens_k: T.Tensor((batch + 1,), "int32"),
                              O: T.Tensor((total_q, heads, dim), dtype)):
            attention(Q, K, V, cu_seqlens_q, cu_seqlens_k, O, None)
    return flash_attn_varlen


def visible_keys(len_q, len_k, is_causal):
    """[len_q, len_k] bool: which keys each query of one sequence sees."""
    if not is_causal:
        return np.ones((len_q, len_k), dtype=bool)
    return np.arange(len_k)[None, :] <= np.arange(len_q)[:, None] + (len_k - len_q)


def reference(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal):
    """O [total_q, heads, dim] and LSE [heads, total_q] in float64 numpy, one sequence at a time."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    o = np.zeros(q.shape)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        (q0, q1), (k0, k1) = cu_seqlens_q[b:b + 2], cu_seqlens_k[b:b + 2]
        qb = q[q0:q1].transpose(1, 0, 2)
        kb, vb = (np.repeat(x[k0:k1].transpose(1, 0, 2), groups, axis=0) for x in (k, v))
        s = np.where(visible_keys(q1 - q0, k1 - k0, is_causal), qb @ kb.transpose(0, 2, 1), -np.inf)
        s = s / np.sqrt(q.shape[-1])
        row_max = s.max(axis=-1, keepdims=True, initial=-np.inf)
        seen = np.isfinite(row_max)  # rows that see at least one key
        p = np.exp(s - np.where(seen, row_max, 0))
        denom = p.sum(axis=-1, keepdims=True)
        o[q0:q1] = ((p / np.where(seen, denom, 1)) @ vb).transpose(1, 0, 2)
        lse[:, q0:q1] = np.where(seen, row_max + np.log(np.where(seen, denom, 1)), -np.inf)[..., 0]
    return o, lse


def torch_reference(q, k, v, lens_q, lens_k, is_causal, with_lse=False):
    """O through one scaled_dot_product_attention per sequence (torch has no packed form)
    and, with_lse, the LSE in float32. Rows that see no key give 0 (and -inf)."""
    import torch
    import torch.nn.functional as F
    o = torch.zeros_like(q)
    lse = torch.full((q.shape[1], q.shape[0]), -torch.inf, device=q.device) if with_lse else None
    gqa = dict(enable_gqa=True) if k.shape[1] != q.shape[1] else {}
    sq = sk = 0
    for lq, lk in zip(lens_q, lens_k):
        qb, kb, vb = (x[a:a + n].transpose(0, 1) for x, a, n in ((q, sq, lq), (k, sk, lk), (v, sk, lk)))
        mask = None  # bottom-right causal mask; torch's is_causal is aligned to the top left
        if is_causal and lq != lk:
            mask = torch.from_numpy(visible_keys(lq, lk, True)).to(q.device)
        ob = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, is_causal=is_causal and mask is None,
                                            **gqa)
        o[sq:sq + lq] = ob.transpose(0, 1).nan_to_num(0.0)
        if with_lse:
            kb = kb.repeat_interleave(q.shape[1] // k.shape[1], dim=0)
            sb = qb.float() @ kb.float().transpose(1, 2) / q.shape[-1] ** 0.5
            sb.masked_fill_(~torch.from_numpy(visible_keys(lq, lk, is_causal)).to(q.device), -torch.inf)
            lse[:, sq:sq + lq] = torch.logsumexp(sb, dim=-1)
        sq, sk = sq + lq, sk + lk
    return o, lse


def main(argv=None):
    gpu = tilelang.cuda_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[3000, 17, 1024, 4096, 555] if gpu
                        else [300, 17, 128, 200], help="query lengths of the sequences")
    parser.add_argument("--seqlens-k", type=int, nargs="+", default=None,
                        help="key lengths (default: the query lengths)")
    parser.add_argument("--heads", type=int, default=32 if gpu else 4)
    parser.add_argument("--heads-kv", type=int, default=None, help="KV heads (GQA); default: --heads")
    parser.add_argument("--dim", type=int, default=128 if gpu else 64, choices=[64, 128, 256])
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--lse", action="store_true", help="also output the log-sum-exp and check it")
    parser.add_argument("--block", type=int, nargs=2, default=[128, 128] if gpu else [64, 64],
                        metavar=("BLOCK_M", "BLOCK_N"))
    parser.add_argument("--stages", type=int, default=2 if gpu else 1, help="T.Pipelined num_stages")
    parser.add_argument("--threads", type=int, default=256 if gpu else 128)
    parser.add_argument("--repeat", type=int, default=20 if gpu else 3, help="timed runs (median)")
    args = parser.parse_args(argv)

    lens_q = args.seqlens
    lens_k = args.seqlens_k or lens_q
    assert len(lens_k) == len(lens_q), "--seqlens-k needs one length per sequence"
    batch, h, d = len(lens_q), args.heads, args.dim
    hkv = args.heads_kv or h
    cu_q, cu_k = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lens_q, lens_k))
    func = flash_attn_varlen_fwd(batch, h, d, max(lens_q), heads_kv=hkv, is_causal=args.causal,
                                 block_M=args.block[0], block_N=args.block[1], num_stages=args.stages,
                                 threads=args.threads, return_lse=args.lse)
    t0 = time.perf_counter()
    kernel = tilelang.compile(func, out_idx=[5, 6] if args.lse else [5], target="auto")
    print(f"FlashAttention varlen forward: {batch} sequences (queries {lens_q}, keys {lens_k}), "
          f"heads {h}/{hkv} (q/kv), dim {d}, {'causal' if args.causal else 'non-causal'}, float16; "
          f"target {kernel.target}, compiled in {time.perf_counter() - t0:.2f} s")

    rng = np.random.default_rng(0)
    q = rng.standard_normal((cu_q[-1], h, d)).astype(np.float16)
    k, v = (rng.standard_normal((cu_k[-1], hkv, d)).astype(np.float16) for _ in range(2))
    try:
        import torch
    except ImportError:
        torch = None
    on_gpu = torch is not None and kernel.target.startswith("cuda") and torch.cuda.is_available()
    if on_gpu:
        inputs = tuple(torch.from_numpy(x).cuda() for x in (q, k, v, cu_q, cu_k))
        ref_o, ref_lse = torch_reference(*inputs[:3], lens_q, lens_k, args.causal, with_lse=args.lse)
        to_np = lambda x: None if x is None else x.double().cpu().numpy()  # noqa: E731
        ref_o, ref_lse = to_np(ref_o), to_np(ref_lse)
    else:
        inputs = (q, k, v, cu_q, cu_k)
        ref_o, ref_lse = reference(q, k, v, cu_q, cu_k, args.causal)
        to_np = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    out = kernel(*inputs)
    o = to_np(out[0] if args.lse else out)
    err = np.abs(o - ref_o).max()
    rel = np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o)
    ok = bool(np.isfinite(o).all()) and err <= 2e-2 and rel <= 1e-2
    print(f"output: max abs error {err:.2e}, relative Frobenius error {rel:.2e} "
          f"(vs {'torch' if on_gpu else 'numpy, float64'})")
    if args.lse:
        lse, seen = to_np(out[1]), np.isfinite(ref_lse)
        lse_err = np.abs(lse[seen] - ref_lse[seen]).max()
        ok = ok and lse_err <= 1e-3 and bool(np.isneginf(lse[~seen]).all())
        print(f"log-sum-exp: max abs error {lse_err:.2e}")
    print("PASS" if ok else "FAIL")

    flops = 4.0 * h * d * sum(int(visible_keys(a, b, args.causal).sum()) for a, b in zip(lens_q, lens_k))
    unit, div = ("TFLOP/s", 1e9) if on_gpu else ("GFLOP/s", 1e6)
    ours = tilelang.do_bench(lambda: kernel(*inputs), warmup=2, rep=args.repeat)
    print(f"tilelang: {ours:9.3f} ms  {flops / ours / div:8.2f} {unit}")
    if torch is not None:
        # float16 on the GPU; float32 on the CPU (torch's float16 path there is slow).
        tin = inputs[:3] if on_gpu else tuple(torch.from_numpy(x).float() for x in (q, k, v))
        theirs = tilelang.do_bench(lambda: torch_reference(*tin, lens_q, lens_k, args.causal),
                                   warmup=2, rep=args.repeat)
        print(f"torch   : {theirs:9.3f} ms  {flops / theirs / div:8.2f} {unit}  "
              "(scaled_dot_product_attention per sequence)")
        print(f"ratio   : {theirs / ours:.2f}x torch's speed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
