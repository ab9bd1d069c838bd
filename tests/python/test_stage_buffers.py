"""Shared buffers a loop selects by its iteration's parity (`S[k % 2]`): what one iteration
reads of S[k % 2] and the next writes into S[(k + 1) % 2] are apart, so a loop whose body
already passes a barrier every iteration needs none at its end (FlashAttention's backward
double-buffers dS this way). Reads of the other stage, or a body without a barrier, keep it."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

SM90 = "cuda -arch=sm_90a"


def reversed_rows_sum(n, stages, read_other_stage=False):
    """B[i] = sum over k of A[k, 63 - i] (or of the row written one iteration before, when
    read_other_stage), each row staged in S[k % stages] by every thread and read reversed."""
    other = (lambda k: (k + 1) % stages) if read_other_stage else (lambda k: k % stages)

    @T.prim_func
    def main(A: T.Tensor((n, 64), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((stages, 64), "float32")
            acc = T.alloc_fragment((64,), "float32")
            T.clear(acc)
            for k in T.serial(n):
                for i in T.Parallel(64):
                    S[k % stages, i] = A[k, i]
                for i in T.Parallel(64):
                    acc[i] += S[other(k), 63 - i]
            T.copy(acc, B)

    return main


def _loop_barriers(func):
    source = _C.codegen(_C.lower(func.handle, SM90), SM90)
    body = source[source.index("for (int32_t k"):]
    return body[:body.index("\n  }\n")].count("__syncthreads();")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_stage_buffers_need_no_barrier_at_the_end(stages):
    assert _loop_barriers(reversed_rows_sum(8, stages)) == 1


def test_one_buffer_keeps_the_barrier_at_the_end():
    assert _loop_barriers(reversed_rows_sum(8, 1)) == 2


def test_reading_the_stage_the_next_iteration_writes_keeps_it():
    # Iteration k reads S[(k + 1) % 2], which iteration k + 1 writes.
    assert _loop_barriers(reversed_rows_sum(8, 2, read_other_stage=True)) == 2


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_stage_buffers_numerics(target, rng, stages):
    n = 9
    kernel = tilelang.compile(reversed_rows_sum(n, stages), target=target)
    a = rng.standard_normal((n, 64)).astype(np.float32)
    b = np.zeros(64, np.float32)
    kernel(a, b)
    np.testing.assert_allclose(b, a.sum(0)[::-1], rtol=1e-5, atol=1e-5)
