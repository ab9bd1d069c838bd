"""The FlashAttention forward examples (examples/attention) against numpy in float64.

Inputs are float16 with float32 accumulation, so each output is compared element-wise
with rtol = atol = 2e-2 (fp16 rounding of the probabilities and of the output) and, so
that a real mistake cannot hide inside that band, with a relative Frobenius error below
1e-2 (a correct kernel gives about 3e-4). The log-sum-exp is float32 throughout:
atol 1e-4. The references below are written independently of the examples (explicit
index maps for GQA and the layouts, masks built from positions), and
test_reference_detects_mistakes checks that the comparison rejects the usual mistakes
(wrong GQA head, wrong layout, off-by-one or missing causal mask, unmasked tail keys).
"""

import importlib.util
import os

import numpy as np
import pytest

import tilelang

_EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "attention")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(_EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fwd = _load("flash_attn_fwd")
varlen = _load("flash_attn_fwd_varlen")


def _tiles(target, dim):
    """(block_M, block_N, threads) for a target. WebGPU's 32 KiB of workgroup memory
    (three dim-wide tiles) and SIMT gemm call for small tiles there."""
    if target == "webgpu":
        return {64: (32, 32, 128), 128: (16, 16, 128), 256: (8, 8, 64)}[dim]
    return 64, 64, 128


# ---------------------------------------------------------------------------
# References (float64)
# ---------------------------------------------------------------------------

def _attend(q, k, v, visible):
    """One head: q [Lq, d], k, v [Lk, d], visible [Lq, Lk] -> (o [Lq, d], lse [Lq]).
    A row that sees no key gives o = 0 and lse = -inf."""
    s = np.where(visible, q @ k.T / np.sqrt(q.shape[-1]), -np.inf)
    o, lse = np.zeros((q.shape[0], v.shape[1])), np.full(q.shape[0], -np.inf)
    rows = visible.any(axis=1)
    if rows.any():
        sr = s[rows]
        row_max = sr.max(axis=1, keepdims=True)
        p = np.exp(sr - row_max)
        o[rows] = (p / p.sum(axis=1, keepdims=True)) @ v
        lse[rows] = row_max[:, 0] + np.log(p.sum(axis=1))
    return o, lse


def _causal(len_q, len_k):
    """Query i sees key j when j <= i + (len_k - len_q) (bottom-right aligned)."""
    return np.arange(len_k)[None, :] <= np.arange(len_q)[:, None] + (len_k - len_q)


def reference_fwd(q, k, v, is_causal, layout, kv_head_of=None, visible=None):
    """O (layout of q) and LSE [batch, heads, seq]. kv_head_of and visible ([seq, seq]
    bool) replace the GQA head map and the mask (to make mistakes on purpose)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if layout == "bshd":  # head-major views, element (b, h, s) = X[b, s, h]
        q, k, v = (np.swapaxes(x, 1, 2) for x in (q, k, v))
    batch, heads, seq, _ = q.shape
    heads_kv = k.shape[1]
    kv_head_of = kv_head_of or (lambda h: h // (heads // heads_kv))
    if visible is None:
        visible = _causal(seq, seq) if is_causal else np.ones((seq, seq), dtype=bool)
    o, lse = np.zeros(q.shape), np.zeros((batch, heads, seq))
    for b in range(batch):
        for h in range(heads):
            o[b, h], lse[b, h] = _attend(q[b, h], k[b, kv_head_of(h)], v[b, kv_head_of(h)], visible)
    return (np.swapaxes(o, 1, 2) if layout == "bshd" else o), lse


def reference_varlen(q, k, v, lens_q, lens_k, is_causal):
    """O [total_q, heads, dim] and LSE [heads, total_q] of packed sequences."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    heads, heads_kv = q.shape[1], k.shape[1]
    o, lse = np.zeros(q.shape), np.zeros((heads, q.shape[0]))
    sq, sk = 0, 0
    for lq, lk in zip(lens_q, lens_k):
        visible = _causal(lq, lk) if is_causal else np.ones((lq, lk), dtype=bool)
        for h in range(heads):
            hk = h // (heads // heads_kv)
            o[sq:sq + lq, h], lse[h, sq:sq + lq] = _attend(q[sq:sq + lq, h], k[sk:sk + lk, hk],
                                                           v[sk:sk + lk, hk], visible)
        sq, sk = sq + lq, sk + lk
    return o, lse


def _mismatch(out, ref):
    """None when out matches ref (element-wise and in relative Frobenius norm), else why not."""
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape:
        return f"shape {out.shape} != {ref.shape}"
    if not np.isfinite(out).all():
        return "non-finite values in the output"
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    if rel >= 1e-2:
        return f"relative Frobenius error {rel:.2e} >= 1e-2"
    if not np.allclose(out, ref, rtol=2e-2, atol=2e-2):
        return f"max abs error {np.abs(out - ref).max():.2e} beyond rtol = atol = 2e-2"
    return None


def _check(out, ref):
    problem = _mismatch(out, ref)
    assert problem is None, problem


def _check_lse(lse, ref):
    lse = np.asarray(lse, dtype=np.float64)
    assert lse.shape == ref.shape and lse.dtype == np.float64
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(lse[finite], ref[finite], rtol=0, atol=1e-4)


def _half(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


# ---------------------------------------------------------------------------
# Dense batches
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "batch, heads, heads_kv, seq, dim, is_causal, layout, lse",
    [
        pytest.param(2, 2, 2, 128, 64, False, "bhsd", False, id="mha-bhsd"),
        # 100 and 150 are not multiples of the tiles: a ragged last query and key tile.
        pytest.param(1, 2, 2, 100, 64, True, "bshd", True, id="mha-bshd-causal-ragged-lse"),
        pytest.param(2, 4, 2, 200, 128, True, "bhsd", True, id="gqa-bhsd-causal-ragged-lse"),
        pytest.param(1, 4, 2, 150, 128, False, "bshd", False, id="gqa-bshd-ragged"),
        pytest.param(1, 4, 1, 96, 64, True, "bhsd", False, id="mqa-bhsd-causal"),
        pytest.param(1, 2, 1, 80, 256, True, "bshd", True, id="gqa-bshd-causal-d256-lse"),
    ],
)
def test_flash_attn_fwd(target, rng, batch, heads, heads_kv, seq, dim, is_causal, layout, lse):
    block_M, block_N, threads = _tiles(target, dim)
    func = fwd.flash_attn_fwd(batch, heads, seq, dim, heads_kv=heads_kv, is_causal=is_causal,
                              layout=layout, block_M=block_M, block_N=block_N, threads=threads,
                              num_stages=2, return_lse=lse)
    kernel = tilelang.compile(func, out_idx=[3, 4] if lse else [3], target=target)
    q_shape = (batch, heads, seq, dim) if layout == "bhsd" else (batch, seq, heads, dim)
    kv_shape = (batch, heads_kv, seq, dim) if layout == "bhsd" else (batch, seq, heads_kv, dim)
    q, k, v = _half(rng, q_shape), _half(rng, kv_shape), _half(rng, kv_shape)
    out = kernel(q, k, v)
    o = out[0] if lse else out
    ref_o, ref_lse = reference_fwd(q, k, v, is_causal, layout)
    assert np.asarray(o).dtype == np.float16
    _check(o, ref_o)
    if lse:
        _check_lse(out[1], ref_lse)


# ---------------------------------------------------------------------------
# Variable-length batches
# ---------------------------------------------------------------------------

def _cu(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


@pytest.mark.parametrize(
    "lens_q, lens_k, heads, heads_kv, dim, is_causal",
    [
        # 17 is shorter than any tile; 130 spans several.
        pytest.param([37, 130, 17], None, 2, 2, 64, False, id="mha"),
        pytest.param([100, 17, 64], None, 4, 2, 128, True, id="gqa-causal"),
        # Fewer keys than queries in the first sequence: its first 20 queries see no key.
        pytest.param([50, 20, 90], [30, 100, 90], 4, 1, 64, True, id="mqa-causal-cross"),
    ],
)
def test_flash_attn_varlen_fwd(target, rng, lens_q, lens_k, heads, heads_kv, dim, is_causal):
    lens_k = lens_k or lens_q
    block_M, block_N, threads = _tiles(target, dim)
    func = varlen.flash_attn_varlen_fwd(len(lens_q), heads, dim, max(lens_q), heads_kv=heads_kv,
                                        is_causal=is_causal, block_M=block_M, block_N=block_N,
                                        threads=threads, return_lse=True)
    kernel = tilelang.compile(func, out_idx=[5, 6], target=target)

    def run(lq, lk):
        q = _half(rng, (sum(lq), heads, dim))
        k, v = _half(rng, (sum(lk), heads_kv, dim)), _half(rng, (sum(lk), heads_kv, dim))
        o, lse = kernel(q, k, v, _cu(lq), _cu(lk))
        ref_o, ref_lse = reference_varlen(q, k, v, lq, lk, is_causal)
        _check(o, ref_o)
        _check_lse(lse, ref_lse)

    run(lens_q, lens_k)
    # The same kernel (total lengths are dynamic) with the sequences in another order.
    run(lens_q[::-1], lens_k[::-1])


# ---------------------------------------------------------------------------
# The checks above can fail
# ---------------------------------------------------------------------------

def test_reference_detects_mistakes(rng):
    """Each usual mistake, made in the reference, fails the comparison on a test shape."""
    q, k, v = _half(rng, (1, 4, 100, 64)), _half(rng, (1, 2, 100, 64)), _half(rng, (1, 2, 100, 64))
    causal, _ = reference_fwd(q, k, v, True, "bhsd")
    full, _ = reference_fwd(q, k, v, False, "bhsd")
    # Keys 100..127 of a 128-wide tile read as zeros (scores 0) and left unmasked.
    pad = lambda x: np.concatenate([x, np.zeros((1, x.shape[1], 28, 64), np.float16)], axis=2)  # noqa: E731
    unmasked_tail = reference_fwd(pad(q), pad(k), pad(v), False, "bhsd")[0][:, :, :100]
    # bshd data read through bhsd indices: the same memory, the wrong view.
    as_bhsd = lambda x: np.ascontiguousarray(np.swapaxes(x, 1, 2)).reshape(x.shape)  # noqa: E731
    mistakes = [
        (reference_fwd(q, k, v, True, "bhsd", kv_head_of=lambda h: h % 2)[0], causal,
         "GQA head h % heads_kv"),
        (full, causal, "causal mask missing"),
        (reference_fwd(q, k, v, True, "bhsd", visible=np.tri(100, k=-1, dtype=bool))[0], causal,
         "causal mask off by one (j < i)"),
        (reference_fwd(as_bhsd(q), as_bhsd(k), as_bhsd(v), True, "bhsd")[0], causal, "bshd read as bhsd"),
        (unmasked_tail, full, "tail keys not masked"),
    ]
    assert _mismatch(causal, causal) is None
    for out, ref, name in mistakes:
        assert _mismatch(out, ref) is not None, name
