"""Barriers in thread-level code (kernels that index by T.get_thread_binding and loop with
T.serial): shared memory one thread writes and another reads inside a serial loop gets a
barrier between the two and at the end of the loop's body, as upstream's thread storage
sync places them; a thread's own row (one dimension indexed by the thread) gets none."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

SM90 = "cuda -arch=sm_90a"


def gemv_through_shared(n, k, block_n, block_k, own_rows_only=False):
    """y = B x, one thread a row of B; x's chunk is staged in shared memory by every thread
    (the same elements), then read by all of them; the chunk of B in the thread's own row."""

    @T.prim_func
    def main(x: T.Tensor((k,), "float32"), B: T.Tensor((n, k), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block_n), threads=block_n) as bn:
            tn = T.get_thread_binding(0)
            x_s = T.alloc_shared((block_k,), "float32")
            B_s = T.alloc_shared((block_n, block_k), "float32")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for bk in T.serial(T.ceildiv(k, block_k)):
                for t in T.serial(block_k):
                    if not own_rows_only:
                        x_s[t] = x[bk * block_k + t]
                    B_s[tn, t] = B[bn * block_n + tn, bk * block_k + t]
                for t in T.serial(block_k):
                    if own_rows_only:
                        acc[0] += x[bk * block_k + t] * B_s[tn, t]
                    else:
                        acc[0] += x_s[t] * B_s[tn, t]
            y[bn * block_n + tn] = acc[0]

    return main


def _loop_body(source):
    body = source[source.index("for (int32_t bk"):]
    return body[:body.index("\n  }\n")]


def test_shared_chunk_read_by_every_thread_gets_barriers():
    source = _C.codegen(_C.lower(gemv_through_shared(256, 512, 64, 32).handle, SM90), SM90)
    body = _loop_body(source)
    # One after the chunk is written (before it is read), one at the end of the body
    # (before the next iteration writes it again).
    assert body.count("__syncthreads();") == 2, body
    assert body.index("x_s[t] =") < body.index("__syncthreads();") < body.index("x_s[t_1]")
    assert body.rstrip().endswith("__syncthreads();")


def test_own_rows_get_no_barrier():
    source = _C.codegen(_C.lower(gemv_through_shared(256, 512, 64, 32, own_rows_only=True).handle, SM90), SM90)
    assert "__syncthreads();" not in _loop_body(source)


@pytest.mark.parametrize("own", [False, True])
def test_gemv_through_shared_numerics(target, rng, own):
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")
    n, k = 256, 512
    kernel = tilelang.compile(gemv_through_shared(n, k, 64, 32, own), out_idx=[-1], target=target)
    x = rng.standard_normal(k).astype(np.float32)
    B = rng.standard_normal((n, k)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(x, B)), B @ x, rtol=1e-4, atol=1e-3)


def test_loop_that_may_break_in_some_threads_gets_no_barrier_inside():
    """A T.loop_break under a condition that differs between threads leaves the loop in some
    threads only: a barrier inside would never be reached by all of them."""

    @T.prim_func
    def main(x: T.Tensor((64, 32), "float32"), y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _:
            tn = T.get_thread_binding(0)
            s = T.alloc_shared((32,), "float32")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for k in T.serial(64):
                s[tn] = x[k, tn]
                acc[0] += s[(tn + 1) % 32]
                if acc[0] > 100.0:
                    T.loop_break()
            y[tn] = acc[0]

    source = _C.codegen(_C.lower(main.handle, SM90), SM90)
    loop = source[source.index("for (int32_t k"):]
    loop = loop[:loop.index("\n  }\n")]
    assert "__syncthreads();" not in loop and "break;" in loop


def test_index_by_one_thread_axis_is_not_a_threads_own():
    """x_s[tk, t] with threads (16, 2): tk tells the two rows of threads apart, not the 16
    threads of a row, which all read what 8 of them wrote: barriers (a fuzzer case of the
    thread_level template that webgpu computed wrong before)."""

    @T.prim_func
    def main(x: T.Tensor((32,), "float32"), B: T.Tensor((16, 32), "float32"), y: T.Tensor((16, 2), "float32")):
        with T.Kernel(1, threads=(16, 2)) as _:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            x_s = T.alloc_shared((2, 8), "float32")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for c in T.serial(2):
                if tn < 8:
                    x_s[tk, tn] = x[(c * 2 + tk) * 8 + tn]
                for t in T.serial(8):
                    acc[0] += x_s[tk, t] * B[tn, (c * 2 + tk) * 8 + t]
            y[tn, tk] = acc[0]

    source = _C.codegen(_C.lower(main.handle, SM90), SM90)
    loop = source[source.index("for (int32_t c"):]
    loop = loop[:loop.index("\n  }\n")]
    assert loop.count("__syncthreads();") == 2, loop


def staged_by_every_thread(rows):
    """x's chunk staged in shared memory by every thread at x_s[tk, t], with one thread
    along tk: the 64 threads of the block all write and read the same elements."""

    @T.prim_func
    def main(x: T.Tensor((16,), "float32"), B: T.Tensor((rows, 16), "float32"), y: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=(rows, 1)) as _:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            x_s = T.alloc_shared((1, 8), "float32")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for c in T.serial(2):
                for t in T.serial(8):
                    x_s[tk, t] = x[c * 8 + t]
                for t in T.serial(8):
                    acc[0] += x_s[tk, t] * B[tn, c * 8 + t]
            y[tn] = acc[0]

    return main


def test_index_by_an_axis_of_one_thread_is_not_a_threads_own(target, rng):
    """An index by a thread axis of extent 1 (tk) is the same for every thread: the chunk
    is shared by the block and gets barriers (the thread_level fuzzer template on cuda:
    the second warp read the next chunk's x before this one's products were done)."""
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")
    source = _C.codegen(_C.lower(staged_by_every_thread(64).handle, SM90), SM90)
    loop = source[source.index("for (int32_t c"):]
    loop = loop[:loop.index("\n  }\n")]
    assert loop.count("__syncthreads();") == 2, loop
    kernel = tilelang.compile(staged_by_every_thread(64), out_idx=[-1], target=target)
    x = rng.standard_normal(16).astype(np.float32)
    B = rng.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(x, B)), B.astype(np.float64) @ x, rtol=1e-5, atol=1e-4)


def test_parallel_over_a_threads_own_array(target, rng):
    """`for v in T.Parallel(8): loc[v] *= s[0]` on a T.alloc_local array in thread-level code:
    every thread runs all 8 iterations on its own array (upstream's mxfp4 dequantisation
    scales its registers so; it was split over the threads and refused as out of bounds)."""
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")

    @T.prim_func
    def main(X: T.Tensor((1024,), "float32"), Y: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding(0)
            loc = T.alloc_local((8,), "float32")
            s = T.alloc_local((1,), "float32")
            s[0] = T.cast(tx, "float32")
            for v in T.Parallel(8):
                loc[v] = X[tx * 8 + v]
            for v in T.Parallel(8):
                loc[v] *= s[0]
            for v in T.vectorized(8):
                Y[tx * 8 + v] = loc[v]

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    assert "T.Parallel over the per-thread array 'loc': every thread runs all its iterations" in \
        kernel.get_lowering_report()
    x = rng.standard_normal(1024).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(x)), x * np.repeat(np.arange(128), 8), rtol=1e-6)


def test_element_each_thread_writes_then_reads_gets_no_barrier():
    """`s[r * 16 + tx // 8] = ...` in one loop, `if s[r_1 * 16 + tx // 8]` in the next: each
    thread reads what it (or a thread writing the same value) wrote, as a FlashMLA-style
    producer marks which gathered rows are valid: no barrier (as upstream)."""

    @T.prim_func
    def main(I: T.Tensor((64,), "int32"), Y: T.Tensor((128, 4), "int32")):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding(0)
            valid = T.alloc_shared((64,), "bool")
            for it in T.serial(3):
                for r in T.serial(4):
                    valid[r * 16 + tx // 8] = I[r * 16 + tx // 8] > it
                for r_1 in T.serial(4):
                    Y[tx, r_1] = T.if_then_else(valid[r_1 * 16 + tx // 8], 1, 0)

    source = _C.codegen(_C.lower(main.handle, SM90), SM90)
    assert "__syncthreads();" not in source[source.index("for (int32_t it"):]
