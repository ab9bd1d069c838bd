"""language/warp.py: lane, warp and warpgroup indices, warp votes and ballots, the block
barrier that counts, and warp reductions, against numpy on the GPU; on the CPU and WebGPU a
clear rejection at the line that uses them; the indices follow the kernel's thread shape."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError, TileLangUnsupportedError

from hip_emulation import EmulatedKernel, toolchain_problem
from kernels.warp import COLUMNS, warp_primitives


def check_warp_primitives(a, out, warp=32):
    dtype = a.dtype
    w = a.astype(np.float64).reshape(-1, warp)
    lanes = np.arange(a.size)
    per_thread = lambda x: np.repeat(x, warp)  # noqa: E731
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(out[:, 0], per_thread(w.sum(1)), rtol=tol, atol=tol)
    np.testing.assert_array_equal(out[:, 1], per_thread(w.max(1)).astype(dtype).astype(np.float32))
    np.testing.assert_array_equal(out[:, 2], per_thread(w.min(1)).astype(dtype).astype(np.float32))
    np.testing.assert_array_equal(out[:, 3], lanes % warp)
    np.testing.assert_array_equal(out[:, 4], lanes // warp)
    np.testing.assert_array_equal(out[:, 5], lanes // (4 * warp))
    np.testing.assert_array_equal(out[:, 6], per_thread((w > 0).sum(1)))
    np.testing.assert_array_equal(out[:, 7], per_thread((w > 2).any(1)))
    np.testing.assert_array_equal(out[:, 8], per_thread((w > -10).all(1)))
    np.testing.assert_array_equal(out[:, 9], np.full(a.size, (a > 0).sum()))


@pytest.mark.skipif(toolchain_problem() is not None, reason=str(toolchain_problem()))
@pytest.mark.parametrize("arch, warp", [("gfx1100", 32), ("gfx942", 64)])
def test_warp_primitives_through_the_hip_emulation(rng, arch, warp):
    """RDNA 3 (wave32: CUDA's lanes) and CDNA 3 (wave64: the wavefront is the warp)."""
    kernel = EmulatedKernel(warp_primitives(threads=256), arch)
    a = rng.uniform(-3, 3, 256).astype(np.float32)
    out = np.zeros((256, COLUMNS), np.float32)
    kernel(a, out)
    check_warp_primitives(a, out, warp)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_warp_primitives(target, rng, dtype):
    if target == "cpu":
        with pytest.raises(TileLangUnsupportedError, match=r"thread index \(T.get_thread_binding\) used on target cpu"):
            tilelang.compile(warp_primitives(dtype=dtype), target=target)
        return
    if target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="not supported on webgpu: the intrinsic 'warp_reduce_sum'"):
            tilelang.compile(warp_primitives(dtype=dtype), target=target)
        return
    k = tilelang.compile(warp_primitives(dtype=dtype), target=target)
    a = rng.uniform(-3, 3, 128).astype(dtype)
    out = np.zeros((128, COLUMNS), np.float32)
    k(a, out)
    check_warp_primitives(a, out)


def test_indices_over_a_two_dimensional_block():
    # threads=[16, 8]: the block-linear index is x + 16 y, as CUDA numbers the threads.
    @T.prim_func
    def lanes(Out: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=[16, 8]) as bx:
            x, y = T.get_thread_binding(0), T.get_thread_binding(1)
            Out[y, x] = T.get_lane_idx(8) * 1000 + T.get_warp_idx(8) + T.get_thread_extent(1) * 100000

    t = "cuda -arch=sm_90a"
    source = _C.codegen(_C.lower(lanes.handle, t), t)
    # lane (16 y + x) % 8 = x % 8, warp (16 y + x) / 8 = 2 y + x / 8 (simplified), 8 threads along y
    assert "Out[y * 16 + x] = tx % 8 * 1000 + ty * 2 + tx / 8 + 800000;" in source, source


def test_extents_and_election():
    @T.prim_func
    def ext(Out: T.Tensor((4,), "int32")):
        with T.Kernel(6, 5, threads=[64, 2]) as (bx, by):
            tx = T.get_thread_binding()
            if T.shuffle_elect(64):
                Out[0] = T.get_block_extent(0) * 10 + T.get_block_extent(1)
                Out[1] = T.get_thread_extents()[0] + T.get_thread_extents()[1]
                Out[2] = len(T.get_block_extents())
                Out[3] = T.get_thread_extent(2)

    t = "cuda -arch=sm_90a"
    source = _C.codegen(_C.lower(ext.handle, t), t)
    # One elected thread in each group of 64: (64 y + x) % 64 == 0, i.e. x == 0.
    for text in ("Out[0] = 65;", "Out[1] = 66;", "Out[2] = 2;", "Out[3] = 1;", "if (tx == 0) {"):
        assert text in source, (text, source)


def test_bitwise_warp_reduction_needs_an_integer():
    with pytest.raises(TileLangTypeError, match="T.warp_reduce_bitor takes an integer value, got float32"):
        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[T.get_thread_binding()] = T.warp_reduce_bitor(A[T.get_thread_binding()])


def test_float_predicate_is_a_type_error():
    with pytest.raises(TileLangTypeError, match="T.any_sync needs an integer or boolean predicate, got float32"):
        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[T.get_thread_binding()] = T.any_sync(A[T.get_thread_binding()])


def test_warps_per_group_needs_warp_size():
    with pytest.raises(TileLangTypeError, match="warps_per_group needs warp_size too"):
        @T.prim_func
        def bad(A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                A[T.get_thread_binding()] = T.get_warp_group_idx(warps_per_group=2)
