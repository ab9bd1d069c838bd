"""Warp specialisation by hand: `with T.ws(ids):` regions, as upstream's examples write it.

Without a GPU (CI): the regions lower for their own threads (a T.gemm in T.ws(1) runs on
that one warpgroup's wgmma, its fragment spread over those 128 threads), the compiler
puts no barrier between two regions (their mbarriers order them) and only named barriers
of a region's threads inside it; misuse is a typed error at the line. On an H100/H200 the
producer/consumer GEMM matches numpy."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangLayoutError, TileLangSyntaxError, TileLangUnsupportedError

from sass import sass_of
from sm90 import require_sm90

SM90 = "cuda -arch=sm_90a"


def ws_gemm(M, N, K, block_M=128, block_N=128, block_K=64, dtype="float16", registers=False):
    """Warpgroup 0 copies the tiles of A and B into shared memory, warpgroup 1 multiplies
    them; data_is_ready / compute_is_done hand the tiles back and forth."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            data_is_ready = T.alloc_barrier(arrive_count=128)
            compute_is_done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                if registers:
                    T.annotate_consumer_reg_alloc(240)
                T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                with T.ws(0):
                    if registers:
                        T.annotate_producer_reg_dealloc(24)
                    T.barrier_wait(compute_is_done, (ko + 1) % 2)
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                    T.barrier_arrive(data_is_ready)
                with T.ws(1):
                    T.barrier_wait(data_is_ready, ko % 2)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(compute_is_done)
            with T.ws(1):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def _source(func):
    return _C.codegen(_C.lower(func.handle, SM90), SM90)


def test_regions_lower_for_their_own_threads():
    sass, usage, report = sass_of(ws_gemm(1024, 1024, 1024))
    # One warpgroup's gemm: m64n128 instructions, 2 per K step of 16 (128 rows).
    assert "wgmma m64n128k16, 1 x 1 warpgroups" in report, report
    assert "HGMMA.64x128x16.F32" in sass and "LDL" not in sass and "STL" not in sass and "LOCAL:0" in usage
    source = _source(ws_gemm(1024, 1024, 1024))
    loop = source[source.index("for (int32_t ko"):]
    producer = loop[loop.index("if (tx < 128) {"):loop.index("if (tx >= 128) {")]
    consumer = loop[loop.index("if (tx >= 128) {"):]
    assert "wgmma" not in producer and "&A[" in producer and "mbarrier_arrive(&data_is_ready" in producer
    assert "&A[" not in consumer.split("tl::mbarrier_arrive(&compute_is_done")[0] and "wgmma" in consumer
    # No block-wide barrier between or around the two regions inside the loop: the mbarriers
    # order them; a region's own barriers are named barriers of its 128 threads.
    body = loop[:loop.index("\n  }\n")]
    assert "__syncthreads" not in body, body
    assert "tl::named_barrier_sync(1, 128);" in producer
    # The fragment is spread over the consumer warpgroup: its register indices are static.
    assert "C_local[t_mi * 64 + t_h * 2 + t_ni * 4 + t_e] = 0.0f;" in source


def test_register_budget_names_are_setmaxnreg():
    source = _source(ws_gemm(256, 256, 256, registers=True))
    assert "tl::set_max_nreg<240, true>();" in source and "tl::set_max_nreg<24, false>();" in source


def _misuse(kind):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:  # noqa: F841
            F = T.alloc_fragment((128,), "float32")
            if kind == "two regions":
                with T.ws(0):
                    T.copy(A[0:128], F)
                with T.ws(1):
                    T.copy(F, B[0:128])
            elif kind == "nested":
                with T.ws(0):
                    with T.ws(0):
                        T.copy(A[0:128], F)
            elif kind == "gap":
                with T.ws(0, 2):
                    T.copy(A[0:128], F)
            elif kind == "too many":
                with T.ws(2):
                    T.copy(A[0:128], F)
            else:
                with T.ws(0):
                    T.copy(A[0:128], F)
                    T.copy(F, B[0:128])

    return main


@pytest.mark.parametrize("kind, target, error, message", [
    ("two regions", SM90, TileLangLayoutError,
     "fragment 'F' is used by threads [128, 256) here and by threads [0, 128) at"),
    ("nested", SM90, TileLangSyntaxError, "T.ws blocks cannot be nested"),
    ("gap", SM90, TileLangUnsupportedError, "T.ws: warpgroups [0, 2] are not consecutive non-negative ids"),
    ("too many", SM90, TileLangUnsupportedError, "T.ws over threads [256, 384), but the block has threads=[256]"),
    ("fine", "cpu", TileLangUnsupportedError, "T.ws is not supported on target cpu"),
])
def test_misused_regions_are_typed_errors(kind, target, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        _C.lower(_misuse(kind).handle, target)


def test_outside_a_kernel_is_a_syntax_error():
    with pytest.raises(TileLangSyntaxError, match="T.ws is used outside a T.Kernel block"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.ws(0):
                A[0] = 1.0


def test_ws_gemm_numerics(target, rng):
    require_sm90(target)
    M, N, K = 512, 384, 640
    kernel = tilelang.compile(ws_gemm(M, N, K, registers=True), out_idx=[2], target=target)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.asarray(kernel(a, b)).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-2, atol=1e-2)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def ws_tma_gemm(M, N, K, block_M=128, block_N=128, block_K=64, stages=2, dtype="float16"):
    """Warpgroup 0 loads the tiles by TMA into `stages` buffers (T.tma_copy: the region's
    first thread adds the bytes to full[s] and issues the loads; all 128 threads arrive),
    warpgroup 1 multiplies; full[s] / empty[s] hand each stage over."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((stages, block_M, block_K), dtype)
            B_shared = T.alloc_shared((stages, block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            with T.ws(1):
                T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                with T.ws(0):
                    T.mbarrier_wait_parity(empty[ko % stages], (ko // stages) % 2 ^ 1)
                    T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                               A_shared[ko % stages, :, :], barrier=full[ko % stages])
                    T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                               B_shared[ko % stages, :, :], barrier=full[ko % stages])
                    T.mbarrier_arrive(full[ko % stages])
                with T.ws(1):
                    T.mbarrier_wait_parity(full[ko % stages], (ko // stages) % 2)
                    T.gemm(A_shared[ko % stages, :, :], B_shared[ko % stages, :, :], C_local)
                    T.mbarrier_arrive(empty[ko % stages])
            with T.ws(1):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def test_tma_copy_by_hand_loads_by_tma():
    sass, usage, report = sass_of(ws_tma_gemm(1024, 1024, 1024))
    assert "UTMALDG" in sass and "LDGSTS" not in sass and "HGMMA.64x128x16.F32" in sass, report
    assert "LDL" not in sass and "STL" not in sass and "LOCAL:0" in usage
    source = _source(ws_tma_gemm(1024, 1024, 1024))
    producer = source[source.index("if (tx < 128) {"):]
    issue = producer[producer.index("if (tx == 0) {"):]
    assert issue.index("tl::mbarrier_expect_tx(&full[") < issue.index("tl::tma_load(")
    assert source.count("tl::mbarrier_expect_tx(&full[ko % 2], 16384u);") == 2  # each tile's bytes
    # The TMA copies are ordered by the mbarriers alone: no barrier among the producer's threads.
    loop = source[source.index("for (int32_t ko"):]
    assert "named_barrier_sync" not in loop[:loop.index("if (tx >= 128) {")]


@pytest.mark.parametrize("source, message", [
    ("stride", "T.tma_copy: A's stride along dimension 0 is known only at run time (TMA needs multiples of 16 bytes)"),
    ("store", "T.tma_copy: a store takes no barrier, no cluster_mask and no eviction_policy"),
    ("barrier", "T.tma_copy: a load needs barrier="),
    ("cpu", "T.tma_copy is not supported on target cpu: TMA needs sm_90a"),
])
def test_tma_copy_refusals(source, message):
    K = T.dynamic("k") if source == "stride" else 64

    def build():
        @T.prim_func
        def main(A: T.Tensor((128, K), "float16"), B: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                S = T.alloc_shared((128, 64), "float16")
                full = T.alloc_barrier(128)
                if source == "store":
                    T.tma_copy(S, B[0:128, 0:64], barrier=full)
                elif source == "barrier":
                    T.tma_copy(A[0:128, 0:64], S)
                else:
                    T.tma_copy(A[0:128, 0:64], S, barrier=full)
                T.mbarrier_arrive(full)
                T.mbarrier_wait_parity(full, 0)
                T.copy(S, B[0:128, 0:64])
        return main

    escaped = message.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises((TileLangUnsupportedError, TypeError), match=escaped):
        _C.lower(build().handle, "cpu" if source == "cpu" else SM90)


@pytest.mark.parametrize("build", ["tma", "barrier_list"])
def test_ws_tma_gemm_numerics(target, rng, build):
    """By hand: TMA loads (3 stages), and upstream's barriers by index (2 stages)."""
    require_sm90(target)
    M, N, K = 256, 384, 640
    func = ws_tma_gemm(M, N, K, stages=3) if build == "tma" else ws_gemm_barrier_list(M, N, K)
    kernel = tilelang.compile(func, out_idx=[2], target=target)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.asarray(kernel(a, b)).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-2, atol=1e-2)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def ws_gemm_barrier_list(M, N, K, block_M=128, block_N=128, block_K=64, stages=2, dtype="float16"):
    """Upstream's barriers by index: T.create_list_of_mbarrier, then ints (and integer
    kernel values) where a barrier is expected; the first `stages` are "full", the next
    "empty"; the producer copies with plain stores (all 128 threads arrive)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((stages, block_M, block_K), dtype)
            B_shared = T.alloc_shared((stages, block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.create_list_of_mbarrier([128, 128] * stages)
            with T.ws(0):
                T.clear(C_local)
            for ko in range(T.ceildiv(K, block_K)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=ko % stages + stages, parity=((ko // stages) % stages) ^ 1)
                    T.copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                           A_shared[ko % stages, :, :])
                    T.copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                           B_shared[ko % stages, :, :])
                    T.mbarrier_arrive(mbarrier=ko % stages)
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=ko % stages, parity=(ko // stages) % stages)
                    T.gemm(A_shared[ko % stages, :, :], B_shared[ko % stages, :, :], C_local)
                    T.mbarrier_arrive(mbarrier=T.get_mbarrier(ko % stages + stages))
            with T.ws(0):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def test_barriers_by_index():
    sass, usage, _ = sass_of(ws_gemm_barrier_list(512, 512, 512))
    assert "HGMMA.64x128x16.F32" in sass and "LOCAL:0" in usage
    source = _source(ws_gemm_barrier_list(512, 512, 512))
    assert source.count("tl::mbarrier_init(") == 4
    assert "tl::mbarrier_wait(&mbarrier[ko % 2 + 2], (uint32_t)((ko / 2 % 2) ^ 1));" in source, source
    assert "tl::mbarrier_arrive(&mbarrier[ko % 2]);" in source and "tl::mbarrier_arrive(&mbarrier[ko % 2 + 2]);" in source


def test_barrier_index_without_a_list_is_a_name_error():
    from tilelang.errors import TileLangNameError
    with pytest.raises(TileLangNameError, match="T.get_mbarrier\\(0\\): the kernel has no T.create_list_of_mbarrier"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                T.mbarrier_arrive(mbarrier=0)


def test_no_set_max_nreg_keeps_the_launch_budgets():
    import sys
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.gemm import matmul

    def kernel(keep):
        base = matmul(512, 512, 512, 128, 256, 64, in_dtype="bfloat16", num_stages=3, threads=256)
        if not keep:
            return base

        @T.prim_func
        def main(A: T.Tensor((512, 512), "bfloat16"), B: T.Tensor((512, 512), "bfloat16"),
                 C: T.Tensor((512, 512), "float32")):
            with T.Kernel(2, 4, threads=256) as (bx, by):
                T.no_set_max_nreg()
                A_s = T.alloc_shared((128, 64), "bfloat16")
                B_s = T.alloc_shared((64, 256), "bfloat16")
                acc = T.alloc_fragment((128, 256), "float32")
                T.clear(acc)
                for k in T.Pipelined(8, num_stages=3):
                    T.copy(A[by * 128, k * 64], A_s)
                    T.copy(B[k * 64, bx * 256], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[by * 128, bx * 256])
        return main

    assert "tl::set_max_nreg<" in _source(kernel(False))
    lowered = _C.lower(kernel(True).handle, SM90)
    assert "tl::set_max_nreg<" not in _C.codegen(lowered, SM90)
    assert "registers as launched, T.no_set_max_nreg" in lowered.lowering_report()


@pytest.mark.parametrize("dims, clustered", [(1, False), ((1, 1, 1), False), (2, True), ((2, 1, 1), True)])
def test_cluster_dims(dims, clustered):
    """cluster_dims=1 launches no cluster; 2 launches clusters of two blocks (test_clusters.py
    covers clusters)."""
    def build():
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(2, threads=128, cluster_dims=dims) as bx:  # noqa: F841
                for i in T.Parallel(128):
                    A[i] = 1.0
        return main

    source = _C.codegen(_C.lower(build().handle, SM90), SM90)
    assert ("__cluster_dims__(2, 1, 1)" in source) == clustered


def tma_store_by_hand(M, N, block_M=64, block_N=64, dtype="float16"):
    """B = 2 A: each block doubles its tile in shared memory and stores it by T.tma_copy,
    then waits for the store (T.tma_store_wait) before the block ends."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            S = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], S)
            for i, j in T.Parallel(block_M, block_N):
                S[i, j] = S[i, j] * 2
            T.tma_copy(S, B[by * block_M, bx * block_N])
            T.tma_store_arrive()
            T.tma_store_wait(0, read=False)

    return main


def test_tma_copy_store_sass():
    """The store is issued by one thread and committed, its wait is the program's own
    (UTMASTG, then the bulk wait the program asked for, without .read)."""
    sass, usage, report = sass_of(tma_store_by_hand(256, 256))
    assert "UTMASTG.2D" in sass and "LDL" not in sass
    assert "by TMA store (cp.async.bulk.tensor" in report
    source = _C.codegen(_C.lower(tma_store_by_hand(256, 256).handle, SM90), SM90)
    assert source.count("tl::tma_store_wait<0>()") == 1 and "tma_store_wait_read" not in source


def test_tma_copy_store_that_tma_cannot_take():
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16")):
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((64, 8), "float16")
            T.copy(A[bx * 64, 0], S)
            T.tma_copy(S, B[bx * 64, 0])

    with pytest.raises(TileLangUnsupportedError, match="T.tma_copy: a TMA box needs at most 256 rows of a multiple "
                                                       "of 32 bytes"):
        _C.lower(main.handle, SM90)
    with pytest.raises(TileLangUnsupportedError, match="T.tma_copy: TMA needs sm_90a"):
        _C.lower(main.handle, "cuda -arch=sm_80")


def test_tma_copy_store_numerics(target, rng):
    require_sm90(target)
    M, N = 192, 320
    kernel = tilelang.compile(tma_store_by_hand(M, N), out_idx=[1], target=target)
    a = rng.uniform(-1, 1, (M, N)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a * np.float16(2))
