// Thread-value layouts of warp-level tensor-core instructions, as the PTX ISA documents them.
//
// mma.sync.aligned.m16n8k16.row.col with .f16 / .bf16 inputs and an .f32 accumulator, with
//   groupID = laneid >> 2, threadID_in_group = laneid % 4:
//   A (16 x 16, M x K), a0..a7:  row = groupID + 8 * ((i >> 1) & 1)
//                                col = threadID_in_group * 2 + (i & 1) + 8 * (i >> 2)
//   B (16 x 8,  K x N), b0..b3:  row = threadID_in_group * 2 + (i & 1) + 8 * (i >> 1)
//                                col = groupID
//   C/D (16 x 8, M x N), c0..c3: row = groupID + 8 * (i >> 1)
//                                col = threadID_in_group * 2 + (i & 1)
// Each is a Fragment over 32 threads whose local index is the element number i above.
#pragma once
#include <cstdint>

#include "layout/fragment.h"

namespace tl::mma {

inline constexpr int64_t kWarpSize = 32;

Fragment m16n8k16_a_fragment();
Fragment m16n8k16_b_fragment();
Fragment m16n8k16_c_fragment();

// ldmatrix.sync.aligned.m8n8.x4.b16 loads four 8x8 matrices of 16-bit elements. Lane l
// supplies the shared-memory address of row l % 8 of matrix l / 8: Layout [32] -> [4, 8].
Layout ldmatrix_x4_address_layout();
// Where the loaded elements land: element (m, r, c) of matrix m goes to lane r * 4 + c / 2,
// destination register m, half c % 2; the local index is m * 2 + c % 2. Fragment [4, 8, 8].
Fragment ldmatrix_x4_result_fragment();
// The lane addresses that load a 16 x 16 A tile with one ldmatrix.x4 so that the result is
// exactly m16n8k16_a_fragment(): lane l points at row l % 16, column 8 * (l / 16).
// Layout [32] -> [16, 2] (row, 8-column half).
Layout ldmatrix_x4_a_address_layout();

// The accumulator of a block tile [block_m, block_n] computed by warps_m x warps_n warps,
// each warp owning a contiguous [block_m / warps_m, block_n / warps_n] sub-tile made of
// m16n8 accumulators (row-major over the sub-tile), warps numbered row-major. Throws
// CompileError(Layout) when the tile does not divide.
Fragment gemm_c_fragment(int64_t block_m, int64_t block_n, int64_t warps_m, int64_t warps_n);

}  // namespace tl::mma

// ---------------------------------------------------------------- AMD matrix instructions
//
// MFMA (CDNA: gfx90a, gfx94x, gfx950; a wavefront of 64 lanes) and WMMA (RDNA 3, gfx11;
// wave32), one block per instruction, as AMD's ISA documents them (the CDNA 2 / CDNA 3
// ISA references, "Matrix fused multiply-add"; AMD's Matrix Instruction Calculator,
// --register-layout). For an M x N x K instruction with M = N = S:
//
// MFMA, kpl = S * K / 64 consecutive K values per lane (4 for 32x32x8f16 and 16x16x16f16,
// 8 for gfx94x's i8 forms):
//   A[i][k]: lane = i + S * (k / kpl), item k % kpl
//   B[k][j]: lane = j + S * (k / kpl), item k % kpl
//   C/D[i][j] (32-bit): lane = j + S * ((i / 4) % (64 / S)), register 4 * (i / (4 * 64 / S)) + i % 4
//     (32x32: register 4 * (i / 8) + i % 4, lane j + 32 * ((i / 4) % 2);
//      16x16: register i % 4, lane j + 16 * (i / 4))
// WMMA (gfx11, wave32, 16x16x16): every lane holds a whole row of A (column of B), the
// upper 16 lanes a copy of the lower 16:
//   A[i][k]: lanes i and i + 16, item k;  B[k][j]: lanes j and j + 16, item k
//   C/D[i][j] (32-bit): lane = j + 16 * (i % 2), register i / 2
namespace tl::amd {

struct MatrixCoreShape {
  int64_t m = 32, n = 32, k = 8;  // one instruction (m == n)
  int64_t wave = 64;              // lanes: 64 for MFMA, 32 for WMMA
  bool wmma = false;
  // A or B values per lane, and accumulator values per lane.
  int64_t inputs_per_lane() const { return wmma ? k : m * k / wave; }
  int64_t acc_per_lane() const { return m * n / wave; }
};

// The instruction's operand and accumulator fragments over one wavefront: A [m, k],
// B [k, n], C/D [m, n]; local index = the item (register element) above. WMMA's A and B
// have two copies (replicate 2: copy r in lanes 16 r + ...).
Fragment a_fragment(const MatrixCoreShape& s);
Fragment b_fragment(const MatrixCoreShape& s);
Fragment c_fragment(const MatrixCoreShape& s);
// Which element item e of lane l holds, in closed form, for code generation: Layout
// [wave, inputs_per_lane] -> [m, k] (A) and -> [k, n] (B). (The inverses of the fragments
// above, with WMMA's copy dropped.)
Layout a_registers(const MatrixCoreShape& s);
Layout b_registers(const MatrixCoreShape& s);

// The accumulator of a block tile [block_m, block_n] on warps_m x warps_n wavefronts, each
// owning a contiguous [block_m / warps_m, block_n / warps_n] sub-tile made of m x n
// instruction tiles (row-major over the sub-tile, registers of tile t at t * acc_per_lane),
// wavefronts numbered row-major. transposed: the instruction computes C^T = B^T A^T (its
// A input is read from B, its B input from A), so C[i][j] sits where the instruction's D
// puts [j][i]: each MFMA lane then holds consecutive columns of one row, and the
// accumulator of an M x K product is exactly the B input (register A operand) of the next
// product. Throws CompileError(Layout) when the tile does not divide.
Fragment gemm_c_fragment(int64_t block_m, int64_t block_n, int64_t warps_m, int64_t warps_n,
                         const MatrixCoreShape& s, bool transposed);

// A register A operand: the transposed MFMA accumulator of an M x K product on wavefronts
// along M only holds, for m-tile mi and K step kk (K = s.k), the instruction's B input in
// inputs_per_lane() consecutive slots starting here (k_extent: the product's K).
Expr chained_a_slot(const MatrixCoreShape& s, const Expr& mi, const Expr& kk, int64_t k_extent);

}  // namespace tl::amd
