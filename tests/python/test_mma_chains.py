"""mma.sync T.gemm with few accumulator tiles a warp and a long K (decode's 16-row tiles split
by columns): the K steps go round several sets of accumulators so that independent mma
chains overlap, the sets added into the fragment at the end; tl.disable_mma_chains keeps
one chain an accumulator.

Without a GPU: the lowering report says how many sets, and the machine code has that many
independent HMMA accumulators. On an sm_80+ GPU: the products against numpy, the
fragment's earlier contents kept (accumulation over several T.gemm calls), with and
without the switch, for 1, 2 and 4 tiles a warp."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

from sass import sass_of

SWITCH = "tl.disable_mma_chains"


def _rows_gemm(N, block_K, threads=128, steps=2):
    """C [16, N] = A [16, steps * block_K] @ B: a 16-row tile over `threads / 32` warps side by
    side (FullCol), accumulated over `steps` K blocks."""

    @T.prim_func
    def main(A: T.Tensor((16, steps * block_K), "float16"), B: T.Tensor((steps * block_K, N), "float16"),
             C: T.Tensor((16, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((16, block_K), "float16")
            B_s = T.alloc_shared((block_K, N), "float16")
            C_f = T.alloc_fragment((16, N), "float32")
            T.clear(C_f)
            for k in T.serial(steps):
                T.copy(A[0, k * block_K], A_s)
                T.copy(B[k * block_K, 0], B_s)
                T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullCol)
            T.copy(C_f, C)

    return main


# (N, block_K, accumulator sets expected): 4 warps over N columns, 8 columns a tile.
CASES = [(32, 256, 4), (64, 256, 2), (64, 64, 1), (128, 512, 1)]


def _report(func, switches=()):
    return _C.lower(func.handle, "cuda -arch=sm_90a", list(switches)).lowering_report()


@pytest.mark.parametrize("N, block_K, sets", CASES)
def test_report_names_the_accumulator_sets(N, block_K, sets):
    """1 tile a warp: 4 sets; 2 tiles: 2; K too short (4 steps) or 4 tiles a warp: none."""
    report = _report(_rows_gemm(N, block_K))
    line = [x for x in report.splitlines() if "mma.sync" in x]
    assert len(line) == 1, report
    if sets > 1:
        assert f"K steps over {sets} sets of accumulators" in line[0]
    else:
        assert "sets of accumulators" not in line[0]
    assert "sets of accumulators" not in _report(_rows_gemm(N, block_K), [SWITCH])


def _longest_hmma_chain(sass):
    """The most HMMA instructions in a row each adding to the accumulator the one before
    wrote (in program order; RZ starts a chain)."""
    depth, longest = {}, 0
    for d, c in re.findall(r"HMMA\.16816\.F32 (R\d+), R\d+(?:\.reuse)?, R\d+(?:\.reuse)?, (R\w+)", sass):
        depth[d] = depth.get(c, 0) + 1
        longest = max(longest, depth[d])
    return longest


@pytest.mark.parametrize("switches, longest", [((), 4), ((SWITCH,), 16)])
def test_machine_code_has_independent_chains(switches, longest):
    """The 1-tile-a-warp gemm's 16 K steps (one K block: the SASS loops over the two): chains
    of 4 dependent HMMA instructions in four sets, or one chain of 16."""
    sass, _, _ = sass_of(_rows_gemm(32, 256), switches)
    assert sass.count("HMMA.16816.F32") == 16
    assert _longest_hmma_chain(sass) == longest


@pytest.mark.parametrize("N, block_K, sets", CASES)
@pytest.mark.parametrize("switched", [False, True], ids=["chains", "one-chain"])
def test_products_match_numpy(target, rng, N, block_K, sets, switched):
    if not target.startswith("cuda"):
        pytest.skip("mma.sync is a CUDA instruction; other targets compute this gemm otherwise")
    if not tilelang.cuda_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    kernel = tilelang.compile(_rows_gemm(N, block_K), out_idx=[2], target=target,
                              pass_configs={SWITCH: True} if switched else {})
    a = rng.standard_normal((16, 2 * block_K)).astype(np.float16)
    b = rng.standard_normal((2 * block_K, N)).astype(np.float16)
    c = kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-2)
