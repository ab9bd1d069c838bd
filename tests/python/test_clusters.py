"""Thread-block clusters (sm_90): T.Kernel(cluster_dims=) / T.ClusterKernel, the cluster's
rank and barrier, remote mbarrier arrivals, and TMA multicast in the TMA pipeline
(T.copy_cluster(cluster_mask=), T.tma_copy(cluster_mask=), and automatic for a tile that
every block of the cluster loads).

Without a GPU (CI): the kernels compile for sm_90a with __cluster_dims__, their machine
code shows the multicast loads (UTMALDG.*.MULTICAST), the cluster barrier (UCGABAR) and the
remote arrivals that release a stage across the cluster, the barrier check passes, and
misuse is a typed error at the line. On an H100/H200: the same kernels against numpy."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangShapeError, TileLangTypeError, TileLangUnsupportedError

from sass import sass_of
from sm90 import require_sm90

SM90 = "cuda -arch=sm_90a"


def cluster_gemm(M, N, K, block_M=128, block_N=128, block_K=64, stages=3, cluster=(2, 1, 1), mask=None,
                 dtype="float16", threads=256, swizzle=0, uneven=False):
    """C = A @ B on clusters. mask: A's tile (the same for the blocks of a row of the grid)
    multicast by T.copy_cluster with that mask; None: plain T.copy, the compiler finds the
    shared tiles. uneven: the K loop's trip count depends on bx (wrong with a mask)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads, cluster_dims=cluster) as (bx, by):
            if swizzle:
                T.use_swizzle(swizzle)
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K) - (bx if uneven else 0), num_stages=stages):
                if mask is not None:
                    T.copy_cluster(A[by * block_M, k * block_K], A_s, cluster_mask=mask)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


# (id, builder arguments, the multicast tile)
MULTICAST_CASES = [
    ("explicit_A_2x1", dict(cluster=(2, 1, 1), mask=0b11), "A_s"),
    ("auto_A_2x1", dict(cluster=(2, 1, 1)), "A_s"),
    ("auto_B_1x2", dict(cluster=(1, 2, 1)), "B_s"),
    ("auto_A_4x1", dict(cluster=4, block_N=64), "A_s"),
    # T.use_swizzle moves whole clusters: their blocks still share a row of tiles.
    ("auto_A_2x1_swizzled", dict(cluster=(2, 1, 1), swizzle=8), "A_s"),
    ("auto_B_1x2_swizzled", dict(cluster=(1, 2, 1), swizzle=4), "B_s"),
]


@pytest.mark.parametrize("name, args, tile", MULTICAST_CASES, ids=[c[0] for c in MULTICAST_CASES])
def test_multicast_sass(name, args, tile):
    """One block of each cluster loads the shared tile for all (UTMALDG...MULTICAST); the
    consumers release a stage on every block's barrier (remote SYNCS arrivals); the set-up
    and the end wait for the whole cluster (UCGABAR); nothing spills."""
    func = cluster_gemm(1024, 1024, 1024, **args)
    lowered = _C.lower(func.handle, SM90, [])
    source = _C.codegen(lowered, SM90)
    cx, cy, cz = (list(args["cluster"]) + [1, 1])[:3] if isinstance(args["cluster"], tuple) else (args["cluster"], 1, 1)
    assert f"__cluster_dims__({cx}, {cy}, {cz})" in source
    sass, usage, report = sass_of(func)
    blocks = cx * cy * cz
    assert f"multicast across the cluster of {blocks} blocks: {tile}" in report
    assert re.search(r"UTMALDG\.2D\.MULTICAST", sass)
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass
    assert len(re.findall(r"SYNCS\.ARRIVE\.TRANS64\.RED", sass)) >= blocks
    assert "HGMMA" in sass
    assert "LDL" not in sass and "STL" not in sass
    assert "barrier protocol checked" in report


@pytest.mark.parametrize("why, args, switches", [
    ("multicast within rows or columns of a 2-D cluster is not supported yet", dict(cluster=(2, 2, 1)), []),
    ("no TMA pipeline", dict(), ["tl.disable_tma_lower"]),
])
def test_cluster_without_multicast_says_why(why, args, switches):
    """A cluster kernel whose pipeline multicasts nothing says so and why, and still
    launches as clusters."""
    func = cluster_gemm(1024, 1024, 1024, **args)
    lowered = _C.lower(func.handle, SM90, switches)
    assert why in lowered.lowering_report()
    assert "no multicast in the cluster" in lowered.lowering_report()
    assert "__cluster_dims__" in _C.codegen(lowered, SM90)


def _lower(func, target=SM90, switches=()):
    return _C.lower(func.handle, target, list(switches))


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_80"])
def test_clusters_need_sm90(target):
    with pytest.raises(TileLangUnsupportedError,
                       match=r"thread-block clusters \(cluster_dims\) need CUDA sm_90 or newer; the target is "):
        _lower(cluster_gemm(256, 256, 256), target)


def test_grid_not_a_multiple_of_the_cluster():
    with pytest.raises(TileLangShapeError,
                       match=r"the grid's extent along x \(3\) is not a multiple of cluster_dims along x \(2\)"):
        _lower(cluster_gemm(256, 384, 256))


def test_cluster_along_a_missing_grid_dimension():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128, cluster_dims=(1, 2, 1)) as bx:
            A[bx * 128 + T.get_thread_binding()] = 1.0

    with pytest.raises(TileLangShapeError, match="cluster_dims has 2 blocks along y but the grid has no dimension y"):
        _lower(main)


@pytest.mark.parametrize("dims, error, message", [
    (16, TileLangUnsupportedError, r"makes clusters of 16 blocks; at most 8 are portable"),
    ((2, 4, 2), TileLangUnsupportedError, r"makes clusters of 16 blocks"),
    ("2", TileLangTypeError, r"cluster_dims must be Python ints, got '2'"),
    (0, TileLangShapeError, r"every extent must be at least 1"),
    ((1, 1, 1, 2), TileLangTypeError, r"cluster_dims takes 1 to 3 extents, got 4"),
])
def test_bad_cluster_dims(dims, error, message):
    with pytest.raises(error, match=message):
        @T.prim_func
        def main(A: T.Tensor((256,), "float32")):
            with T.Kernel(16, threads=128, cluster_dims=dims) as bx:
                A[bx] = 1.0


def test_cluster_of_one_is_no_cluster():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.ClusterKernel(2, cluster_dims=(1, 1, 1), threads=128) as bx:
            A[bx * 128 + T.get_thread_binding()] = 1.0

    assert "__cluster_dims__" not in _C.codegen(_lower(main), SM90)


def test_copy_cluster_needs_a_cluster():
    with pytest.raises(TileLangUnsupportedError,
                       match=r"T.copy_cluster\(cluster_mask=...\) multicasts to the blocks of a thread-block cluster, "
                             "and this kernel has none"):
        _lower(cluster_gemm(256, 256, 256, cluster=None, mask=0b11))


def test_mask_past_the_cluster():
    with pytest.raises(TileLangShapeError, match=r"T.copy_cluster: cluster_mask 5 names blocks past the cluster's 2"):
        _lower(cluster_gemm(256, 256, 256, mask=0b101))


@pytest.mark.parametrize("mask", [0, -1, 1 << 16, True, 1.0])
def test_mask_must_be_a_positive_int(mask):
    with pytest.raises(TileLangTypeError, match="cluster_mask must be a positive int bit mask"):
        cluster_gemm(256, 256, 256, mask=mask)


def test_multicast_needs_the_tma_pipeline():
    with pytest.raises(TileLangUnsupportedError,
                       match=r"the multicast is issued by the TMA pipeline of its T.Pipelined loop, which this loop "
                             r"cannot have: pass config tl.disable_tma_lower is set"):
        _lower(cluster_gemm(256, 256, 256, mask=0b11), switches=["tl.disable_tma_lower"])


def test_multicast_needs_the_same_trip_count_in_the_cluster():
    """Blocks release stages for each other: a loop that runs more often in one block
    than in another would hang, so a mask there is an error."""
    with pytest.raises(TileLangUnsupportedError, match="the loop's range depends on the block index along the cluster"):
        _lower(cluster_gemm(256, 256, 1024, mask=0b11, uneven=True))
    # Without a mask, the compiler does not multicast there.
    report = _lower(cluster_gemm(256, 256, 1024, uneven=True)).lowering_report()
    assert "no multicast in the cluster: the loop's range depends on the block index" in report


def test_copy_cluster_outside_a_pipeline():
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16")):
        with T.Kernel(2, threads=128, cluster_dims=2) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            T.copy_cluster(A[0, 0], A_s, cluster_mask=0b11)
            T.copy(A_s, B[bx * 128, 0])

    with pytest.raises(TileLangUnsupportedError,
                       match=r"is issued by the TMA pipeline of a T.Pipelined loop \(num_stages >= 2\), and this copy "
                             "is not one of its producers"):
        _lower(main)


def test_copy_cluster_between_blocks_is_rejected():
    with pytest.raises(TileLangUnsupportedError, match=r"copies into another block's shared memory \(dst_block"):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=128, cluster_dims=2) as bx:
                s = T.alloc_shared((64,), "float32")
                d = T.alloc_shared((64,), "float32")
                T.copy_cluster(s, d, dst_block=1)


def test_rank_needs_sm90():
    @T.prim_func
    def main(A: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=32) as bx:
            A[bx] = T.block_rank_in_cluster()

    with pytest.raises(TileLangUnsupportedError, match=r"T.block_rank_in_cluster needs CUDA sm_90 or newer"):
        _lower(main, "cpu")


# ---------------------------------------------------------------- on the GPU


@pytest.mark.parametrize("name, args, shape", [
    ("explicit_A", dict(cluster=(2, 1, 1), mask=0b11), (256, 512, 640)),
    ("auto_A", dict(cluster=(2, 1, 1)), (384, 512, 1024)),
    ("auto_B_ragged", dict(cluster=(1, 2, 1)), (200, 136, 520)),
    ("auto_A_4x1_bf16", dict(cluster=4, block_N=64, dtype="bfloat16"), (256, 512, 512)),
    ("one_iteration", dict(cluster=(2, 1, 1), mask=0b11), (256, 256, 64)),
    ("two_iterations", dict(cluster=(2, 1, 1)), (256, 256, 128)),
    ("two_stages", dict(cluster=(2, 1, 1), stages=2), (256, 512, 960)),
    ("no_multicast_2x2", dict(cluster=(2, 2, 1)), (256, 256, 256)),
    # Panels of whole clusters, the last one shorter (5 rows of tiles in panels of 4).
    ("swizzled_2x1", dict(cluster=(2, 1, 1), swizzle=4), (640, 1024, 256)),
    ("swizzled_1x2", dict(cluster=(1, 2, 1), swizzle=3), (768, 384, 256)),
    ("swizzled_2x2", dict(cluster=(2, 2, 1), swizzle=2), (768, 512, 128)),
])
def test_cluster_gemm_numerics(target, rng, name, args, shape):
    require_sm90(target)
    M, N, K = shape
    dtype = args.get("dtype", "float16")
    kernel = tilelang.compile(cluster_gemm(M, N, K, **args), out_idx=[2], target=target)
    np_dtype = np.float16 if dtype == "float16" else __import__("ml_dtypes").bfloat16
    a = rng.uniform(-1, 1, (M, K)).astype(np_dtype)
    b = rng.uniform(-1, 1, (K, N)).astype(np_dtype)
    c = np.asarray(kernel(a, b)).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 5e-3


def multicast_by_hand(M, N, block_M=128, block_N=64, mask=0b0011):
    """Upstream's demonstration: clusters of 4 along x; the blocks of `mask` receive the
    tile of the mask's first block; the others load their own."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128, cluster_dims=(4, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_N), "float16")
            bar = T.alloc_cluster_barrier([128])
            T.tma_copy(A[by * block_M, bx * block_N], A_s, barrier=bar, cluster_mask=mask)
            T.mbarrier_arrive(bar)
            T.mbarrier_wait_parity(bar, 0)
            T.copy(A_s, B[by * block_M, bx * block_N])
            T.cluster_sync()

    return main


def test_tma_copy_multicast_by_hand(target, rng):
    require_sm90(target)
    M, N = 256, 512
    kernel = tilelang.compile(multicast_by_hand(M, N), out_idx=[1], target=target)
    a = rng.uniform(-1, 1, (M, N)).astype(np.float16)
    b = np.asarray(kernel(a))
    expected = a.copy()
    for by in range(M // 128):
        for c in range(N // 64 // 4):
            leader = a[by * 128:(by + 1) * 128, c * 256:c * 256 + 64]
            expected[by * 128:(by + 1) * 128, c * 256 + 64:c * 256 + 128] = leader  # rank 1 receives rank 0's tile
    np.testing.assert_array_equal(b, expected)


def test_rank_and_remote_arrival(target):
    """Each block's rank in a 2 x 2 cluster, and a handshake: every block arrives on its
    neighbour's barrier (T.mbarrier_arrive(bar, cta_id)) and waits on its own."""
    require_sm90(target)

    @T.prim_func
    def main(R: T.Tensor((4, 8), "int32")):
        with T.Kernel(8, 4, threads=128, cluster_dims=(2, 2, 1)) as (bx, by):
            bar = T.alloc_cluster_barrier([1])
            rank = T.block_rank_in_cluster()
            if T.get_thread_binding() == 0:
                T.mbarrier_arrive(bar, (rank + 1) % 4)
            T.mbarrier_wait_parity(bar, 0)
            if T.get_thread_binding() == 0:
                R[by, bx] = rank

    kernel = tilelang.compile(main, out_idx=[0], target=target)
    r = np.asarray(kernel())
    by, bx = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(r, bx % 2 + 2 * (by % 2))
