"""T.comm_reducer + T.tvm_thread_allreduce (TVM's thread all-reduce, as upstream's SIMT GEMV
examples write it): every thread gets the combination of its group's values. A group along
one thread axis whose extent and stride are powers of two combines by butterfly shuffles
inside each warp (a WebGPU subgroup, where the block is one axis of whole subgroups), then
across the warps it spans through shared memory; other groups meet in shared memory alone,
with a performance warning."""
import re
import warnings

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangPerformanceWarning, TileLangTypeError

SM90 = "cuda -arch=sm_90a"


def gemv(n, k, block_n, reduce_threads, op="sum", k_first=False):
    """y = B x (op "sum") or y = max_j B[i, j] * x[j] (op "max"): threads (block_n,
    reduce_threads), or (reduce_threads, block_n) with k_first; each (tn, tk) thread takes
    every reduce_threads-th column of its row, then the tk threads of a row all-reduce."""
    per = k // reduce_threads
    threads = (reduce_threads, block_n) if k_first else (block_n, reduce_threads)

    @T.prim_func
    def main(x: T.Tensor((k,), "float32"), B: T.Tensor((n, k), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(n // block_n, threads=threads) as bn:
            tn = T.get_thread_binding(1 if k_first else 0)
            tk = T.get_thread_binding(0 if k_first else 1)
            part = T.alloc_local((1,), "float32")
            total = T.alloc_local((1,), "float32")
            part[0] = 0.0 if op == "sum" else -T.infinity("float32")
            for j in T.serial(per):
                v = x[j * reduce_threads + tk] * B[bn * block_n + tn, j * reduce_threads + tk]
                part[0] = part[0] + v if op == "sum" else T.max(part[0], v)
            reducer = (T.comm_reducer(lambda a, b: a + b, [T.Cast("float32", 0)]) if op == "sum"
                       else T.comm_reducer(lambda a, b: T.max(a, b), [-T.infinity("float32")]))
            with T.attr(reducer, "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], tk, dtype="handle"))
            if tk == reduce_threads - 1:
                y[bn * block_n + tn] = total[0]

    return main


def reference(x, B, reduce_threads, op):
    prods = B.astype(np.float64) * x.astype(np.float64)[None, :]
    return prods.sum(axis=1) if op == "sum" else prods.max(axis=1)


@pytest.mark.parametrize("block_n, reduce_threads, op, k_first", [
    (4, 8, "sum", False), (2, 16, "max", False), (1, 32, "sum", False), (2, 32, "sum", False),
    (8, 16, "max", False),
    (1, 64, "sum", True),     # a one-axis block: WebGPU's subgroups too
    (2, 64, "max", True),     # groups of 64 contiguous threads: two warps each
    (4, 12, "sum", False),    # 12 threads a group: shared memory alone
])
def test_thread_allreduce_numerics(target, rng, block_n, reduce_threads, op, k_first):
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")
    n, k = 64, 768
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(gemv(n, k, block_n, reduce_threads, op, k_first), out_idx=[-1], target=target)
    slower = [str(w.message) for w in caught if issubclass(w.category, TileLangPerformanceWarning)]
    shared_only = reduce_threads & (reduce_threads - 1) != 0
    assert any("goes through shared memory" in m for m in slower) == shared_only, slower
    # WebGPU's compilers take subgroup builtins in blocks of threads along x only.
    y_axis = block_n > 1 or not k_first
    report = kernel.get_lowering_report()
    assert ("T.tvm_thread_allreduce through shared memory [slower path: WebGPU's subgroup operations need a "
            "block of one thread axis" in report) == (target == "webgpu" and y_axis and not shared_only), report
    x = rng.standard_normal(k).astype(np.float32)
    B = rng.standard_normal((n, k)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(x, B)), reference(x, B, reduce_threads, op), rtol=1e-4, atol=1e-4)


def _cuda_body(func):
    source = _C.codegen(_C.lower(func.handle, SM90), SM90)
    return source[source.index("__global__"):]


def test_a_group_inside_a_warp_combines_by_shuffles():
    """8 threads 4 apart (threads (4, 8), the group along y): lane masks 16, 8, 4, nothing
    in shared memory and no barrier."""
    body = _cuda_body(gemv(64, 256, 4, 8))
    masks = re.findall(r"__shfl_xor_sync\(0xffffffffu, allreduce_acc\[0\], (\d+), 32\)", body)
    assert masks == ["16", "8", "4"], masks
    assert "__syncthreads" not in body and "allreduce_shared[" not in body


def test_a_group_across_warps_meets_in_shared_memory_after_the_shuffles():
    """32 threads 2 apart span two warps: shuffles with masks 16 .. 2 inside each, then each
    warp's value in shared memory, a barrier, and every thread combines the two warps' in
    the same order."""
    body = _cuda_body(gemv(64, 256, 2, 32))
    masks = re.findall(r"__shfl_xor_sync\(0xffffffffu, allreduce_acc\[0\], (\d+), 32\)", body)
    assert masks == ["16", "8", "4", "2"], masks
    store = body.index("allreduce_shared[tx + ty * 2] = allreduce_acc[0];")
    combine = body.index("allreduce_total[0] = allreduce_total[0] + allreduce_shared[tx + r * 32];")
    assert body.index(masks and "__shfl_xor_sync") < store < body.index("__syncthreads();", store) < combine
    assert "r < 2;" in body


def test_other_groups_meet_in_shared_memory_with_a_warning():
    """12 threads a group: each thread stores its value, a barrier, then each combines its
    group's values."""
    with pytest.warns(TileLangPerformanceWarning, match=r"over 1 thread axes of \[12\] threads goes through shared "
                      r"memory .*slower path: warp shuffles need consecutive thread axes whose extents are powers"):
        func = gemv(64, 768, 4, 12)
    body = _cuda_body(func)
    assert "__shfl_xor_sync" not in body
    store = body.index("allreduce_shared[tx + ty * 4] = allreduce_acc[0];")
    combine = body.index("allreduce_acc[0] = allreduce_acc[0] + allreduce_shared[tx + j_1 * 4];")
    assert store < body.index("__syncthreads();", store) < combine


def block_sum(x_threads, y_threads):
    """Every thread of a (x_threads, y_threads) block all-reduces its element of x over both
    thread axes: y[t] = the sum of x, for every thread t."""
    n = x_threads * y_threads

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=(x_threads, y_threads)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            total = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda a, b: a + b, [T.Cast("float32", 0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), x[tx + ty * x_threads], True, total[0], tx, ty,
                                                  dtype="handle"))
            y[tx + ty * x_threads] = total[0]

    return main


def test_a_group_over_two_thread_axes_is_one_run_of_lanes(target, rng):
    """Threads (4, 16) reduced over both axes: 64 consecutive lanes, two warps; on CUDA
    shuffles with masks 16 .. 1 and the two warps' values through shared memory."""
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")
    body = _cuda_body(block_sum(4, 16))
    masks = re.findall(r"__shfl_xor_sync\(0xffffffffu, allreduce_acc\[0\], (\d+), 32\)", body)
    assert masks == ["16", "8", "4", "2", "1"], masks
    assert "r < 2;" in body
    kernel = tilelang.compile(block_sum(4, 16), out_idx=[-1], target=target)
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kernel(x)), np.full(64, x.astype(np.float64).sum()), rtol=1e-5, atol=1e-5)


def test_a_block_of_partial_warps_meets_in_shared_memory(target, rng):
    """Threads (2, 4, 6): 48 threads, a warp and a half; groups of the 8 threads along x and
    y, summed. Shuffles would name the missing lanes: shared memory, said in the report."""
    if target == "cpu":
        pytest.skip("thread-level code: the CPU back end has no thread index")

    @T.prim_func
    def main(x: T.Tensor((48,), "float32"), y: T.Tensor((48,), "float32")):
        with T.Kernel(1, threads=(2, 4, 6)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tz = T.get_thread_binding(2)
            total = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda a, b: a + b, [T.Cast("float32", 0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), x[tx + ty * 2 + tz * 8], True, total[0], tx, ty,
                                                  dtype="handle"))
            y[tx + ty * 2 + tz * 8] = total[0]

    lowered = _C.lower(main.handle, SM90)
    assert "__shfl_xor_sync" not in _C.codegen(lowered, SM90)
    assert "[slower path: the block's 48 threads are not whole warps]" in lowered.lowering_report()
    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    x = rng.standard_normal(48).astype(np.float32)
    want = np.repeat(x.astype(np.float64).reshape(6, 8).sum(axis=1), 8)
    np.testing.assert_allclose(np.asarray(kernel(x)), want, rtol=1e-5, atol=1e-5)


def test_misuse_is_a_typed_error():
    with pytest.raises(TileLangTypeError, match="outside a reduce scope"):
        @T.prim_func
        def outside(y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                tx = T.get_thread_binding(0)
                r = T.alloc_local((1,), "float32")
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), 1.0, True, r[0], tx, dtype="handle"))
    with pytest.raises(TileLangTypeError, match="is not a thread index of the kernel"):
        @T.prim_func
        def not_a_thread(y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                r = T.alloc_local((1,), "float32")
                with T.attr(T.comm_reducer(lambda a, b: a + b, [0.0]), "reduce_scope", 0):
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), 1.0, True, r[0], bx, dtype="handle"))


def test_dp4a(rng):
    """T.dp4a(A[i], B[i], C[0]): C += the dot product of the four int8 from A[i] and B[i] on."""

    @T.prim_func
    def main(A: T.Tensor((64,), "int8"), B: T.Tensor((64,), "int8"), C: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as _:
            acc = T.alloc_local((1,), "int32")
            a = T.alloc_local((64,), "int8")
            b = T.alloc_local((64,), "int8")
            for i in T.serial(64):
                a[i] = A[i]
                b[i] = B[i]
            acc[0] = 5
            for k in T.serial(16):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[0] = acc[0]

    kernel = tilelang.compile(main, target="cpu")
    a = rng.integers(-128, 128, 64).astype(np.int8)
    b = rng.integers(-128, 128, 64).astype(np.int8)
    c = np.zeros(1, np.int32)
    kernel(a, b, c)
    assert c[0] == 5 + int(a.astype(np.int64) @ b.astype(np.int64))
