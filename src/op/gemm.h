// T.gemm's choice of instruction, shared by layout inference (which lays out the operands
// for it) and the thread-level lowering (which emits it).
#pragma once
#include "ir/stmt.h"
#include "op/thread_context.h"
#include "target/target.h"

namespace tl {

// What every instruction family's lowering reads off a T.gemm.
namespace gemm_detail {

extern const char* const kOpName;

// The two dimensions of an operand's region that the matrix occupies, in order.
struct Operand {
  const BufferRegion* region;
  int dim0, dim1;
  Expr rows() const { return region->ranges[dim0].extent; }
  Expr cols() const { return region->ranges[dim1].extent; }
};

struct GemmShape {
  Operand a, b, c;
  bool trans_a, trans_b;
  Expr m, n, k;
};

GemmShape gemm_shape(const TileOpNode& op);
// Indices of an operand for matrix element (row, col) of the operand as stored.
std::vector<Expr> operand_indices(const Operand& x, const Expr& row, const Expr& col, Span span);
// The matrix of an operand is its buffer's last two dimensions, whole.
bool whole_last_two_dims(const Operand& x);
// What keeps T.gemm's operands from any tensor-core instruction ("" when nothing): B in
// shared memory, A in shared memory or a fragment (a register A operand: 2-D, M x K), C a
// 2-D fragment, A and B whole tiles. Each instruction family adds its own conditions.
std::string operand_placement_problem(const TileOpNode& op);
// How many of `warps` warps (wavefronts) go along M when an M x N tile is split into
// piece_m x piece_n pieces over a warps_m x warps_n grid, by T.gemm's policy (0 Square:
// the squarest per-warp tile, 1 FullRow: the most along M, 2 FullCol: the most along N;
// full_row forces all along M); 0 when no grid divides the tile.
int64_t pick_warps_m(int64_t warps, int64_t m, int64_t n, int64_t piece_m, int64_t piece_n, int64_t policy,
                     bool full_row);

}  // namespace gemm_detail

// wgmma (sm_90a) when the kernel can have it: M per warpgroup a multiple of 64, the
// block's threads whole warpgroups, B in shared memory, A in shared memory or a fragment,
// 16-bit inputs into float32, 8-bit float inputs into float32 or int8 into int32 (8-bit
// operands K-major), shared operands whose rows are a multiple of 32 bytes. Otherwise
// kind stays Simt with the reason in why_not_faster.
GemmInstruction choose_wgmma(const TileOpNode& op, const Target& target, int64_t threads, bool full_row);
// The wgmma lowering (op/gemm_wgmma.cc).
Stmt lower_gemm_wgmma(const TileOpNode& op, const GemmInstruction& ins, ThreadContext& ctx);

// AMD's matrix cores on target hip (op/gemm_mfma.cc): MFMA on CDNA (gfx90a, gfx94x, gfx950),
// WMMA on RDNA 3 (gfx1100), for float16/bfloat16 (and, on MFMA, float32) inputs into
// float32 and int8 into int32,
// with B a whole shared tile, A a whole shared tile or (MFMA, 16-bit) a 2-D fragment, C a
// 2-D fragment, the block whole wavefronts and the tile split into instruction tiles over
// them by T.gemm's policy. 32 x 32 instructions where the wavefront tiles allow them (and
// `wide`), else 16 x 16. Otherwise kind stays Simt, with the reason in why_simt and, since
// the hardware has matrix cores, in why_not_faster.
GemmInstruction choose_matrix_core(const TileOpNode& op, const Target& target, int64_t threads, bool full_row,
                                   bool wide = true);
// The MFMA / WMMA lowering, and what the lowering report says about it.
Stmt lower_gemm_matrix_core(const TileOpNode& op, const GemmInstruction& ins, ThreadContext& ctx);
std::string describe_matrix_core(const TileOpNode& op, const GemmInstruction& ins);

// mma.sync m16n8k16 (fp16/bf16 inputs, fp32 accumulator) on sm_80 and newer when B is a
// whole shared tile, A a whole shared tile or a 2-D fragment (not transposed), C a 2-D
// fragment, and M, N, K split into 16 x 16 x 16 pieces over the block's warps; the warp
// grid follows T.gemm's policy (Square: the most square warp tiles; FullRow: every warp
// along M; FullCol: along N). A register A operand, or full_row, forces FullRow. SIMT
// otherwise, with the reason in why_simt.
// wgmma is tried first (choose_wgmma) unless allow_wgmma is false; why it was not taken
// lands in why_not_faster on targets that have it. On target hip: choose_matrix_core, where
// allow_wgmma = false asks for the narrower (16 x 16) instructions.
GemmInstruction choose_gemm_instruction(const TileOpNode& op, const Target& target, int64_t threads,
                                        bool full_row = false, bool allow_wgmma = true);

}  // namespace tl
