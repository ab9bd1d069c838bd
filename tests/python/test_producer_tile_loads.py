"""Tiles copied once per run of a TMA pipeline (attention's query tile) are loaded by the
pipeline's producer warpgroup by TMA, on an mbarrier pair of their own: the consumers wait
for them before the loop and, where the loop runs again (a persistent kernel's next work
item), release them after it so that the producer loads the next ones while they finish."""
import os
import sys

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

from sm90 import hopper_path_forced_off, require_sm90

sys.path.insert(0, os.path.dirname(__file__))
from kernels.attention import flash_attention_fwd  # noqa: E402

SM90 = "cuda -arch=sm_90a"
OFF = "tl.disable_producer_tile_loads"


@pytest.mark.parametrize("persistent", [None, 3])
def test_the_query_tile_comes_from_the_producer(persistent):
    source = _C.codegen(_C.lower(flash_attention_fwd(1, 2, 512, 128, True, block_M=128, block_N=128, num_stages=2,
                                                     threads=256, persistent=persistent).handle, SM90), SM90)
    producer = source[source.index("tl::set_max_nreg<40"):]
    consumer = source[source.index("tl::set_max_nreg<232"):source.index("tl::set_max_nreg<40")]
    # One TMA load per 64-column panel of the 128 x 128 tile, on the tiles' full barrier.
    full = "&tile_mbar[tl::floormod(tile_iter, 2)]" if persistent else "&tile_mbar[0]"
    assert producer.count(full + ", ") == 2 + 1, producer  # the loads and expect_tx
    assert f"tl::mbarrier_arrive_expect_tx({full}, 32768u);" in producer
    assert "*>(&Q_shared[" not in consumer  # no thread stores into the tile
    assert f"tl::mbarrier_wait({full}" in consumer
    if persistent:
        # Two buffers: run i loads into buffer i % 2 once the consumers have released the
        # run before last (i - 2) from it, and they wait for phase i / 2 of its full barrier.
        assert "tl::mbarrier_wait(&tile_mbar[tl::floormod(tile_iter, 2) + 2], " \
               "(uint32_t)tl::floormod(tl::floordiv(tile_iter, 2) + 1, 2));" in producer
        assert "&Q_shared_1[tl::floormod(tile_iter, 2) * 16384]" in producer
        assert "tl::mbarrier_wait(&tile_mbar[tl::floormod(tile_iter, 2)], " \
               "(uint32_t)tl::floormod(tl::floordiv(tile_iter, 2), 2));" in consumer
        release = "tl::mbarrier_arrive(&tile_mbar[tl::floormod(tile_iter, 2) + 2]);"
        assert consumer.index(release) > consumer.index("for (int32_t k = 0")
    else:
        assert "tile_mbar[1]" not in producer + consumer  # one load: nothing to release
    # No block-wide barrier publishes the tile any more: the mbarrier does.
    loop = consumer.index("for (int32_t k = 0")
    assert "named_barrier_sync" not in consumer[consumer.index("tl::mbarrier_wait(&tile_mbar["):loop]


def test_the_switch_keeps_the_consumers_copy():
    func = flash_attention_fwd(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2, threads=256)
    source = _C.codegen(_C.lower(func.handle, SM90, [OFF]), SM90)
    assert "tile_mbar" not in source
    assert "*>(&Q_shared[" in source


def query_tile_read_after_the_loop(n=256, d=64):
    """O = Q + the sum over key tiles of Q K^T: the query tile is also read after the
    pipelined loop, so the consumers keep their own copy."""

    @T.prim_func
    def main(Q: T.Tensor((n, d), "float16"), K: T.Tensor((n, d), "float16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(n // 64, threads=128) as bx:
            Q_s = T.alloc_shared((64, d), "float16")
            K_s = T.alloc_shared((64, d), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(Q[bx * 64, 0], Q_s)
            T.clear(acc)
            for k in T.Pipelined(n // 64, num_stages=2):
                T.copy(K[k * 64, 0], K_s)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
            for i, j in T.Parallel(64, 64):
                acc[i, j] += Q_s[i, j]
            T.copy(acc, O)

    return main


def test_a_tile_read_after_the_loop_stays_the_consumers():
    source = _C.codegen(_C.lower(query_tile_read_after_the_loop().handle, SM90), SM90)
    assert "tile_mbar" not in source
    assert "*>(&Q_s[" in source  # the consumers' own stores


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("persistent", [None, 3, 5])
def test_attention_numerics(target, rng, causal, persistent):
    """Against the reference: 3 or 5 blocks over 8 (batch, head, query tile) items, so the
    blocks run different numbers of items and, causal, different trip counts per item."""
    require_sm90(target)
    from test_kernels import _attention_reference
    b, h, s, d = 1, 2, 512, 128
    kernel = tilelang.compile(flash_attention_fwd(b, h, s, d, causal, block_M=128, block_N=128, num_stages=2,
                                                  threads=256, persistent=persistent), out_idx=[3], target=target)
    assert hopper_path_forced_off() or "by TMA from the pipeline's producer" in kernel.get_lowering_report()
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    out = np.asarray(kernel(q, k, v)).astype(np.float64)
    ref = _attention_reference(q, k, v, causal)
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < 1e-3, rel


def test_one_buffer_where_two_do_not_fit():
    """MLA's split kernel for 128 heads (64-row tiles): a second buffer of its query tiles
    would pass the shared memory, so the producer loads the next item's once the consumers
    release the last one (after the loop)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "attention"))
    import mla_decode
    func = mla_decode.mla_decode_split(64, 128, 4096, 64, 64, 66, 64 + 66, 576 ** -0.5,
                                       **mla_decode.tile_config("cuda", 128))
    lowered = _C.lower(func.handle, SM90)
    report = lowered.lowering_report()
    assert report.count("no room for a second buffer") == 2, report  # Q_c and Q_pe
    source = _C.codegen(lowered, SM90)
    assert "tl::mbarrier_wait(&tile_mbar[1], (uint32_t)tl::floormod(tile_iter + 1, 2));" in source
    assert "tl::mbarrier_arrive(&tile_mbar[1]);" in source


@pytest.mark.parametrize("params", [
    # One item whose loop has 0 iterations: the loop is simplified away, and so are the
    # role branches of its tile's load.
    dict(items=1, blocks=3, t0=0, shift=0, block_M=32, block_N=64, block_K=32, num_stages=2, threads=128,
         dtype="float32"),
    # Loops of i iterations for i in range(2), 3 stages: the barrier check tries the trip
    # counts the code was simplified for (at most 1), not 2.
    dict(items=2, blocks=1, t0=0, shift=0, block_M=32, block_N=64, block_K=16, num_stages=3, threads=256,
         dtype="float16"),
], ids=["loop-never-runs", "loop-runs-at-most-once"])
def test_run_tiles_cases_compile(params):
    """Cases the differential fuzzer's run_tiles template found (compile errors, not wrong code)."""
    from fuzz.templates import TEMPLATES
    lowered = _C.lower(TEMPLATES["run_tiles"].kernel(params).handle, SM90)
    assert "ws_role" not in _C.codegen(lowered, SM90)
