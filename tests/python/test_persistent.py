"""Persistent kernels (T.Persistent): a fixed number of blocks, each taking tiles in turn.

On every target: each tile of the domain is visited exactly once, in upstream's grouped
order, and a persistent GEMM matches numpy. On sm_90a the pipelined loop inside the
persistent loop keeps the Hopper path (TMA producer warpgroup, mbarriers counted across
the tiles, wgmma): checked in the machine code without a GPU and numerically on one."""
import re

import numpy as np
import pytest

import tilelang
from tilelang import _C
from tilelang.errors import TileLangTypeError

from kernels.persistent import matmul_persistent, tile_visits
from sass import sass_of
from sm90 import hopper_path_forced_off, require_sm90

SM90 = "cuda -arch=sm_90a"


def _grouped_order(domain, group):
    """tile index -> coordinates, as T.Persistent numbers the tiles."""
    *lead_dims, last = domain
    lead = int(np.prod(lead_dims)) if lead_dims else 1
    group = min(group, last)
    order = []
    for t in range(int(np.prod(domain))):
        first = t // (lead * group) * group
        width = min(group, last - first)
        local = t % (lead * group)
        rest, coords = local // width, [first + local % width]
        for d in reversed(lead_dims):
            coords.insert(0, rest % d)
            rest //= d
        order.append(tuple(coords))
    return order


@pytest.mark.parametrize("domain, blocks, group", [
    ((5, 7), 3, 8),       # the group is wider than the last dimension
    ((4, 10), 6, 4),      # the last group is narrower (10 = 4 + 4 + 2)
    ((4, 16), 8, 8),      # upstream's case: the last dimension a multiple of the group
    ((9,), 4, 2),
    ((2, 3, 5), 4, 2),
    ((3, 3), 16, 8),      # more blocks than tiles: some blocks take none
])
def test_every_tile_is_visited_once_in_the_grouped_order(target, domain, blocks, group):
    kernel = tilelang.compile(tile_visits(domain, blocks, group), target=target)
    counts = np.zeros(domain, np.int32)
    waves = np.full(domain, -1, np.int32)
    kernel(counts, waves)
    np.testing.assert_array_equal(counts, np.ones(domain, np.int32))
    expected = np.empty(domain, np.int32)
    for t, coords in enumerate(_grouped_order(domain, group)):
        expected[coords] = t // blocks   # block t % blocks takes it in its (t // blocks)-th turn
    np.testing.assert_array_equal(waves, expected)


@pytest.mark.parametrize("M, N, K, blocks, epilogue_shared", [
    (256, 384, 192, 2, False),
    (200, 328, 100, 3, True),    # ragged edges in M, N and K
])
def test_persistent_gemm_numerics(target, rng, M, N, K, blocks, epilogue_shared):
    kernel = tilelang.compile(matmul_persistent(M, N, K, blocks, block_M=64, block_N=64, block_K=32,
                                                num_stages=2, threads=128, epilogue_shared=epilogue_shared),
                              out_idx=[2], target=target)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(kernel(a, b)).astype(np.float64), a.astype(np.float64) @ b, rtol=2e-3,
                               atol=2e-3)


@pytest.mark.parametrize("bad, error, message", [
    (dict(group_size=0), TileLangTypeError, "group_size must be a positive Python int"),
    (dict(blocks=0), TileLangTypeError, "wave_size must be positive"),
])
def test_persistent_arguments_are_checked(bad, error, message):
    args = dict(M=128, N=128, K=64, blocks=4)
    args.update(bad)
    with pytest.raises((error, TypeError), match=message):
        _C.lower(matmul_persistent(**args).handle, "cpu")


def test_pipeline_inside_the_persistent_loop_keeps_the_hopper_path():
    """The producer warpgroup runs the persistent loop's skeleton (tile coordinates, the
    TMA loads) and the consumers everything else; the stage and the phase of the mbarriers
    run on across tiles, and the protocol check simulates several tiles in a row."""
    sass, usage, report = sass_of(matmul_persistent(8192, 8192, 8192, 132, block_M=128, block_N=256, num_stages=3,
                                                    dtype="bfloat16"))
    assert "pipelined by a TMA producer warpgroup" in report and "warp specialised" in report, report
    assert "three times in a row" in report, report
    assert "[slower path" not in report, report
    # Each tile's result leaves through a staging tile of its own by TMA store.
    assert "T.copy C_local -> C through a shared tile of its own (65536 bytes), then by TMA store" in report
    assert "UTMASTG" in sass
    assert sass.count("HGMMA.64x128x16.F32.BF16") % 8 == 0 and "HGMMA" in sass
    assert "UTMALDG" in sass and "SYNCS.PHASECHK" in sass and "USETMAXREG.TRY_ALLOC" in sass
    assert "LDL" not in sass and "STL" not in sass and "LOCAL:0" in usage, usage


def test_an_epilogue_without_room_for_its_staging_tile_is_a_reported_slower_path(monkeypatch):
    """Four stages of 128 x 256 bf16 tiles leave 35 KB: the 64 KB staging tile does not
    fit, the accumulators are stored from registers, and the report and a warning say so."""
    import sys
    import warnings
    from tilelang.errors import TileLangPerformanceWarning
    func = matmul_persistent(8192, 8192, 8192, 132, block_M=128, block_N=256, num_stages=4, dtype="bfloat16")
    report = _C.lower(func.handle, SM90).lowering_report()
    assert ("T.copy C_local -> C stored from registers [slower path: not through a shared tile and a TMA store: its "
            "65536 bytes do not fit the 35392 bytes of shared memory the kernel leaves free (fewer pipeline stages "
            "would make room)]") in report, report
    jk = sys.modules["tilelang.jit.kernel"]
    monkeypatch.setattr(jk, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jk._warn_slower_paths(report)
    assert len(caught) == 1 and issubclass(caught[0].category, TileLangPerformanceWarning)
    assert "fewer pipeline stages would make room" in str(caught[0].message)


def test_producer_code_holds_only_the_loop_skeleton():
    source = _C.codegen(_C.lower(matmul_persistent(1024, 1024, 512, 16, epilogue_shared=True).handle, SM90), SM90)
    start = re.search(r"tl::set_max_nreg<\d+, false>\(\);", source).start()
    producer = source[start:]
    assert "tl::tma_load(" in producer and "pipeline_iter = pipeline_iter + " in producer
    assert "wgmma" not in producer and "C[" not in producer and "C_shared[" not in producer
    consumer = source[source.index("tl::set_max_nreg<"):start]
    assert "pipeline_iter = pipeline_iter + " in consumer and "tl::tma_load(" not in consumer


def test_a_second_pipelined_loop_takes_cp_async_and_says_why():
    import tilelang.language as T

    @T.prim_func
    def two_loops(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
                  C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            A2_s = T.alloc_shared((128, 64), "float16")
            B2_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A2_s)
                T.copy(B[k * 64, bx * 128], B2_s)
                T.gemm(A2_s, B2_s, acc)
            T.copy(acc, C[by * 128, bx * 128])

    report = _C.lower(two_loops.handle, SM90).lowering_report()
    assert "pipelined by a TMA producer warpgroup" in report
    assert "copies by cp.async, not TMA [slower path: not TMA: another loop of the kernel has the TMA pipeline " \
           "(one per kernel)]" in report, report


def test_barrier_protocol_runs_the_persistent_pipeline_for_run_time_trip_counts():
    import tilelang.language as T
    report = _C.lower(matmul_persistent(1024, 1024, T.dynamic("k"), 132, transpose_A=True).handle, SM90).lowering_report()
    assert "for trip counts 0, 1, 2, 3, 4, 6, 7, 11 (each three times in a row, and in runs of mixed counts)" in report


_gpu_only = require_sm90


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_persistent_tma_pipeline_trip_counts(target, rng, num_stages):
    """Five blocks over 2 x 3 tiles of a run-time K: each block's pipeline runs once or
    twice, its stage and phase carried from tile to tile, for trip counts 0, 1, around the
    stage count and many (a partial last stage read as zeros past the tensor's end)."""
    _gpu_only(target)
    import tilelang.language as T
    M, N = 256, 384
    kernel = tilelang.compile(matmul_persistent(M, N, T.dynamic("k"), 5, transpose_A=True, num_stages=num_stages,
                                                out_dtype="float32"),
                              out_idx=[2], target=target)
    assert hopper_path_forced_off() or "pipelined by a TMA producer warpgroup" in kernel.get_lowering_report()
    for k in (0, 1, 64, 100, 128, 192, 256, 320, 1000):
        a = rng.uniform(-1, 1, (k, M)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, N)).astype(np.float16)
        c = np.asarray(kernel(a, b))
        np.testing.assert_allclose(c, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-5, atol=1e-3,
                                   err_msg=f"k={k}")


@pytest.mark.parametrize("M, N, K, blocks, stages, epilogue_shared", [
    (1000, 1800, 1000, 132, 4, False),   # ragged edges, fewer tiles per block than stages
    (2048, 2048, 2048, 7, 3, False),     # many tiles per block, each stored by TMA from a staging tile
    (1024, 1280, 512, 20, 3, True),      # the result through a shared tile
])
def test_persistent_gemm_on_the_hopper_path(target, rng, M, N, K, blocks, stages, epilogue_shared):
    _gpu_only(target)
    import ml_dtypes
    kernel = tilelang.compile(matmul_persistent(M, N, K, blocks, block_M=128, block_N=256 if not epilogue_shared else 128,
                                                dtype="bfloat16", num_stages=stages, epilogue_shared=epilogue_shared),
                              out_idx=[2], target=target)
    assert hopper_path_forced_off() or "warp specialised" in kernel.get_lowering_report()
    a = rng.uniform(-1, 1, (M, K)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, (K, N)).astype(ml_dtypes.bfloat16)
    c = np.asarray(kernel(a, b)).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    assert rel < 5e-3, rel
    np.testing.assert_allclose(c, ref, rtol=3e-2, atol=3e-2)
