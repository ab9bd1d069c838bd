"""T.sync_grid: a barrier of the whole grid on CUDA (a cooperative launch, all blocks resident).
Without a GPU: the kernel compiles for sm_90a, its launch is marked cooperative, and the CPU,
WebGPU and HIP targets refuse it with the reason. On a GPU: every block's value written before
the barrier is read by another block after it, over several launches in a row (the barrier's
word is ready for the next launch), and a grid larger than the device holds is a launch error."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangUnsupportedError

from sass import sass_of


def _rotate(blocks, rounds=3, threads=128):
    """Each round, block b writes its running value, the grid waits, and b reads block b+1's:
    out[b] = in[(b + rounds) % blocks] after `rounds` barriers."""

    @T.prim_func
    def main(X: T.Tensor((blocks, threads), "float32"), Y: T.Tensor((blocks, threads), "float32"),
             W: T.Tensor((blocks, threads), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            v = T.alloc_local((1,), "float32")
            t = T.get_thread_binding()
            v[0] = X[bx, t]
            for r in T.serial(rounds):
                W[bx, t] = v[0]
                T.sync_grid()
                v[0] = W[(bx + 1) % blocks, t]
                T.sync_grid()
            Y[bx, t] = v[0]

    return main


def test_compiles_with_a_cooperative_launch():
    lowered = _C.lower(_rotate(8).handle, "cuda -arch=sm_90a")
    infos = _C.cuda_kernel_infos(lowered)
    assert [i["cooperative_launch"] for i in infos] == [True]
    sass, _, _ = sass_of(_rotate(8))
    assert "ATOMG.E.ADD" in sass or "RED.E.ADD" in sass or "ATOM" in sass


def _tile_level(blocks=4):
    @T.prim_func
    def main(X: T.Tensor((blocks, 64), "float32"), Y: T.Tensor((blocks, 64), "float32")):
        with T.Kernel(blocks, threads=64) as bx:
            for i in T.Parallel(64):
                Y[bx, i] = X[bx, i]
            T.sync_grid()
            for i in T.Parallel(64):
                Y[bx, i] = Y[(bx + 1) % blocks, i]

    return main


@pytest.mark.parametrize("target, message", [
    ("cpu", "T.sync_grid is not supported on target cpu: its blocks run as tasks"),
    ("webgpu", "T.sync_grid is not supported on target webgpu: WebGPU has no cooperative dispatch"),
    ("hip -arch=gfx942", "T.sync_grid is not supported on target hip yet"),
])
def test_other_targets_refuse_it(target, message):
    with pytest.raises(TileLangUnsupportedError, match=message):
        _C.codegen(_C.lower(_tile_level().handle, target), target)


def test_grid_barrier_numerics(target, rng):
    if not target.startswith("cuda"):
        pytest.skip("T.sync_grid runs on CUDA (the other targets refuse it: test_other_targets_refuse_it)")
    if not tilelang.cuda_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    blocks, rounds = 96, 3
    kernel = tilelang.compile(_rotate(blocks, rounds), out_idx=[1], target=target)
    for _ in range(3):  # the barrier's word is ready for the next launch
        x = torch.from_numpy(rng.standard_normal((blocks, 128)).astype(np.float32)).cuda()
        w = torch.zeros_like(x)
        y = kernel(x, w).cpu().numpy()
        np.testing.assert_array_equal(y, np.roll(x.cpu().numpy(), -rounds, axis=0))
    too_many = tilelang.compile(_rotate(100000, 1), out_idx=[1], target=target)
    x = torch.zeros((100000, 128), device="cuda")
    with pytest.raises(TileLangUnsupportedError, match="calls T.sync_grid, so all its blocks must be resident"):
        too_many(x, torch.zeros_like(x))
        torch.cuda.synchronize()
