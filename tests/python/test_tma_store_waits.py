"""TMA stores issued in a loop: the issuing thread waits for the bulk copy to read its
shared tile only before the next barrier that precedes a write of the tile (its warp no
longer arrives late at every barrier), and after the loop for the last iteration's copy.
(The wait stays right after the issue when the tile, or bytes it shares, is written before
any barrier: a safety net that well-formed programs, whose barriers insert_barriers placed,
do not reach.)"""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

SM90 = "cuda -arch=sm_90a"


def rows_through_shared(n, R=8, W=64):
    """Out[k R:(k + 1) R] += 2 * A[k], each tile staged in S and added by a TMA reduction on
    sm_90a (atomics elsewhere); Out starts at 0."""

    @T.prim_func
    def main(A: T.Tensor((n, R, W), "float32"), Out: T.Tensor((n * R, W), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((R, W), "float32")
            acc = T.alloc_fragment((R, W), "float32")
            for k in T.serial(n):
                T.copy(A[k, :, :], acc)
                for i, j in T.Parallel(R, W):
                    S[i, j] = acc[i, j] * 2
                T.atomic_add(Out[k * R:(k + 1) * R, :], S, use_tma=True)

    return main


def _loop(source):
    return source[source.index("for (int32_t k = 0"):]


def test_the_wait_moves_to_the_next_barrier():
    lowered = _C.lower(rows_through_shared(4).handle, SM90)
    assert "by TMA reduction" in lowered.lowering_report()
    loop = _loop(_C.codegen(lowered, SM90))
    commit = loop.index("tl::tma_store_commit();", loop.index("tl::tma_reduce_add("))
    after = loop[commit:]
    # Not in the issuing block: before the barrier that closes the step ...
    wait = after.index("tl::tma_store_wait_read<0>();")
    assert after[:wait].count("}") == 1 and wait < after.index("__syncthreads();"), after
    # ... and once more after the loop.
    assert after.count("tl::tma_store_wait_read<0>();") == 2, after


def test_rows_through_shared_numerics(target):
    kernel = tilelang.compile(rows_through_shared(5), target=target)
    a = np.random.default_rng(3).standard_normal((5, 8, 64)).astype(np.float32)
    out = np.zeros((40, 64), np.float32)
    kernel(a, out)
    np.testing.assert_allclose(out, 2 * a.reshape(40, 64), rtol=1e-6, atol=1e-6)
