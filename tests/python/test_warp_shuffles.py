"""Upstream's warp shuffles in thread-level code: T.shfl_xor / shfl_down / shfl_up /
shfl_sync and TVM's T.tvm_warp_shuffle(_down/_up). The whole warp takes part (CUDA's
*_sync with the full mask, HIP's __shfl*); on cpu and webgpu (no fixed warp) a typed
refusal at the call's line. Numerics against numpy on a GPU and through the HIP host
emulation (tests/python/hip_emulation), the CUDA source through NVRTC."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError, TileLangUnsupportedError

from hip_emulation import EmulatedKernel, toolchain_problem
from sass import nvrtc_reason
from tilelang.jit.kernel import _include_dir

SM90 = "cuda -arch=sm_90a"


def shuffles(threads=64):
    """Out[k, t] = what lane t of each warp of 32 receives from the k-th shuffle of X[t]."""

    @T.prim_func
    def main(X: T.Tensor((threads,), "float32"), Out: T.Tensor((6, threads), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding(0)
            v = T.alloc_local((1,), "float32")
            v[0] = X[tx]
            Out[0, tx] = T.shfl_xor(v[0], 5)
            Out[1, tx] = T.shfl_down(v[0], 3)
            Out[2, tx] = T.shfl_up(v[0], 2)
            Out[3, tx] = T.shfl_sync(v[0], 7)  # upstream's order: value, source lane, width, mask
            Out[4, tx] = T.tvm_warp_shuffle(0xFFFFFFFF, v[0], tx + 1, 8, 32)
            Out[5, tx] = T.tvm_warp_shuffle_down(0xFFFFFFFF, v[0], 1, 16, 32)

    return main


def expected(x):
    n = len(x)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    out = np.empty((6, n))
    out[0] = x[base + (lane ^ 5)]
    out[1] = np.where(lane + 3 < 32, x[np.minimum(np.arange(n) + 3, n - 1)], x)
    out[2] = np.where(lane >= 2, x[np.maximum(np.arange(n) - 2, 0)], x)
    out[3] = x[base + 7]
    group8 = np.arange(n) - np.arange(n) % 8
    out[4] = x[group8 + (np.arange(n) + 1) % 8]
    in16 = np.arange(n) % 16
    out[5] = np.where(in16 + 1 < 16, x[np.minimum(np.arange(n) + 1, n - 1)], x)
    return out


def test_cuda_source_names_the_whole_warp():
    source = _C.codegen(_C.lower(shuffles().handle, SM90), SM90)
    for call in (r"tl::shfl_xor\(v\[0\], 5, 32\)", r"tl::shfl_down\(v\[0\], 3, 32\)",
                 r"tl::shfl_up\(v\[0\], 2, 32\)", r"tl::shfl\(v\[0\], 7, 32\)", r"tl::shfl\(v\[0\], tx\w* \+ 1, 8\)",
                 r"tl::shfl_down\(v\[0\], 1, 16\)"):
        assert re.search(call, source), (call, source)
    if nvrtc_reason() is None:  # and the source compiles
        assert _C.nvrtc_compile(source, "kernel.cu", "sm_90a", [_include_dir()], False)


def test_shuffles_numerics(target, rng):
    if target.split()[0] != "cuda":
        pytest.skip("warp shuffles run on CUDA and HIP targets (HIP: the emulation test below)")
    kernel = tilelang.compile(shuffles(), out_idx=[-1], target=target)
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(x)), expected(x).astype(np.float32))


@pytest.mark.skipif(toolchain_problem() is not None, reason=str(toolchain_problem()))
def test_shuffles_through_the_hip_emulation(rng):
    """gfx1100 (wave32): the same lanes as a CUDA warp."""
    kernel = EmulatedKernel(shuffles(), "gfx1100")
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full((6, 64), np.nan, np.float32)
    kernel(x, out)
    np.testing.assert_array_equal(out, expected(x).astype(np.float32))


@pytest.mark.parametrize("target_name", ["cpu", "webgpu"])
def test_targets_without_a_fixed_warp_refuse_them(target_name):
    @T.prim_func
    def main(X: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(32):
                X[i] = T.shfl_xor(X[i], 1)

    with pytest.raises(TileLangUnsupportedError, match=r"shfl_xor \(a warp shuffle") as info:
        _C.codegen(_C.lower(main.handle, target_name), target_name)
    assert "test_warp_shuffles.py" in str(info.value)


def test_bad_arguments_are_typed_errors():
    with pytest.raises(TileLangUnsupportedError, match="only the whole warp's mask 0xffffffff"):
        @T.prim_func
        def partial(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                X[0] = T.shfl_sync(X[0], 1, mask=0xFFFF)
    with pytest.raises(TileLangTypeError, match="T.shfl_sync: the value must be a typed expression"):
        @T.prim_func
        def mask_first(X: T.Tensor((32,), "float32")):  # CUDA's order, not upstream's
            with T.Kernel(1, threads=32) as _:
                X[0] = T.shfl_sync(0xFFFFFFFF, X[0], 1)
    with pytest.raises(TileLangTypeError, match="the width must be a constant power of two"):
        @T.prim_func
        def odd_width(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                X[0] = T.tvm_warp_shuffle(0xFFFFFFFF, X[0], 1, 12, 32)
