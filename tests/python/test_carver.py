"""tilelang.carver: devices (CUDA, CDNA), MatmulTemplate's recommended GEMM tilings and their
hints, as upstream's autotuning example uses them (`with_roller`). The recommendations
come from a model without compiling: they must fit the device, be ranked, and turn into
configurations whose kernels give numpy's product."""
import numpy as np
import pytest

import tilelang
from tilelang.autotuner.limits import shared_memory_limit
from tilelang.carver.arch import CDNA, CUDA
from tilelang.carver.roller.rasterization import NoRasterization, Rasterization2DRow
from tilelang.carver.template import MatmulTemplate

H100 = CUDA("cuda -arch=sm_90a")


def hints(M, N, K, arch=H100, topk=10, in_dtype="float16"):
    return MatmulTemplate(M=M, N=N, K=K, in_dtype=in_dtype, out_dtype="float16",
                          accum_dtype="float").with_arch(arch).recommend_hints(topk=topk)


def test_devices():
    assert (H100.arch, H100.sm_count, H100.max_smem_usage, H100.warp_size) == ("sm_90a", 132, 227 * 1024, 32)
    a100 = CUDA("cuda -arch=sm_80")
    assert (a100.sm_count, a100.max_smem_usage) == (108, shared_memory_limit("cuda -arch=sm_80"))
    mi300 = CDNA("hip -arch=gfx942")
    assert (mi300.arch, mi300.sm_count, mi300.warp_size) == ("gfx942", 304, 64)


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (1024, 4096, 1024), (256, 256, 4096), (96, 200, 64)])
@pytest.mark.parametrize("arch", [H100, CUDA("cuda -arch=sm_80"), CUDA("cuda -arch=sm_86"), CDNA("hip -arch=gfx942")],
                         ids=["sm_90a", "sm_80", "sm_86", "gfx942"])
def test_hints_fit_the_device_and_are_ranked(shape, arch):
    M, N, K = shape
    hs = hints(M, N, K, arch)
    assert 0 < len(hs) <= 10
    assert [h.score for h in hs] == sorted((h.score for h in hs), reverse=True)
    for h in hs:
        bm, bn = h.block
        assert (bm + bn) * h.rstep[0] * 2 * h.pipeline_stage <= arch.max_smem_usage
        assert bm * bn // h.threads <= 128 and h.threads <= arch.max_threads_per_block
        assert bm % h.warp[0] == 0 and bn % h.warp[1] == 0 and h.pipeline_stage >= 2


def test_large_square_gemm_gets_the_tiling_measured_best():
    """8192^3 on sm_90a: 128 x 256 x 64 in 4 stages over 256 threads, the configuration the
    126-point autotune measured fastest on the H100 (benchmarks/RESULTS.md)."""
    best = hints(8192, 8192, 8192)[0]
    assert best.config() == {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 4, "threads": 256,
                             "enable_rasterization": True}
    assert isinstance(best.rasterization_plan, Rasterization2DRow)


def test_small_gemm_gets_small_tiles():
    """256 x 256: four 128 x 128 tiles would leave 128 of 132 SMs idle; 64 x 64 gives 16
    blocks, and no order of launch to plan."""
    best = hints(256, 256, 4096)[0]
    assert best.block == [64, 64] and isinstance(best.rasterization_plan, NoRasterization)


def test_eight_bit_inputs_take_longer_k_steps():
    assert all(h.rstep[0] in (64, 128) for h in hints(4096, 4096, 4096, in_dtype="float8_e4m3"))


def test_bad_use_is_refused():
    with pytest.raises(ValueError, match="M must be a positive int"):
        MatmulTemplate(M=0, N=1, K=1)
    with pytest.raises(ValueError, match=r"no device; call .with_arch"):
        MatmulTemplate(M=64, N=64, K=64).recommend_hints()
    with pytest.raises(TypeError, match="expected a device"):
        MatmulTemplate(M=64, N=64, K=64).with_arch("sm_90a")


def test_equivalent_function_and_a_hint_compute_the_product(target):
    """The template's own kernel, and the kernel of the top hint's tiling, against numpy."""
    M, N, K = 128, 128, 64
    template = MatmulTemplate(M=M, N=N, K=K, in_dtype="float16", out_dtype="float32", accum_dtype="float32")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)  # trans_B, upstream's default
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    best = template.with_arch(H100).recommend_hints(topk=1)[0].config()
    for func in (template.equivalent_function(),
                 template.equivalent_function(best["block_M"], best["block_N"], best["block_K"], best["num_stages"],
                                              best["threads"])):
        c = np.zeros((M, N), np.float32)
        tilelang.compile(func, target=target)(a, b, c)
        np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)
