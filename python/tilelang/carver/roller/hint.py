"""One recommended schedule of a tile program."""
from __future__ import annotations

from dataclasses import dataclass, field

from .rasterization import NoRasterization, Rasterization


@dataclass
class Hint:
    """block: the block's output tile (rows, cols); warp: one warp's share of it; rstep:
    the reduction step per stage (block_K); pipeline_stage: stages of the copies;
    rasterization_plan: the launch order; score: the roller's estimate (higher is better)."""

    block: list = field(default_factory=list)
    warp: list = field(default_factory=list)
    rstep: list = field(default_factory=list)
    pipeline_stage: int = 1
    rasterization_plan: Rasterization = field(default_factory=NoRasterization)
    use_tc: bool = True
    score: float = 0.0

    @property
    def threads(self) -> int:
        """Threads of the block: one 32-thread warp per warp tile (upstream's count)."""
        return (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1]) * 32

    def config(self) -> dict:
        """The hint as the keyword arguments of a GEMM kernel factory."""
        return {"block_M": self.block[0], "block_N": self.block[1], "block_K": self.rstep[0],
                "num_stages": self.pipeline_stage if self.pipeline_stage > 1 else 0, "threads": self.threads,
                "enable_rasterization": not isinstance(self.rasterization_plan, NoRasterization)}
