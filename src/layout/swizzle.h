// XOR swizzles of shared-memory tiles, in the style tensor-core kernels use.
//
// A row-major tile [rows, cols] of `element_bits`-bit elements is cut into 16-byte chunks.
// In mode W (32, 64 or 128 bytes), each row is split into W-byte segments of W/16 chunks,
// and the chunk index within its segment is XORed with a key taken from the row:
//   128B: key = row % 8          (8 chunks per segment)
//    64B: key = (row % 8) / 2    (4 chunks)
//    32B: key = (row % 8) / 4    (2 chunks)
// When a row is exactly W bytes long this is the hardware's Swizzle<log2(W/16), 4, 3> on byte
// addresses (bits [4, 4 + log2(W/16)) ^= bits [7, 7 + log2(W/16))), the pattern TMA and
// wgmma expect. Elements inside a chunk never move, so 16-byte vector accesses stay intact.
#pragma once
#include <cstdint>
#include <functional>

#include "layout/layout.h"

namespace tl {

enum class SwizzleMode : uint8_t { None, B32, B64, B128 };

// How a shared tile [..., rows, cols] is stored. panel_cols == 0 (or == cols): each row is
// swizzled in place as above (what ldmatrix reads best). panel_cols < cols: the columns are
// cut into panels of panel_cols elements (exactly the swizzle width), each stored whole,
// rows x panel_cols, one after another, and swizzled as a tile of that width: the
// canonical layout of wgmma's shared-memory descriptors and of TMA's swizzled boxes, whose
// 8-row atoms must be 8 x width bytes contiguous.
struct SharedSwizzle {
  SwizzleMode mode = SwizzleMode::None;
  int64_t panel_cols = 0;
  bool panelled(int64_t cols) const { return panel_cols > 0 && panel_cols < cols; }
  bool operator==(const SharedSwizzle& o) const { return mode == o.mode && panel_cols == o.panel_cols; }
};

// 0, 32, 64, 128.
int swizzle_width_bytes(SwizzleMode mode);
// "none", "32B", "64B", "128B".
const char* swizzle_mode_name(SwizzleMode mode);

// Whether mode can swizzle a row of `cols` elements of element_bits each: the element size
// divides 16 bytes and the row length in bytes is a multiple of the swizzle width.
bool swizzle_fits(SwizzleMode mode, int64_t cols, int element_bits);

// The widest mode that fits (128B, then 64B, then 32B), or None.
SwizzleMode pick_swizzle_mode(int64_t cols, int element_bits);

// Layout [rows, cols] -> [rows, cols]: the row is kept, the column is permuted as above (the
// physical element offset is row * cols + column). None gives the identity. Throws
// CompileError(Layout) when the mode does not fit the tile.
Layout make_swizzled_layout(int64_t rows, int64_t cols, int element_bits, SwizzleMode mode);

// The element offset, inside one [rows, cols] tile stored as `s`, of logical element
// (row, col), written with `xor_op(a, b, bits)` for a ^ b where b < 2^bits (a BitXor
// in thread-level code, xor_low_bits in the layout algebra).
Expr swizzled_offset(const Expr& row, const Expr& col, int64_t rows, int64_t cols, int element_bits,
                     const SharedSwizzle& s, const std::function<Expr(const Expr&, const Expr&, int)>& xor_op);

// The layout [rows, cols] -> [rows * cols] of a tile stored as `s`.
Layout make_shared_layout(int64_t rows, int64_t cols, int element_bits, const SharedSwizzle& s);

// a XOR b on the low `bits` bits of non-negative a and b, written with floordiv/floormod
// (the layout algebra's form; thread-level code uses BinaryOp::BitXor): sum_t 2^t * ((a // 2^t + b // 2^t) % 2).
Expr xor_low_bits(const Expr& a, const Expr& b, int bits);

}  // namespace tl
