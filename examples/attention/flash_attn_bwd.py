"""FlashAttention backward in TileLang: dQ, dK, dV of O = softmax(Q K^T / sqrt(d)) V.

Layout [batch, seq, heads, dim], float16 inputs, float32 accumulation, causal or not.
Four kernels:

1. forward: O and L, the log-sum-exp of every query row's scaled scores, in base 2
   (L = log2(sum_j 2^(s_ij * log2(e) / sqrt(d))), a float32 [batch, heads, seq]);
2. preprocess: Delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d] (float32);
3. backward, one block per (key tile, head, batch): K_j and V_j stay in shared memory
   while the query tiles stream through a pipelined loop. Each step recomputes the
   probabilities P = exp2(S * scale - L) from Q_i K_j^T and L (transposed: the block
   works on P^T, key rows by query columns, so that dV_j += P^T dO_i and
   dK_j += dS^T Q_i need no transposes), then dP = dO_i V_j^T, dS = P * (dP - Delta_i),
   and dQ_i += dS K_j, which blocks of other key tiles also update: it is added with
   T.atomic_add into a zero-initialised float32 dQ. P^T and dS^T stay in registers as
   the first operands of dV's and dK's products; dS goes through shared memory for dQ's
   (each warp needs all of it), in two buffers taken by the step's parity, so that one
   barrier a step orders them. With a causal mask, query tiles entirely above the diagonal
   are skipped;
4. postprocess: dQ converted from float32 to float16 (the result returned).

The float32 dQ accumulator is stored in its own order (T.annotate_layout with a T.Layout,
when the sequence and head dimension are multiples of 8): element (b, l, h, d) at
[b, l // 8, h, d // 8, 8 * (l % 8) + d % 8], so that the 32 lanes of a warp, which hold
the tensor cores' accumulator rows l % 8 and column pairs (d % 8) // 2, add into 64
consecutive floats (two 128-byte lines) with each atomic instruction, a lane's pair being
one 8-byte vector atomic on sm_90. The backward and the postprocess read it through the
same layout.

Tiles that run past the end of the sequence read zeros (T.copy's bounds rule) and their
rows are not written back. In the backward, P^T is 0 for query rows past the end (and, when
causal, above the diagonal); key rows past the end have K = V = 0, so they add nothing to
dQ. The softmax scale 1/sqrt(d) is folded into dS, so dK and dQ need no final scaling.

On sm_90a, FlashAttention adds dQ's tile with one TMA reduction a step instead
(dq_by_tma: the tile goes through shared memory, and one thread's cp.reduce.async.bulk adds
it into dQ's plain layout), which measured faster than the threads' atomics.

FlashAttention.bwd returns dQ in float16: the postprocess converts the float32 accumulator.

    python examples/attention/flash_attn_bwd.py      # batch 1, seq 1024, 8 heads, dim 64; causal and not
    python examples/attention/flash_attn_bwd.py --batch 2 --seq 1000 --heads 4 --dim 128 --causal
"""

import argparse
import statistics
import sys
import time

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.jit.backends import resolve_target

LOG2E = 1.4426950408889634


def attention_fwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, threads=128,
                  dtype="float16"):
    scale = (1.0 / dim) ** 0.5 * LOG2E  # scores in base 2: exp2 replaces exp
    shape, acc = (batch, seq_len, heads, dim), "float32"

    @T.prim_func
    def fwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            O: T.Tensor(shape, dtype), L: T.Tensor((batch, heads, seq_len), acc)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            r_s = T.alloc_fragment((block_M,), acc)  # per-row factors for the (block_M, dim) loops
            S = T.alloc_fragment((block_M, block_N), acc)
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), acc)
            m = T.alloc_fragment((block_M,), acc)
            m_prev = T.alloc_fragment((block_M,), acc)
            denom = T.alloc_fragment((block_M,), acc)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.clear(acc_o)
            T.clear(denom)
            T.fill(m, -T.infinity(acc))
            hi = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(T.min(hi, T.ceildiv((bx + 1) * block_M, block_N)) if is_causal else hi,
                                 num_stages=1):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
                for i, j in T.Parallel(block_M, block_N):  # 0 where allowed, -inf where masked
                    S[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j if is_causal
                                             else k * block_N + j < seq_len, 0, -T.infinity(acc))
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_s[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                    denom[i] *= r_s[i]
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, denom, dim=1, clear=False)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_s[i]
                T.copy(S, P)
                T.gemm(P, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i in T.Parallel(block_M):
                r_s[i] = 1.0 / denom[i]
                m[i] = T.log2(denom[i]) + m[i] * scale
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] *= r_s[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(m, L[bz, by, bx * block_M:(bx + 1) * block_M])

    return fwd


def attention_bwd_preprocess(batch, heads, seq_len, dim, block_M=64, threads=128, dtype="float16"):
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def preprocess(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
                   Delta: T.Tensor((batch, heads, seq_len), "float32")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            o = T.alloc_fragment((block_M, dim), "float32")
            do = T.alloc_fragment((block_M, dim), "float32")
            delta = T.alloc_fragment((block_M,), "float32")
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] *= do[i, j]
            T.reduce_sum(o, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block_M:(bx + 1) * block_M])

    return preprocess


def dq_layout(dQ):
    """dQ's accumulator order (see the module's docstring)."""
    return T.Layout(dQ.shape, lambda b, l, h, d: [b, l // 8, h, d // 8, 8 * (l % 8) + d % 8])


def use_dq_layout(seq_len, dim):
    return seq_len % 8 == 0 and dim % 8 == 0


def attention_bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1,
                  threads=128, dtype="float16", dq_laid_out=True, dq_by_tma=False, tile_order="by_head"):
    """tile_order (causal): "by_head", a head's key tiles one after another, those with the
    most query tiles first; "head_groups", key tiles longest first across groups of up to 8
    (batch, head) pairs, as the forward example orders its query tiles."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    shape, acc = (batch, seq_len, heads, dim), "float32"
    kv_tiles = (seq_len + block_N - 1) // block_N
    group = max(g for g in range(1, 9) if batch * heads % g == 0)  # (batch, head) pairs a group
    assert tile_order in ("by_head", "head_groups"), tile_order

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            dO: T.Tensor(shape, dtype), L: T.Tensor((batch, heads, seq_len), acc),
            Delta: T.Tensor((batch, heads, seq_len), acc), dQ: T.Tensor(shape, acc),
            dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(kv_tiles, heads, batch, threads=threads) as (g0, g1, g2):
            bx, by, bz = g0, g1, g2
            if is_causal and tile_order == "head_groups":
                t = g0 + kv_tiles * (g1 + heads * g2)  # the block's place in launch order
                r = t % (group * kv_tiles)
                pair = t // (group * kv_tiles) * group + r % group
                bx, by, bz = r // group, pair % heads, pair // heads
            if dq_laid_out:
                T.annotate_layout({dQ: dq_layout(dQ)})
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            Q_s = T.alloc_shared((block_M, dim), dtype)
            dO_s = T.alloc_shared((block_M, dim), dtype)
            dS_s = T.alloc_shared((2, block_N, block_M), dtype)  # by the step's parity
            L_s = T.alloc_shared((block_M,), acc)
            Delta_s = T.alloc_shared((block_M,), acc)
            pT = T.alloc_fragment((block_N, block_M), acc)  # S^T, then P^T
            dpT = T.alloc_fragment((block_N, block_M), acc)
            pT_h = T.alloc_fragment((block_N, block_M), dtype)
            dsT_h = T.alloc_fragment((block_N, block_M), dtype)
            dq = T.alloc_fragment((block_M, dim), acc)
            if dq_by_tma:
                dq_s = T.alloc_shared((block_M, dim), acc)
            dk = T.alloc_fragment((block_N, dim), acc)
            dv = T.alloc_fragment((block_N, dim), acc)
            T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], K_s)
            T.copy(V[bz, bx * block_N:(bx + 1) * block_N, by, :], V_s)
            T.clear(dk)
            T.clear(dv)
            first = bx * block_N // block_M if is_causal else 0  # query tiles above the diagonal
            for i in T.Pipelined(first, T.ceildiv(seq_len, block_M), num_stages=num_stages):
                T.copy(Q[bz, i * block_M:(i + 1) * block_M, by, :], Q_s)
                T.copy(dO[bz, i * block_M:(i + 1) * block_M, by, :], dO_s)
                T.copy(L[bz, by, i * block_M:(i + 1) * block_M], L_s)
                T.copy(Delta[bz, by, i * block_M:(i + 1) * block_M], Delta_s)
                T.gemm(K_s, Q_s, pT, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for n, m in T.Parallel(block_N, block_M):  # P^T, 0 where masked
                    pT[n, m] = T.if_then_else(i * block_M + m >= bx * block_N + n if is_causal
                                              else i * block_M + m < seq_len, T.exp2(pT[n, m] * scale - L_s[m]), 0)
                T.gemm(V_s, dO_s, dpT, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pT, pT_h)
                T.gemm(pT_h, dO_s, dv, policy=T.GemmWarpPolicy.FullRow)
                for n, m in T.Parallel(block_N, block_M):  # dS^T, with the 1/sqrt(d) of S
                    dsT_h[n, m] = pT[n, m] * (dpT[n, m] - Delta_s[m]) * sm_scale
                T.copy(dsT_h, dS_s[i % 2, :, :])  # dQ's product needs dS, whole, from shared memory
                T.gemm(dsT_h, Q_s, dk, policy=T.GemmWarpPolicy.FullRow)  # dS^T from registers
                T.gemm(dS_s[i % 2, :, :], K_s, dq, transpose_A=True, clear_accum=True)
                if dq_by_tma:  # one TMA reduction of the tile (sm_90a)
                    T.copy(dq, dq_s)
                    T.atomic_add(dQ[bz, i * block_M:(i + 1) * block_M, by, :], dq_s, use_tma=True)
                else:
                    T.atomic_add(dQ[bz, i * block_M:(i + 1) * block_M, by, :], dq)
            T.copy(dv, dV[bz, bx * block_N:(bx + 1) * block_N, by, :])
            T.copy(dk, dK[bz, bx * block_N:(bx + 1) * block_N, by, :])

    return bwd


def attention_bwd_postprocess(batch, heads, seq_len, dim, block_M=64, threads=128, dtype="float16",
                              dq_laid_out=True):
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def postprocess(dQ_acc: T.Tensor(shape, "float32"), dQ: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            if dq_laid_out:
                T.annotate_layout({dQ_acc: dq_layout(dQ_acc)})
            T.copy(dQ_acc[bz, bx * block_M:(bx + 1) * block_M, by, :], dQ[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return postprocess


class FlashAttention:
    """The four kernels compiled for one problem; fwd(q, k, v) -> (o, lse),
    bwd(q, k, v, o, lse, do) -> (dq, dk, dv), all float16 but lse (float32, base 2).
    Arrays are numpy arrays or torch tensors (on the target's device)."""

    def __init__(self, batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1,
                 threads=128, target="auto", dq_laid_out=None, pass_configs=None, dq_by_tma=None,
                 tile_order="by_head"):
        args = (batch, heads, seq_len, dim)
        target = resolve_target(target)
        if dq_by_tma is None:  # on sm_90a one TMA reduction a step: measured faster than the atomics
            dq_by_tma = "sm_90a" in target and not dq_laid_out
        if dq_laid_out is None:
            dq_laid_out = use_dq_layout(seq_len, dim) and not dq_by_tma
        if dq_laid_out and dq_by_tma:
            raise ValueError("dQ is added by TMA reductions into its plain layout: dq_laid_out must be False")
        self.fwd = tilelang.compile(attention_fwd(*args, is_causal, block_M, block_N, threads),
                                    out_idx=[3, 4], target=target)
        self.pre = tilelang.compile(attention_bwd_preprocess(*args, block_M, threads),
                                    out_idx=[2], target=target)
        self.main = tilelang.compile(attention_bwd(*args, is_causal, block_M, block_N, num_stages, threads,
                                                   dq_laid_out=dq_laid_out, dq_by_tma=dq_by_tma,
                                                   tile_order=tile_order),
                                     out_idx=[7, 8], target=target, pass_configs=pass_configs)
        self.post = tilelang.compile(attention_bwd_postprocess(*args, block_M, threads, dq_laid_out=dq_laid_out),
                                     out_idx=[1], target=target)

    def bwd(self, q, k, v, o, lse, do):
        delta = self.pre(o, do)
        if isinstance(q, np.ndarray):
            dq_acc = np.zeros(q.shape, np.float32)
        else:  # a torch tensor
            import torch
            dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        dk, dv = self.main(q, k, v, do, lse, delta, dq_acc)
        return self.post(dq_acc), dk, dv


# ---------------------------------------------------------------------------
# Checking and timing
# ---------------------------------------------------------------------------

def reference(q, k, v, do, is_causal):
    """O, L (base 2), dQ, dK, dV in float64 with numpy."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if is_causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    lse = mx + np.log(np.exp(s - mx).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    o = np.einsum("bhqk,bkhd->bqhd", p, v)
    dp = np.einsum("bqhd,bkhd->bhqk", do, v)
    ds = p * (dp - np.einsum("bqhd,bqhd->bhq", do, o)[..., None]) / np.sqrt(q.shape[-1])
    dq = np.einsum("bhqk,bkhd->bqhd", ds, k)
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q)
    dv = np.einsum("bhqk,bqhd->bkhd", p, do)
    return o, lse[..., 0] / np.log(2.0), dq, dk, dv


def rel_error(x, ref):
    """Relative Frobenius error of x against ref."""
    x = np.asarray(x, np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))


def _median_seconds(fn, repeat, sync=lambda: None):
    fn()  # warm up
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def run_case(args, is_causal):
    B, S, H, D = args.batch, args.seq, args.heads, args.dim
    t0 = time.perf_counter()
    fa = FlashAttention(B, H, S, D, is_causal, args.block_m, args.block_n, args.stages, args.threads)
    target = fa.main.target
    print(f"{'causal' if is_causal else 'non-causal'}: batch {B}, seq {S}, heads {H}, dim {D}, "
          f"target {target}, four kernels compiled in {time.perf_counter() - t0:.2f} s")
    rng = np.random.default_rng(0)
    host = [rng.standard_normal((B, S, H, D)).astype(np.float16) for _ in range(4)]

    torch = _torch()
    on_cuda = target.startswith("cuda")
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    # On the GPU, device tensors, so that the timings are the kernels'.
    q, k, v, do = (torch.from_numpy(x).cuda() for x in host) if on_cuda else host
    o, lse = fa.fwd(q, k, v)
    grads = fa.bwd(q, k, v, o, lse, do)
    ours = _median_seconds(lambda: fa.bwd(q, k, v, o, lse, do), args.repeat, sync)

    theirs = None
    if torch is not None:  # torch's attention takes [batch, heads, seq, dim]; float32 on the CPU
        device, dtype = ("cuda", torch.float16) if on_cuda else ("cpu", torch.float32)
        leaves = [torch.from_numpy(x).to(device, dtype).transpose(1, 2).requires_grad_() for x in host[:3]]
        grad_out = torch.from_numpy(host[3]).to(device, dtype).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=is_causal)

        def torch_backward():
            for x in leaves:
                x.grad = None
            out.backward(grad_out, retain_graph=True)
        theirs = _median_seconds(torch_backward, args.repeat, sync)
    if on_cuda:
        refs = [x.grad.transpose(1, 2).double().cpu().numpy() for x in leaves]
        ref_name = "torch autograd of scaled_dot_product_attention"
    else:
        refs = reference(*host, is_causal)[2:]
        ref_name = "numpy float64"

    ok = True
    for name, got, ref in zip(("dQ", "dK", "dV"), grads, refs):
        got = got.cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
        err = rel_error(got, ref)
        good = bool(np.all(np.isfinite(got))) and err < 2e-2
        ok = ok and good
        print(f"  {name}: relative error vs {ref_name}: {err:.2e} {'PASS' if good else 'FAIL'}")
    # Five S-sized products (Q K^T again, dO V^T, P^T dO, dS^T Q, dS K), half of them when causal.
    flops = 5 * 2.0 * B * H * S * S * D * (0.5 if is_causal else 1.0)
    print(f"  tilelang backward: {ours * 1e3:9.3f} ms  {flops / ours * 1e-9:9.1f} GFLOP/s  "
          f"(preprocess, main kernel, postprocess; median of {args.repeat})")
    if theirs is not None:
        print(f"  torch backward   : {theirs * 1e3:9.3f} ms  {flops / theirs * 1e-9:9.1f} GFLOP/s  "
              f"({'float16' if on_cuda else 'float32'} SDPA on {'the GPU' if on_cuda else 'the CPU'}); "
              f"ours takes {ours / theirs:.2f}x its time")
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64, choices=[64, 128])
    parser.add_argument("--causal", action="store_true", help="only the causal case (default: both)")
    parser.add_argument("--block-m", type=int, default=64)
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--stages", type=int, default=2, help="T.Pipelined num_stages of the backward")
    parser.add_argument("--threads", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (the median is printed)")
    args = parser.parse_args(argv)
    ok = True
    for is_causal in ([True] if args.causal else [False, True]):
        ok = run_case(args, is_causal) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
