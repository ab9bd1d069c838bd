// T.gemm's choice of instruction, shared by layout inference (which lays out the operands
// for it) and the thread-level lowering (which emits it).
#pragma once
#include "ir/stmt.h"
#include "op/thread_context.h"
#include "target/target.h"

namespace tl {

// mma.sync m16n8k16 (fp16/bf16 inputs, fp32 accumulator) on sm_80 and newer when B is a
// whole shared tile, A a whole shared tile or a 2-D fragment (not transposed), C a 2-D
// fragment, and M, N, K split into 16 x 16 x 16 pieces over the block's warps; the warp
// grid follows T.gemm's policy (Square: the most square warp tiles; FullRow: every warp
// along M; FullCol: along N). A register A operand, or full_row, forces FullRow. SIMT
// otherwise, with the reason in why_simt.
GemmInstruction choose_gemm_instruction(const TileOpNode& op, const Target& target, int64_t threads,
                                        bool full_row = false);

}  // namespace tl
