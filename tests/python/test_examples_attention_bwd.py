"""The FlashAttention backward example (examples/attention/flash_attn_bwd.py): the forward
output O and log-sum-exp L, and dQ, dK, dV against attention forward and backward in
numpy float64, causal and not, head dims 64 and 128, sequences that do not divide the tiles.

Tolerances: the inputs are float16, the kernels accumulate in float32 and round the
probabilities and dS to float16 before their products, which leaves relative errors of a
few 1e-4 here. Each result must be within rtol = atol = 2e-2 elementwise and have a relative
Frobenius error below 2e-2: a wrong mask, a missing 1/sqrt(d) or a wrong transpose gives
errors of order 1.
"""

import importlib.util
import os
import sys

import numpy as np
import pytest

_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "attention",
                        "flash_attn_bwd.py")


def _load_example():
    name = "flash_attn_bwd_example"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.normpath(_EXAMPLE))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


example = _load_example()

TOL = 2e-2


def attention_reference(q, k, v, do, is_causal):
    """O, the natural log-sum-exp of each query row's scaled scores ([batch, heads, seq]),
    dQ, dK, dV; all float64. Layout [batch, seq, heads, dim]."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    seq, dim = q.shape[1], q.shape[3]
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(dim)
    if is_causal:
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    row_max = s.max(axis=-1, keepdims=True)
    lse = row_max + np.log(np.exp(s - row_max).sum(axis=-1, keepdims=True))
    p = np.exp(s - lse)                                   # softmax, 0 where masked
    o = np.einsum("bhij,bjhd->bihd", p, v)
    dp = np.einsum("bihd,bjhd->bhij", do, v)              # dO V^T
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # softmax backward
    dq = np.einsum("bhij,bjhd->bihd", ds, k) / np.sqrt(dim)
    dk = np.einsum("bhij,bihd->bjhd", ds, q) / np.sqrt(dim)
    dv = np.einsum("bhij,bihd->bjhd", p, do)
    return o, lse[..., 0], dq, dk, dv


def _check(name, got, ref):
    got = np.asarray(got).astype(np.float64)
    assert got.shape == ref.shape, f"{name}: shape {got.shape}, expected {ref.shape}"
    assert np.all(np.isfinite(got)), f"{name}: not finite"
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel < TOL, f"{name}: relative Frobenius error {rel:.3e}"
    np.testing.assert_allclose(got, ref, rtol=TOL, atol=TOL, err_msg=name)


# name -> (batch, heads, seq_len, dim, is_causal, block_M, block_N) on cpu and cuda. Every
# seq_len leaves a partial last tile; block_M != block_N checks where the causal loops start.
CASES = {
    "d64-ragged": (1, 2, 100, 64, False, 64, 64),
    "d64-causal-ragged-b2": (2, 2, 160, 64, True, 64, 64),
    "d128-causal-ragged": (1, 2, 144, 128, True, 64, 64),
    "d128-ragged-b2": (2, 2, 96, 128, False, 64, 64),
    "d64-causal-bm32-bn64": (1, 2, 160, 64, True, 32, 64),
    "d64-causal-bm64-bn32": (1, 2, 150, 64, True, 64, 32),
}

# WebGPU stores float16 workgroup arrays as 32-bit words and allows 32 KiB of them on
# lavapipe (16 KiB by the WebGPU defaults), and lavapipe runs the SIMT kernels slowly: small
# tiles, three of the cases. The backward holds four (block, dim) tiles in shared memory.
WEBGPU_TILES = {64: (16, 16), 128: (8, 16)}
WEBGPU_CASES = {"d64-ragged", "d64-causal-ragged-b2", "d128-causal-ragged"}


def _run(target, rng, batch, heads, seq_len, dim, is_causal, block_M, block_N, threads=128, dq_by_tma=False,
         **options):
    fa = example.FlashAttention(batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N,
                                threads=threads, target=target, dq_by_tma=dq_by_tma, **options)
    shape = (batch, seq_len, heads, dim)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float16) for _ in range(4))
    o, lse = fa.fwd(q, k, v)
    dq, dk, dv = fa.bwd(q, k, v, o, lse, do)
    assert np.asarray(o).dtype == np.float16 and np.asarray(lse).dtype == np.float32
    assert all(np.asarray(g).dtype == np.float16 for g in (dq, dk, dv))
    ref_o, ref_lse, ref_dq, ref_dk, ref_dv = attention_reference(q, k, v, do, is_causal)
    _check("O", o, ref_o)
    _check("L", np.asarray(lse, dtype=np.float64) * np.log(2.0), ref_lse)  # the kernel's L is in base 2
    _check("dQ", dq, ref_dq)
    _check("dK", dk, ref_dk)
    _check("dV", dv, ref_dv)


@pytest.mark.parametrize("case", list(CASES))
def test_flash_attention_backward(target, rng, case):
    batch, heads, seq_len, dim, is_causal, block_M, block_N = CASES[case]
    if target.startswith("webgpu"):
        if case not in WEBGPU_CASES:
            pytest.skip("webgpu runs three of the cases (lavapipe runs these kernels slowly)")
        _run(target, rng, batch, heads, seq_len, dim, is_causal, *WEBGPU_TILES[dim], threads=64)
    else:
        _run(target, rng, batch, heads, seq_len, dim, is_causal, block_M, block_N)


def test_dq_accumulates_across_key_tiles(target, rng):
    """Four key tiles per query tile (one query tile on cpu and cuda): the blocks of all of
    them add their parts of dQ atomically into the same rows; a lost or repeated update
    would show in dQ alone."""
    tiles = (16, 16) if target.startswith("webgpu") else (64, 16)
    _run(target, rng, 1, 2, 64, 64, False, *tiles, threads=64 if target.startswith("webgpu") else 128)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dq_by_tma_reductions(target, rng, causal):
    """dQ's tile added by one TMA reduction per step (sm_90a; atomics elsewhere): partial
    last tiles (rows past the end are not written by the reduction), causal and not."""
    if target.startswith("webgpu"):
        pytest.skip("webgpu runs the atomic cases above (the shared dQ tile is 32 KiB of float32)")
    _run(target, rng, 1, 2, 160, 64, causal, 64, 64, dq_by_tma=True)


def test_causal_key_tiles_in_head_groups(target, rng):
    """tile_order="head_groups": the blocks take the key tiles of 2 x 3 (batch, head) pairs,
    longest first across them (3 tiles of 64, the last partial); every tile of every head
    computed once."""
    if target.startswith("webgpu"):
        pytest.skip("webgpu runs the atomic cases above (lavapipe runs these kernels slowly)")
    _run(target, rng, 2, 3, 150, 64, True, 64, 64, tile_order="head_groups")


def test_dq_by_tma_is_one_reduction_per_step_on_sm90a():
    from tilelang import _C
    ex = _load_example()
    report = _C.lower(ex.attention_bwd(2, 4, 1024, 128, False, 64, 128, 2, 256, dq_laid_out=False,
                                       dq_by_tma=True).handle, "cuda -arch=sm_90a").lowering_report()
    assert "T.atomic_add dq_s -> dQ by TMA reduction (cp.reduce.async.bulk.tensor .add, boxes of 64 x 32, " \
           "128B swizzle)" in report, report
    with pytest.raises(ValueError, match="dq_laid_out must be False"):
        ex.FlashAttention(1, 2, 128, 64, False, dq_laid_out=True, dq_by_tma=True, target="cpu")


def test_dq_reduction_is_waited_for_at_the_next_step_on_sm90a():
    """The thread that issues dQ's TMA reduction waits for its tile to be read only before
    the next step's first barrier (the tile is written again after it), not right after the
    issue, which held its warp back at that barrier every step; the last step's is waited
    for after the loop. One barrier a step (dS in two buffers)."""
    from tilelang import _C
    ex = _load_example()
    target = "cuda -arch=sm_90a"
    source = _C.codegen(_C.lower(ex.attention_bwd(2, 4, 1024, 128, False, 64, 128, 2, 256, dq_laid_out=False,
                                                  dq_by_tma=True).handle, target), target)
    loop = source[source.index("for (int32_t i = 0"):source.index("dv_staged")]
    issue = loop.index("tl::tma_reduce_add(")
    assert "tl::tma_store_wait_read<0>();" not in loop[issue:loop.index("mbarrier_arrive(&pipeline_mbar")]
    body = loop[:issue]
    assert body.count("named_barrier_sync(1, 256)") == 2, body  # the step's, and the one before the issue
    wait = body.index("tl::tma_store_wait_read<0>();")
    assert wait < body.index("named_barrier_sync(1, 256)") < body.index("dq_s[")
    assert "tl::tma_store_wait_read<0>();" in loop[loop.index("mbarrier_arrive(&pipeline_mbar"):]


def test_example_main_runs(capsys):
    """The script's own check (target "auto": the CPU here, a GPU where there is one)."""
    args = ["--batch", "1", "--seq", "96", "--heads", "2", "--dim", "64", "--causal", "--repeat", "1"]
    assert example.main(args) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 3 and "FAIL" not in out


def test_backward_pipeline_is_tma_on_sm90a():
    # The query-tile loop loads Q, dO, L and Delta (the two rows) by TMA from a producer
    # warpgroup; causal too, where the loop starts at the first tile below the diagonal (a
    # run-time value: the stages and barrier phases count from there).
    from tilelang import _C
    ex = _load_example()
    report = _C.lower(ex.attention_bwd(2, 4, 1024, 128, False, 64, 128, 2, 256).handle,
                      "cuda -arch=sm_90a").lowering_report()
    assert "pipelined by a TMA producer warpgroup (warp specialised, mbarriers full/empty per stage) into 2 buffers " \
           "of Q_s dO_s L_s Delta_s" in report, report
    causal = _C.lower(ex.attention_bwd(2, 4, 1024, 128, True, 64, 128, 2, 256).handle,
                      "cuda -arch=sm_90a").lowering_report()
    assert "pipelined by a TMA producer warpgroup (warp specialised, mbarriers full/empty per stage) into 2 buffers " \
           "of Q_s dO_s L_s Delta_s" in causal, causal


def test_backward_wgmma_groups_stay_asynchronous_in_sass():
    # On sm_90a the main kernel's products run as wgmma groups that are not serialised by
    # ptxas (at 232 consumer registers it waited after every instruction: as many waits as
    # HGMMA), and S = K Q^T and dP = V dO^T are issued back to back.
    import re
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from sass import sass_of
    ex = _load_example()
    sass, _, _ = sass_of(ex.attention_bwd(2, 4, 1024, 128, False, 64, 128, 2, 256))
    ops = re.findall(r"\b(HGMMA\.\S+|WARPGROUP\.DEPBAR|WARPGROUP\.ARRIVE)", sass)
    hgmma, waits = sum(o.startswith("HGMMA") for o in ops), ops.count("WARPGROUP.DEPBAR")
    assert hgmma >= 32 and waits * 4 <= hgmma, (hgmma, waits)
    first = ops.index("WARPGROUP.ARRIVE")
    second = ops.index("WARPGROUP.ARRIVE", first + 1)
    assert "WARPGROUP.DEPBAR" not in ops[first:second], ops[first:second + 1]
