"""Warp specialisation as upstream's hand-written kernels spell it: `if tx < 128: ...
elif tx < 256: ... else: ...` over whole warpgroups is a region of those threads (as
T.ws), a tile operation under any other branch on the thread index is refused at its line,
and `with T.attr(..., "async_scope", 1):` issues the global -> shared copies inside as
cp.async, awaited through T.cp_async_barrier_noinc. Numerics on webgpu (lavapipe) and, on
an H100/H200, on cuda; the CUDA lowering is read without a GPU."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangSyntaxError, TileLangUnsupportedError

SM90 = "cuda -arch=sm_90a"


def _source(func, target=SM90):
    return _C.codegen(_C.lower(func.handle, target), target)


def _needs_threads(target):
    if target == "cpu":
        pytest.skip("the CPU target runs a block as one thread: it has no thread index to branch on")


def split_by_warpgroups(form, n=1024):
    """Warpgroup 0 doubles A[:n] through a fragment (n elements over its 128 threads);
    warpgroup 1 adds one to the next 128 elements, element by element."""

    @T.prim_func
    def main(A: T.Tensor((n + 128,), "float32"), B: T.Tensor((n + 128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            F = T.alloc_fragment((n,), "float32")
            if form == "else":
                if tx < 128:
                    T.copy(A[0:n], F)
                    for i in T.Parallel(n):
                        F[i] = F[i] * 2.0
                    T.copy(F, B[0:n])
                else:
                    B[n - 128 + tx] = A[n - 128 + tx] + 1.0
            elif form == "elif":
                if tx >= 128:
                    B[n - 128 + tx] = A[n - 128 + tx] + 1.0
                elif tx < 128:
                    T.copy(A[0:n], F)
                    for i in T.Parallel(n):
                        F[i] = F[i] * 2.0
                    T.copy(F, B[0:n])
            else:  # a range written as a conjunction, constant first
                if 0 <= tx and 128 > tx:
                    T.copy(A[0:n], F)
                    for i in T.Parallel(n):
                        F[i] = F[i] * 2.0
                    T.copy(F, B[0:n])
                if tx >= 128 and tx < 256:
                    B[n - 128 + tx] = A[n - 128 + tx] + 1.0

    return main


@pytest.mark.parametrize("form", ["else", "elif", "and"])
def test_branch_over_whole_warpgroups_is_a_region(target, form):
    """The fragment is spread over the 128 threads that take the branch (it was spread over
    all 256, so warpgroup 1's share was never computed: wrong on webgpu, no error)."""
    _needs_threads(target)
    a = np.random.default_rng(3).standard_normal(1152).astype(np.float32)
    b = np.zeros(1152, np.float32)
    tilelang.compile(split_by_warpgroups(form), target=target)(a, b)
    np.testing.assert_array_equal(b, np.concatenate([a[:1024] * 2, a[1024:] + 1]))


def test_branch_region_in_the_cuda_source():
    source = _source(split_by_warpgroups("else"))
    first = source[source.index("if (tx < 128) {"):source.index("if (tx >= 128) {")]
    # 1024 elements over 128 threads: 8 each, in two vectors of 4.
    assert re.search(r"float F\[8\];", source), source
    assert "A[" in first and "B[" in first


def reduce_in_a_branch(threads=256):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), S: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            X = T.alloc_shared((64, 64), "float32")
            F = T.alloc_fragment((64, 64), "float32")
            s = T.alloc_fragment((64,), "float32")
            if tx >= 128:
                T.copy(A, X)
                T.copy(X, F)
                T.reduce_sum(F, s, dim=1)
                T.copy(s, S)

    return main


def test_barriers_in_a_branch_region_are_its_own():
    """A region's barriers (shared tile written, then read) are named barriers of its 128
    threads on cuda: a __syncthreads there would wait for threads that never come."""
    source = _source(reduce_in_a_branch())
    region = source[source.index("if (tx >= 128) {"):]
    assert "__syncthreads" not in region and "tl::named_barrier_sync(2, 128);" in region, region


def test_barriers_in_a_branch_region_are_refused_on_webgpu():
    with pytest.raises(TileLangUnsupportedError,
                       match=r"a barrier among the threads \[128, 256\) of this region .* not supported on target "
                             r"webgpu"):
        _C.lower(reduce_in_a_branch().handle, "webgpu")


def partial_branch(kind):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            F = T.alloc_fragment((128,), "float32")
            if kind == "half":
                if tx < 64:
                    T.copy(A, F)
                    T.copy(F, B)
            elif kind == "parallel":
                if tx % 2 == 0:
                    for i in T.Parallel(128):
                        B[i] = A[i]
            else:  # plain per-thread code under a branch: fine anywhere
                if tx < 64:
                    B[tx] = A[tx] * 3.0

    return main


@pytest.mark.parametrize("kind, line", [("half", "T.copy(A, F)"), ("parallel", "for i in T.Parallel(128):")])
def test_tile_work_under_a_partial_branch_is_refused(kind, line):
    """A tile operation under `if tx < 64` (half a warpgroup) was lowered for all 128
    threads, and the 64 that skip the branch never did their share."""
    for target in (SM90, "webgpu"):
        with pytest.raises(TileLangUnsupportedError,
                           match=r"this tile operation is under a branch on the thread index \(line \d+\) that only "
                                 r"some of the block's threads take") as info:
            _C.lower(partial_branch(kind).handle, target)
        assert line in str(info.value)


def test_per_thread_code_under_a_partial_branch_still_runs(target):
    _needs_threads(target)
    a = np.random.default_rng(4).standard_normal(128).astype(np.float32)
    b = np.zeros(128, np.float32)
    tilelang.compile(partial_branch("plain"), target=target)(a, b)
    np.testing.assert_array_equal(b, np.concatenate([a[:64] * 3, np.zeros(64, np.float32)]))


# ------------------------------------------------------------------ T.attr async_scope
def async_producer(guarded=False, dtype="float16"):
    """Warpgroup 1 copies rows of KV (rows picked by Idx when guarded) into a shared tile
    with cp.async and arrives on `ready` as they land; warpgroup 0 waits and multiplies."""

    @T.prim_func
    def main(KV: T.Tensor((256, 64), dtype), Idx: T.Tensor((64,), "int32"), Q: T.Tensor((64, 64), dtype),
             O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            K_shared = T.alloc_shared((64, 64), dtype)
            Q_shared = T.alloc_shared((64, 64), dtype)
            acc = T.alloc_fragment((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            if tx < 128:
                T.copy(Q, Q_shared)
                T.clear(acc)
                T.barrier_wait(ready[0], 0)
                T.gemm(Q_shared, K_shared, acc, transpose_B=True)
                T.copy(acc, O)
            else:
                for r in T.serial(4):
                    row = r * 16 + (tx - 128) // 8
                    src = Idx[row] if guarded else row
                    with T.attr("default", "async_scope", 1):
                        for v in T.vectorized(8):
                            K_shared[row, (tx - 128) % 8 * 8 + v] = KV[src, (tx - 128) % 8 * 8 + v]
                T.cp_async_barrier_noinc(ready[0])

    return main


def test_async_scope_copies_are_cp_async_awaited_by_the_barrier():
    source = _source(async_producer())
    consumer = source[source.index("if (tx < 128) {"):source.index("if (tx >= 128) {")]
    producer = source[source.index("if (tx >= 128) {"):]
    assert re.search(r"tl::cp_async<16>\(&K_shared\[.*\], &KV\[", producer), producer
    assert "tl::cp_async_mbarrier_arrive_noinc(&ready[0]);" in producer
    # The copies landed through the generic proxy; the consumer fences before wgmma reads.
    wait = consumer.index("tl::mbarrier_wait(&ready[0]")
    assert consumer.index("tl::fence_proxy_async();", wait) < consumer.index("wgmma", wait), consumer


def test_async_scope_copy_at_a_run_time_row_zero_fills_outside_the_tensor():
    source = _source(async_producer(guarded=True))
    assert re.search(r"tl::cp_async_zfill<16>\(&K_shared\[.*\], &KV\[.*\], .*< 256\);", source), source


def test_async_scope_sass_has_the_async_copies_and_arrival():
    from sass import sass_of
    sass, _, _ = sass_of(async_producer())
    assert "LDGSTS.E.BYPASS.128" in sass and "ARRIVES.LDGSTSBAR.64" in sass, sass


def test_async_scope_on_a_gpu(target):
    """KV rows gathered by Idx through cp.async, multiplied by the waiting warpgroup."""
    from sm90 import require_sm90
    require_sm90(target)
    import torch
    rng = np.random.default_rng(5)
    kv = torch.tensor(rng.standard_normal((256, 64)), dtype=torch.float16, device="cuda")
    idx = torch.tensor(rng.permutation(256)[:64], dtype=torch.int32, device="cuda")
    q = torch.tensor(rng.standard_normal((64, 64)), dtype=torch.float16, device="cuda")
    o = torch.zeros((64, 64), dtype=torch.float32, device="cuda")
    tilelang.compile(async_producer(guarded=True), target=target)(kv, idx, q, o)
    ref = q.float() @ kv[idx.long()].float().T
    torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)


def bad_async_scope(kind):
    @T.prim_func
    def main(KV: T.Tensor((64, 64), "float16"), S: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            K_shared = T.alloc_shared((64, 64), "float16")
            if kind == "key":
                with T.attr("default", "pragma_unroll", 1):
                    K_shared[0, tx] = KV[0, tx]
            elif kind == "scalar":
                with T.attr("default", "async_scope", 1):
                    K_shared[0, tx % 64] = KV[0, tx % 64]
            elif kind == "two bytes":
                with T.attr("default", "async_scope", 1):
                    for v in T.vectorized(1):
                        K_shared[tx // 2, tx % 2 + v] = KV[tx // 2, tx % 2 + v]
            elif kind == "stride":
                with T.attr("default", "async_scope", 1):
                    for v in T.vectorized(8):
                        K_shared[tx // 8 + v, tx % 8 * 8] = KV[tx // 8 + v, tx % 8 * 8]
            else:  # "not a copy"
                with T.attr("default", "async_scope", 1):
                    for v in T.vectorized(8):
                        K_shared[tx // 8, tx % 8 * 8 + v] = KV[tx // 8, tx % 8 * 8 + v] * 2.0
            T.copy(K_shared, S)

    return main


@pytest.mark.parametrize("kind, error, message", [
    ("key", TileLangUnsupportedError, "T.attr: the attribute 'pragma_unroll' has no meaning here"),
    ("scalar", TileLangUnsupportedError, "a store into the shared tile 'K_shared' is a copy of one 4-, 8- or 16-byte"),
    ("two bytes", TileLangUnsupportedError, "a vectorized copy moves 4, 8 or 16 bytes per thread .*this one moves 2"),
    ("stride", TileLangUnsupportedError, "steps through consecutive elements of the last dimension"),
    ("not a copy", TileLangUnsupportedError, "a T.vectorized loop holds only element copies from a global tensor"),
])
def test_async_scope_misuse_is_refused_at_its_line(kind, error, message):
    with pytest.raises(error, match=message) as info:
        _C.lower(bad_async_scope(kind).handle, SM90)
    assert "test_thread_branches.py:" in str(info.value)


def test_attr_outside_a_kernel_is_a_syntax_error():
    with pytest.raises(TileLangSyntaxError, match="T.attr is used outside a T.Kernel block"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.attr("default", "async_scope", 1):
                A[0] = 1.0


# ------------------------------------------------------------------ shared memory of regions
def regions_with_scratch():
    """Each region uses a scratch tile of its own, one after the other in program order;
    the regions run at the same time, so the tiles must not share bytes."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            X = T.alloc_shared((64, 64), "float16")
            Y = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(arrive_count=128)
            if tx < 128:
                T.copy(A[0:64, :], X)
                T.copy(X, B[0:64, :])
            else:
                T.copy(A[64:128, :], Y)
                T.copy(Y, B[64:128, :])
                T.barrier_arrive(bar[0])

    return main


def test_regions_do_not_share_shared_memory():
    source = _source(regions_with_scratch())
    offsets = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"\* (X|Y|bar) = reinterpret_cast<[^>]*>\(tl_dyn_smem \+ (\d+)\);", source)}
    assert set(offsets) == {"X", "Y", "bar"}, source
    x, y, bar = offsets["X"], offsets["Y"], offsets["bar"]
    assert abs(x - y) >= 64 * 64 * 2 and not (x <= bar < x + 8192) and not (y <= bar < y + 8192), offsets


# ------------------------------------------------------------------ tx = T.thread_binding(...)
def launch_thread_name(threads_named=128):
    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            tx = T.thread_binding(0, threads_named, thread="threadIdx.x")
            B[bx * 128 + tx] = A[bx * 128 + tx] + tx

    return main


def test_thread_binding_assigned_names_the_thread_index(target):
    """TVM script's launch-thread spelling (upstream's fp8 lightning indexer writes it):
    it was "a value of Python type 'LoopSpec' cannot be used in a kernel expression"."""
    _needs_threads(target)
    a = np.random.default_rng(6).standard_normal(512).astype(np.float32)
    b = np.zeros(512, np.float32)
    tilelang.compile(launch_thread_name(), target=target)(a, b)
    np.testing.assert_array_equal(b, a + np.tile(np.arange(128, dtype=np.float32), 4))


def test_thread_binding_assigned_over_part_of_the_axis_is_refused():
    with pytest.raises(TileLangUnsupportedError,
                       match=r"T.thread_binding over \[0, 0 \+ 64\) on threadIdx.x, but the kernel has 128 thread"):
        launch_thread_name(64)


# ------------------------------------------------------------------ registers of regions
def accumulators_in_regions(third_in_region0):
    """Two 64 x 256 float32 fragments over one warpgroup each (128 floats a thread); a third
    in warpgroup 0 when asked."""

    @T.prim_func
    def main(A: T.Tensor((64, 256), "float32"), B: T.Tensor((64, 256), "float32"),
             C: T.Tensor((64, 256), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            F0 = T.alloc_fragment((64, 256), "float32")
            F1 = T.alloc_fragment((64, 256), "float32")
            F2 = T.alloc_fragment((64, 256), "float32")
            if tx < 128:
                T.copy(A, F0)
                if third_in_region0:
                    T.copy(A, F2)
                    for i, j in T.Parallel(64, 256):
                        F0[i, j] += F2[i, j]
                T.copy(F0, B)
            else:
                T.copy(A, F1)
                T.copy(F1, C)

    return main


def test_regions_hold_only_their_own_arrays():
    """A thread of warpgroup 0 never holds warpgroup 1's fragment: 512 bytes each, not the
    1024 of both (which would be reported as spilling past 255 registers)."""
    report = _C.lower(accumulators_in_regions(False).handle, SM90).lowering_report()
    assert "each thread holds" not in report, report
    report = _C.lower(accumulators_in_regions(True).handle, SM90).lowering_report()
    assert "each thread holds 1024 bytes of arrays [slower path: more than the 255 registers" in report, report


def test_tile_work_under_a_branch_on_a_value_of_the_thread_index_is_refused():
    """`lane = tx % 32; if lane < 16:` and a 2-D block's `if ty == 0:` take part of the
    block too."""

    @T.prim_func
    def by_lane(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            lane = tx % 32
            if lane < 16:
                T.copy(A, B)

    @T.prim_func
    def by_y(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=(64, 2)):
            ty = T.get_thread_binding(1)
            if ty == 0:
                T.copy(A, B)

    for func in (by_lane, by_y):
        with pytest.raises(TileLangUnsupportedError, match="this tile operation is under a branch on the thread index"):
            _C.lower(func.handle, SM90)


def region_with_a_uniform_test():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"), on: T.int32):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            F = T.alloc_fragment((1024,), "float32")
            if tx < 128 and on > 0:
                T.copy(A, F)
                for i in T.Parallel(1024):
                    F[i] = F[i] * 2.0
                T.copy(F, B)

    return main


@pytest.mark.parametrize("on", [1, 0])
def test_region_with_a_test_that_is_not_on_the_thread_index(target, on):
    """`if tx < 128 and on > 0:`: the region of warpgroup 0, which then tests `on`."""
    _needs_threads(target)
    a = np.random.default_rng(7).standard_normal(1024).astype(np.float32)
    b = np.zeros(1024, np.float32)
    tilelang.compile(region_with_a_uniform_test(), target=target)(a, b, on)
    np.testing.assert_array_equal(b, a * 2 if on else np.zeros(1024, np.float32))


def test_async_scope_copy_into_a_tile_with_a_layout_by_hand():
    """A shared tile stored transposed by hand keeps no 8 elements together: the gathered
    row's copy becomes element copies, zero where the row lies outside the tensor."""

    @T.prim_func
    def main(KV: T.Tensor((256, 64), "float16"), Idx: T.Tensor((64,), "int32"), O: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            K_shared = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({K_shared: T.Layout((64, 64), lambda i, j: [j, i])})
            for r in T.serial(8):
                row = r * 8 + tx // 16
                with T.attr("default", "async_scope", 1):
                    for v in T.vectorized(4):
                        K_shared[row, tx % 16 * 4 + v] = KV[Idx[row], tx % 16 * 4 + v]
            T.sync_threads()
            for i, j in T.Parallel(64, 64):
                O[i, j] = K_shared[i, j]

    lowered = _C.lower(main.handle, SM90)
    source = _C.codegen(lowered, SM90)
    assert "cp_async" not in source and "K_shared[" in source, source
    assert "8-byte cp.async copies" in lowered.lowering_report()
