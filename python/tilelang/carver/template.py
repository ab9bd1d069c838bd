"""Schedule templates (upstream's tilelang.carver.template): MatmulTemplate recommends GEMM
tilings for a device by a model of our own, without compiling anything:

    hints = MatmulTemplate(M=8192, N=8192, K=8192, in_dtype="float16",
                           accum_dtype="float").with_arch(CUDA("cuda -arch=sm_90a")).recommend_hints(topk=10)

Each candidate tiling (block tile, K step, stages, warps) must fit the device: its staged
tiles in a block's shared memory, its float32 accumulators in at most 128 registers a
thread. The fitting ones are ranked by how evenly their blocks fill the device's SMs
(whole waves), how little of the tiles lies past the problem's edge, the operand reuse of
the block tile (rows x cols / (rows + cols)), and the stages that hide copies."""
from __future__ import annotations

import math

from ..dtypes import DType
from .arch import TileDevice
from .roller.hint import Hint
from .roller.rasterization import NoRasterization, Rasterization2DRow

_MAX_ACC_REGISTERS = 128  # float32 accumulators a thread keeps (of its 255 registers)


class MatmulTemplate:
    """C[M, N] = A[M, K] @ B (B is [N, K] when trans_B, as upstream's default)."""

    def __init__(self, M=None, N=None, K=None, trans_A=False, trans_B=True, in_dtype="float16",
                 out_dtype="float16", accum_dtype="float16", with_bias=False):
        for name, value in (("M", M), ("N", N), ("K", K)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MatmulTemplate: {name} must be a positive int, got {value!r}")
        self.M, self.N, self.K = M, N, K
        self.trans_A, self.trans_B = trans_A, trans_B
        self.in_dtype, self.out_dtype = DType(in_dtype), DType(out_dtype)
        self.accum_dtype = DType(accum_dtype)
        self.with_bias = with_bias
        self.arch = None

    def with_arch(self, arch: TileDevice) -> "MatmulTemplate":
        if not isinstance(arch, TileDevice):
            raise TypeError(f"MatmulTemplate.with_arch: expected a device such as CUDA(\"cuda -arch=sm_90a\"), "
                            f"got {type(arch).__name__}")
        self.arch = arch
        return self

    def equivalent_function(self, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128):
        """The GEMM as a kernel of this language (one tiling; the hints give others)."""
        import tilelang.language as T
        M, N, K = self.M, self.N, self.K
        a_shape = (K, M) if self.trans_A else (M, K)
        b_shape = (N, K) if self.trans_B else (K, N)
        dtype, out_dtype, acc = str(self.in_dtype), str(self.out_dtype), str(self.accum_dtype)
        trans_A, trans_B = self.trans_A, self.trans_B

        @T.prim_func
        def matmul(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
                A_s = T.alloc_shared((block_K, block_M) if trans_A else (block_M, block_K), dtype)
                B_s = T.alloc_shared((block_N, block_K) if trans_B else (block_K, block_N), dtype)
                C_f = T.alloc_fragment((block_M, block_N), acc)
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    if trans_A:
                        T.copy(A[k * block_K, by * block_M], A_s)
                    else:
                        T.copy(A[by * block_M, k * block_K], A_s)
                    if trans_B:
                        T.copy(B[bx * block_N, k * block_K], B_s)
                    else:
                        T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B)
                T.copy(C_f, C[by * block_M, bx * block_N])

        return matmul

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        """Up to topk tilings that fit the device, best first (see the module's docstring)."""
        if self.arch is None:
            raise ValueError("MatmulTemplate.recommend_hints: no device; call .with_arch(CUDA(...)) first")
        in_bytes = max(1, self.in_dtype.bits // 8)
        k_steps = (32, 64) if in_bytes >= 2 else (64, 128)
        M, N, K, arch = self.M, self.N, self.K, self.arch
        scored = []
        for bm in (64, 128, 256):
            for bn in (64, 128, 256):
                if (bm > 64 and bm >= 2 * M) or (bn > 64 and bn >= 2 * N):
                    continue  # most of the tile would lie past the edge
                for threads in (128, 256):
                    warps = threads // 32  # warp tiles in 32-thread units, as upstream's hints count
                    if threads > arch.max_threads_per_block or bm * bn // threads > _MAX_ACC_REGISTERS:
                        continue
                    if threads == 256 and bm * bn < 128 * 128:
                        continue  # not enough of a tile for two warpgroups
                    warp = _warp_tile(bm, bn, warps)
                    if warp is None:
                        continue
                    for bk in k_steps:
                        if bk > max(K, k_steps[0]):
                            continue
                        stage_bytes = (bm + bn) * bk * in_bytes
                        stages = max((s for s in (2, 3, 4) if s * stage_bytes <= arch.max_smem_usage), default=0)
                        if not stages:
                            continue
                        scored.append(self._score(bm, bn, bk, stages, warp))
        scored.sort(key=lambda h: (-h.score, -h.block[0] * h.block[1], h.rstep[0]))
        return scored[:topk]

    def _score(self, bm, bn, bk, stages, warp) -> Hint:
        M, N, arch = self.M, self.N, self.arch
        tiles_m, tiles_n = math.ceil(M / bm), math.ceil(N / bn)
        tiles = tiles_m * tiles_n
        waves = math.ceil(tiles / arch.sm_count)
        fill = tiles / (waves * arch.sm_count)
        inside = (M * N) / (tiles_m * bm * tiles_n * bn)
        reuse = (bm * bn / (bm + bn)) / (256 * 256 / 512)
        score = fill * inside * math.sqrt(reuse) * (1 + 0.05 * stages) * (1 + 0.02 * (bk // 32))
        plan = Rasterization2DRow(10) if tiles > 2 * arch.sm_count and tiles_m > 1 else NoRasterization()
        return Hint(block=[bm, bn], warp=list(warp), rstep=[bk], pipeline_stage=stages, rasterization_plan=plan,
                    score=round(score, 6))


def _warp_tile(bm, bn, warps):
    """The most square split of the block tile over the warps (warp tiles of 16 x 8 or
    more), as (rows, cols) of one warp's share."""
    best = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if bm % wm or bn % wn or bm // wm < 16 or bn // wn < 8:
            continue
        shape = (bm // wm, bn // wn)
        if best is None or abs(math.log(shape[0] / shape[1])) < abs(math.log(best[0] / best[1])):
            best = shape
    return best


__all__ = ["MatmulTemplate"]
