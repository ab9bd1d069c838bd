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
