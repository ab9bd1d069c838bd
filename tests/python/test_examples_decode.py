"""Numerical tests of the decoding-attention examples in examples/attention.

Each example kernel (GQA flash decoding, paged MLA decoding, sparse MLA) is compiled for
the ``target`` fixture at small shapes and compared with a numpy float64 reference on
random float16 inputs (fixed seeds). The inputs are built so that the usual mistakes
change the answer: cached positions past a sequence's valid length and pages the block
table does not use hold large values, block tables are shuffled, some splits of the
KV length are empty, and the sparse index lists have -1 slots (a whole tile of them,
and a query with no valid slot at all).

Tolerances: float16 outputs of softmax-weighted sums, so |out - ref| <= 2e-2 + 2e-2 |ref|
element-wise, and a relative Frobenius error below 1e-2 overall.
"""

import importlib.util
import os

import numpy as np
import pytest

from tilelang.errors import TileLangUnsupportedError

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "attention")
POISON = 30.0  # the value of cache entries a kernel must not read


def _load(name):
    """An example file imported by path (examples/ is not a package)."""
    path = os.path.join(EXAMPLES, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"attention_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gqa_decode = _load("gqa_decode")
mla_decode = _load("mla_decode")
sparse_mla = _load("sparse_mla")


def _check(out, ref):
    out = np.asarray(out.cpu() if hasattr(out, "cpu") else out).astype(np.float64)  # a torch result on cuda
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2)
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < 1e-2, f"relative Frobenius error {rel:.3e}"


def _f16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


# ---------------------------------------------------------------------------
# GQA decoding (split-KV + combine)
# ---------------------------------------------------------------------------

def _gqa_reference(q, k, v, seqlens):
    B, H, D = q.shape
    groups = H // k.shape[2]
    out = np.zeros((B, H, D))
    for b in range(B):
        for h in range(H):
            keys = k[b, :seqlens[b], h // groups].astype(np.float64)
            vals = v[b, :seqlens[b], h // groups].astype(np.float64)
            s = keys @ q[b, h].astype(np.float64) / np.sqrt(D)
            p = np.exp(s - s.max())
            out[b, h] = p @ vals / p.sum()
    return out


@pytest.mark.parametrize(
    "heads, heads_kv, seqlen_kv, seqlens, num_split",
    [
        pytest.param(16, 2, 300, [300, 77], 1, id="g8-one-split"),
        # 77 valid positions are fewer tiles than splits: the last splits are empty.
        pytest.param(16, 2, 300, [300, 77], 4, id="g8-four-splits"),
        pytest.param(8, 2, 160, [50, 131], 3, id="g4-three-splits"),
        pytest.param(16, 1, 257, [257, 129], 2, id="mqa-two-splits"),
    ],
)
def test_gqa_decode(target, rng, heads, heads_kv, seqlen_kv, seqlens, num_split):
    B, D = len(seqlens), 128
    seqlens = np.array(seqlens, dtype=np.int32)
    q = _f16(rng, (B, heads, D))
    k = _f16(rng, (B, seqlen_kv, heads_kv, D))
    v = _f16(rng, (B, seqlen_kv, heads_kv, D))
    for b, n in enumerate(seqlens):  # stale cache entries past the valid length
        k[b, n:] = POISON
        v[b, n:] = POISON
    decode = gqa_decode.GQADecode(B, heads, heads_kv, seqlen_kv, D, num_split, target=target)
    out = decode(q, k, v, seqlens)
    _check(out, _gqa_reference(q, k, v, seqlens))


def test_gqa_split_partials(target, rng):
    """The split kernel alone: each split's partial output and base-2 log-sum-exp over
    its share of the tiles (an empty share: O = 0, lse = -inf)."""
    B, H, HK, S, D, num_split = 1, 8, 1, 200, 128, 3
    tiles = gqa_decode.tile_config(target)
    block_N = tiles["block_N"]
    decode = gqa_decode.GQADecode(B, H, HK, S, D, num_split, target=target)
    q, k, v = _f16(rng, (B, H, D)), _f16(rng, (B, S, HK, D)), _f16(rng, (B, S, HK, D))
    n = block_N + 5  # two tiles: with three splits, the third is empty
    o_part, lse_part = [np.asarray(x) for x in decode.split(q, k, v, np.array([n], dtype=np.int32))]
    scale = 1 / np.sqrt(D)
    for sp in range(num_split):
        lo, hi = min(sp * block_N, n), min((sp + 1) * block_N, n)
        if lo == hi:
            assert np.all(o_part[0, :, sp] == 0) and np.all(lse_part[0, :, sp] == -np.inf)
            continue
        s = k[0, lo:hi, 0].astype(np.float64) @ q[0].astype(np.float64).T * scale  # [keys, heads]
        np.testing.assert_allclose(lse_part[0, :, sp], np.log2(np.exp(s).sum(0)), rtol=1e-4, atol=1e-4)
        p = np.exp(s - s.max(0))
        ref = (p / p.sum(0)).T @ v[0, lo:hi, 0].astype(np.float64)
        np.testing.assert_allclose(o_part[0, :, sp], ref, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------
# MLA decoding over a paged cache (split-KV + combine)
# ---------------------------------------------------------------------------

def _paged_cache(rng, seqlens, page_size):
    """A cache whose pages are scattered (shuffled block table, spare pages), with
    POISON past each valid length and in the pages no sequence uses."""
    B = len(seqlens)
    max_pages = -(-max(seqlens) // page_size)
    num_pages = B * max_pages + 3
    kv_cache = np.full((num_pages, page_size, 1, 576), POISON, dtype=np.float16)
    block_table = rng.permutation(num_pages)[:B * max_pages].reshape(B, max_pages).astype(np.int32)
    for b, n in enumerate(seqlens):
        pos = np.arange(n)
        kv_cache[block_table[b, pos // page_size], pos % page_size, 0] = _f16(rng, (n, 576))
    return kv_cache, block_table


def _mla_reference(q, kv_cache, block_table, seqlens, scale):
    page_size = kv_cache.shape[1]
    out = np.zeros(q.shape[:2] + (512,))
    for b, n in enumerate(seqlens):
        pos = np.arange(n)
        rows = kv_cache[block_table[b, pos // page_size], pos % page_size, 0].astype(np.float64)
        s = q[b].astype(np.float64) @ rows.T * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        out[b] = p @ rows[:, :512] / p.sum(-1, keepdims=True)
    return out


@pytest.mark.parametrize(
    "heads, page_size, seqlens, num_split",
    [
        pytest.param(16, 16, [300, 77], 1, id="page16-one-split"),
        pytest.param(16, 32, [250, 33], 3, id="page32-three-splits"),
        # 8 heads: a partly filled head tile; 20 positions: empty splits.
        pytest.param(8, 64, [130, 20], 4, id="page64-four-splits"),
        # Equal shares of all 12 + 1 tiles over 5 blocks: sequences cut mid-way, a block
        # with items of two sequences.
        pytest.param(16, 16, [150, 40], "balanced", id="page16-balanced"),
    ],
)
@pytest.mark.parametrize("merge", ["combine", "fused", "pdl"])
def test_mla_decode(target, rng, heads, page_size, seqlens, num_split, merge):
    """merge: a combine kernel, the last block of a sequence merging (fused), or the combine
    kernel launched while the split kernel finishes (programmatic dependent launch on CUDA)."""
    fuse_combine = merge == "fused"
    B = len(seqlens)
    scale = 0.1  # not 1/sqrt(576): the kernel must use the scale it is given
    kv_cache, block_table = _paged_cache(rng, seqlens, page_size)
    q = _f16(rng, (B, heads, 576))
    seqlens = np.array(seqlens, dtype=np.int32)
    make = lambda: mla_decode.MLADecode(B, heads, kv_cache.shape[0], page_size, block_table.shape[1],  # noqa: E731
                                        num_split, softmax_scale=scale, target=target, num_blocks=5,
                                        fuse_combine=fuse_combine, pdl=merge == "pdl")
    if fuse_combine and target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="T.atomic_add with a memory order"):
            make()
        return
    decode = make()
    for _ in range(2):  # the fused form's counters are back at 0 for the second launch
        out = decode(q, kv_cache, block_table, seqlens)
        _check(out, _mla_reference(q, kv_cache, block_table, seqlens, scale))
    if fuse_combine:
        assert not np.asarray(decode.seq_done.cpu() if hasattr(decode.seq_done, "cpu") else decode.seq_done).any()


@pytest.mark.parametrize("num_split", ["balanced", 3])
@pytest.mark.parametrize("num_blocks", [1, 7, 132])
def test_mla_work_plan(rng, num_split, num_blocks):
    """Every tile of every sequence in exactly one item, a sequence's items consecutive and in
    order, each block's items a range; balanced: no block's share (tiles plus one an item),
    the last one's included, above the share that counts an item for every block boundary."""
    seqlens = rng.integers(1, 3000, size=37)
    blocks = num_blocks if num_split == "balanced" else 37 * num_split
    block_items, item_batch, item_tiles, batch_items = mla_decode.plan_work(seqlens, 64, blocks, num_split)
    n_items = batch_items[-1]
    assert block_items[0] == 0 and block_items[-1] == n_items and np.all(np.diff(block_items) >= 0)
    assert len(block_items) == blocks + 1 and len(item_batch) == len(seqlens) + blocks
    for b, n in enumerate(seqlens):
        items = range(batch_items[b], batch_items[b + 1])
        assert all(item_batch[i] == b for i in items)
        edges = [item_tiles[i] for i in items]
        assert edges[0][0] == 0 and edges[-1][1] == -(-n // 64)
        assert all(x[1] == y[0] for x, y in zip(edges, edges[1:]))
    if num_split == "balanced":
        cost = [sum(int(item_tiles[i, 1] - item_tiles[i, 0]) + 1 for i in range(block_items[k], block_items[k + 1]))
                for k in range(blocks)]
        quota = -(-(sum(-(-int(n) // 64) for n in seqlens) + len(seqlens) + blocks - 1) // blocks)
        assert max(cost) <= quota, (cost, quota)


# ---------------------------------------------------------------------------
# Sparse MLA (top-k indexed KV rows, -1 slots ignored)
# ---------------------------------------------------------------------------

def _sparse_reference(q, kv, indices, scale):
    B, SQ, H, _ = q.shape
    out, lse = np.zeros((B, SQ, H, 512)), np.full((B, SQ, H), -np.inf)
    for b in range(B):
        for s in range(SQ):
            rows = kv[b, indices[b, s][indices[b, s] >= 0], 0].astype(np.float64)
            if len(rows) == 0:
                continue
            sc = q[b, s].astype(np.float64) @ rows.T * scale
            m = sc.max(-1, keepdims=True)
            p = np.exp(sc - m)
            lse[b, s] = np.log(p.sum(-1)) + m[:, 0]
            out[b, s] = p @ rows[:, :512] / p.sum(-1, keepdims=True)
    return out, lse


@pytest.mark.parametrize(
    "seq_q, seq_kv, heads, topk, block_I",
    [
        pytest.param(4, 100, 16, 32, 16, id="topk32"),
        pytest.param(3, 300, 8, 64, 32, id="topk64-partial-head-tile"),
    ],
)
def test_sparse_mla(target, rng, seq_q, seq_kv, heads, topk, block_I):
    B, scale = 2, 0.1
    q = _f16(rng, (B, seq_q, heads, 576))
    kv = _f16(rng, (B, seq_kv, 1, 576))
    indices = np.argsort(rng.random((B, seq_q, seq_kv)), axis=-1)[..., :topk].astype(np.int32)
    indices[rng.random(indices.shape) < 0.2] = -1
    indices[0, 0] = -1                # no valid slot: output 0, lse -inf
    indices[1, 1, :block_I] = -1      # a whole tile of -1 first
    kv[:, 0] = POISON                 # what a -1 slot would read if it were not masked
    indices[indices == 0] = -1
    tiles = dict(block_I=block_I) if target != "webgpu" else {}
    attn = sparse_mla.SparseMLA(B, seq_q, seq_kv, heads, topk, softmax_scale=scale, target=target,
                                return_lse=True, **tiles)
    out, lse = attn(q, kv, indices)
    ref, ref_lse = _sparse_reference(q, kv, indices, scale)
    _check(out, ref)
    lse = np.asarray(lse)
    valid = np.isfinite(ref_lse)
    assert np.all(lse[~valid] == -np.inf) and np.all(np.asarray(out)[0, 0] == 0)
    np.testing.assert_allclose(lse[valid], ref_lse[valid], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# CUDA code generation (no GPU needed): the GPU tile configurations compile
# ---------------------------------------------------------------------------

CUDA_CASES = {
    "gqa_split": lambda: gqa_decode.gqa_decode_split(8, 32, 8, 8192, 128, 4, **gqa_decode.tile_config("cuda")),
    "gqa_combine": lambda: gqa_decode.combine(8, 32, 4, 128),
    "mla_split": lambda: mla_decode.mla_decode_split(64, 128, 4096, 64, 64, 66, 64 + 66, 576 ** -0.5,
                                                     **mla_decode.tile_config("cuda", 128)),
    "mla_split_16_heads": lambda: mla_decode.mla_decode_split(128, 16, 8192, 64, 64, 132, 128 + 132, 576 ** -0.5,
                                                              **mla_decode.tile_config("cuda", 16)),
    "mla_split_fused": lambda: mla_decode.mla_decode_split(64, 128, 4096, 64, 64, 66, 64 + 66, 576 ** -0.5,
                                                           fuse_combine=True, **mla_decode.tile_config("cuda", 128)),
    "mla_split_16_heads_fused": lambda: mla_decode.mla_decode_split(128, 16, 8192, 64, 64, 132, 128 + 132,
                                                                    576 ** -0.5, fuse_combine=True,
                                                                    **mla_decode.tile_config("cuda", 16)),
    # The 16-row tiles of mma.sync (an option; 64-row wgmma tiles are the default at 16 heads).
    "mla_split_16_rows": lambda: mla_decode.mla_decode_split(128, 16, 8192, 64, 64, 132, 128 + 132, 576 ** -0.5,
                                                             block_H=16, block_N=64, num_stages=2, threads=128),
    "mla_combine": lambda: mla_decode.combine_items(64, 16, 64 + 132, 512),
    "sparse_mla": lambda: sparse_mla.sparse_mla_fwd(1, 1024, 8192, 128, 2048, 576 ** -0.5,
                                                    **sparse_mla.tile_config("cuda")),
}


@pytest.mark.parametrize("case", sorted(CUDA_CASES))
def test_cuda_source_compiles(case):
    """Lowered for sm_90a and compiled by NVRTC; every T.gemm of the split kernels runs on
    wgmma (mma.sync for 16-row tiles), and the GQA kernel's K/V tiles are loaded ahead by a TMA producer."""
    from tilelang import _C
    from tilelang.jit.kernel import _include_dir
    from sass import nvrtc_reason
    reason = nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    target = "cuda -arch=sm_90a"
    lowered = _C.lower(CUDA_CASES[case]().handle, target)
    cubin = _C.nvrtc_compile(_C.codegen(lowered, target), f"{case}.cu", "sm_90a", [_include_dir()])
    assert cubin[:4] == b"\x7fELF"
    gemms = [line for line in lowered.lowering_report().splitlines() if "T.gemm (" in line]  # the instruction choices
    # 16-row tiles on mma.sync; the 16-head defaults are 64-row wgmma tiles (rows past the heads padding).
    instruction = "on mma.sync m16n8k16, 1 x 4 warps" if case == "mla_split_16_rows" else "on wgmma"
    assert all(instruction in line for line in gemms), gemms
    # The per-row factors are fragments spread over the threads as the output's rows: no
    # exchange through shared memory.
    assert "through shared memory [slower path" not in lowered.lowering_report(), lowered.lowering_report()
    if case.startswith("mla_split"):
        # The producer reads the block table for a tile before it waits for the tile's slot
        # (the read's latency overlaps the wait), and only once for the tile's copies.
        source = _C.codegen(lowered, target)
        consumers = 128 if case == "mla_split_16_rows" else 256  # the producer warpgroup follows them
        producer = source[source.index(f"if (tx == {consumers})"):]
        read = producer.index("block_table[")
        assert read < producer.index("tl::mbarrier_wait(&pipeline_mbar") and producer.count("block_table[") == 1
        if case.endswith("_fused"):
            # The consumers' barrier (their partial outputs all written), then one thread's
            # count between device-scope fences (acq_rel).
            count = source.index("tl::atomic_fence_before<4>(), tl::atomic_fence_after<4>(tl::atomic_add(&seq_done[")
            assert source.rindex(f"tl::named_barrier_sync(1, {consumers});", 0, count) > source.rindex("O_part[", 0, count)
    if case == "gqa_split":
        assert "pipelined by a TMA producer warpgroup" in lowered.lowering_report()
