"""version_uniform_conditions: a T.Parallel loop whose mask holds for the whole tile in most
runs gets a block-uniform test and a copy without the mask (attention's causal mask off the
diagonal, a ragged edge off the last tile). Results against numpy on every target, and the
lowering report's line where the copy is made."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

SM90 = "cuda -arch=sm_90a"


def causal_scores(n, block_M, block_N):
    """scores[q, k] = 1 where key k may be seen by query q (k <= q), else -1, tile by tile:
    the mask is the attention kernel's, through a loop over key tiles."""
    @T.prim_func
    def main(Out: T.Tensor((n, n), "float32")):
        with T.Kernel(n // block_M, threads=128) as bx:
            s = T.alloc_fragment((block_M, block_N), "float32")
            for k in T.serial(n // block_N):
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 1.0, -1.0)
                T.copy(s, Out[bx * block_M, k * block_N])

    return main


def ragged_sum(n, block):
    """Out[b] = the sum of A's tile b, A read tile by tile with a mask past its end."""
    tiles = (n + block - 1) // block

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _:
            acc = T.alloc_fragment((block,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for k in T.serial(tiles):
                for j in T.Parallel(block):
                    acc[j] += T.if_then_else(k * block + j < n, A[T.min(k * block + j, n - 1)], 0.0)
            T.reduce_sum(acc, total, dim=0)
            T.copy(total, Out)

    return main


def _report(func):
    return _C.lower(func.handle, SM90).lowering_report()


VERSIONED = re.compile(r"T\.Parallel loop: its condition at line \d+ holds for the whole tile when a "
                       r"block-uniform test does; a copy without it runs then")


@pytest.mark.parametrize("block_M,block_N", [(32, 32), (64, 32), (32, 64)])
def test_causal_mask(target, block_M, block_N):
    n = 128
    kernel = tilelang.compile(causal_scores(n, block_M, block_N), out_idx=[0], target=target)
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(np.asarray(kernel()), np.where(k <= q, 1.0, -1.0).astype(np.float32))


def test_causal_mask_is_versioned():
    assert len(VERSIONED.findall(_report(causal_scores(128, 64, 64)))) == 1


@pytest.mark.parametrize("n", [1000, 1024])
def test_ragged_edge(target, n):
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    kernel = tilelang.compile(ragged_sum(n, 128), out_idx=[1], target=target)
    np.testing.assert_allclose(np.asarray(kernel(a))[0], a.sum(dtype=np.float64), rtol=1e-4)


def test_ragged_edge_is_versioned_unless_it_reads_memory():
    # The mask itself is an index comparison: versioned. (The load in the value is not the condition.)
    assert len(VERSIONED.findall(_report(ragged_sum(1000, 128)))) == 1


def test_what_is_not_versioned(target):
    """A condition on a loaded value (memory the loop might change), on floats, or with no
    index of the loop in it stays as written."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), L: T.Tensor((1,), "int32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            x = T.alloc_fragment((64,), "float32")
            T.copy(A, x)
            for i in T.Parallel(64):
                x[i] = T.if_then_else(i < L[0], x[i], 0.0)
            for i in T.Parallel(64):
                x[i] = T.if_then_else(x[i] > 0.5, x[i], 0.5)
            for i in T.Parallel(64):
                x[i] = T.if_then_else(bx < 1, x[i] * 2.0, x[i])
            T.copy(x, B)

    assert VERSIONED.search(_report(main)) is None
    a = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    kernel = tilelang.compile(main, out_idx=[2], target=target)
    got = np.asarray(kernel(a, np.array([40], np.int32)))
    want = np.maximum(np.where(np.arange(64) < 40, a, 0.0), 0.5) * 2.0
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)


def test_a_condition_true_on_every_tile_is_dropped(target):
    """`i < 64` over an extent of 64 always holds: the loop is rewritten without it, no test."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            x = T.alloc_fragment((64,), "float32")
            T.copy(A, x)
            for i in T.Parallel(64):
                x[i] = T.if_then_else(i < 64, x[i] + 1.0, -1.0)
            T.copy(x, B)

    assert VERSIONED.search(_report(main)) is None
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(tilelang.compile(main, out_idx=[1], target=target)(a)), a + 1.0)


def test_flash_attention_causal_mask_only_on_the_diagonal():
    """The attention kernel's causal mask gets its block-uniform test (on sm_90a)."""
    import sys
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    report = _report(flash_attention_fwd(1, 2, 512, 64, True, block_M=128, block_N=128, num_stages=2, threads=256))
    assert len(VERSIONED.findall(report)) == 1
