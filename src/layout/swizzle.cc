#include "layout/swizzle.h"

#include <string>

#include "ir/error.h"
#include "ir/op.h"

namespace tl {

int swizzle_width_bytes(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None:
      return 0;
    case SwizzleMode::B32:
      return 32;
    case SwizzleMode::B64:
      return 64;
    case SwizzleMode::B128:
      return 128;
  }
  return 0;
}

const char* swizzle_mode_name(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None:
      return "none";
    case SwizzleMode::B32:
      return "32B";
    case SwizzleMode::B64:
      return "64B";
    case SwizzleMode::B128:
      return "128B";
  }
  return "?";
}

bool swizzle_fits(SwizzleMode mode, int64_t cols, int element_bits) {
  if (mode == SwizzleMode::None) return true;
  if (element_bits <= 0 || 128 % element_bits != 0 || cols <= 0) return false;
  return (cols * element_bits) % (int64_t(swizzle_width_bytes(mode)) * 8) == 0;
}

SwizzleMode pick_swizzle_mode(int64_t cols, int element_bits) {
  for (SwizzleMode mode : {SwizzleMode::B128, SwizzleMode::B64, SwizzleMode::B32})
    if (swizzle_fits(mode, cols, element_bits)) return mode;
  return SwizzleMode::None;
}

Expr xor_low_bits(const Expr& a, const Expr& b, int bits) {
  Expr result = make_int(0);
  for (int t = 0; t < bits; ++t) {
    Expr shift = make_int(int64_t(1) << t);
    Expr a_t = t == 0 ? a : floordiv(a, shift);
    Expr b_t = t == 0 ? b : floordiv(b, shift);
    result = add(result, mul(floormod(add(a_t, b_t), make_int(2)), shift));
  }
  return result;
}

Expr swizzled_offset(const Expr& row, const Expr& col, int64_t rows, int64_t cols, int element_bits,
                     const SharedSwizzle& s, const std::function<Expr(const Expr&, const Expr&, int)>& xor_op) {
  auto c = [](int64_t v) { return make_int(v); };
  if (s.mode == SwizzleMode::None) return add(mul(row, c(cols)), col);
  const int64_t vec = 128 / element_bits;                   // elements per 16-byte chunk
  const int64_t chunks = swizzle_width_bytes(s.mode) / 16;  // chunks per segment: 2, 4 or 8
  int bits = 0;                                             // log2 of the segment's elements
  while ((int64_t(1) << bits) < vec * chunks) ++bits;
  // The key (row % 8 scaled to the segment's chunk count) moves whole chunks: XORing the
  // column with key * vec changes only bits inside the segment.
  Expr key = mul(floordiv(floormod(row, c(8)), c(8 / chunks)), c(vec));
  if (!s.panelled(cols)) return add(mul(row, c(cols)), xor_op(col, key, bits));
  Expr panel = floordiv(col, c(s.panel_cols));
  return add(add(mul(panel, c(rows * s.panel_cols)), mul(row, c(s.panel_cols))),
             xor_op(floormod(col, c(s.panel_cols)), key, bits));
}

Layout make_shared_layout(int64_t rows, int64_t cols, int element_bits, const SharedSwizzle& s) {
  if (s.mode != SwizzleMode::None && !swizzle_fits(s.mode, cols, element_bits))
    fail(ErrorKind::Layout, Span{},
         std::string("a ") + swizzle_mode_name(s.mode) + " swizzle does not fit a tile of " +
             std::to_string(cols) + " columns of " + std::to_string(element_bits) + "-bit elements",
         "the row length in bytes must be a multiple of the swizzle width");
  if (s.panelled(cols) && s.panel_cols * element_bits != swizzle_width_bytes(s.mode) * 8)
    fail(ErrorKind::Layout, Span{}, "a panel must be exactly one swizzle width wide",
         "use panel_cols = width bytes / element bytes");
  return Layout({rows, cols},
                [&](const std::vector<Var>& v) {
                  // a ^ b on the low bits, the higher bits of a kept.
                  auto xor_op = [](const Expr& a, const Expr& b, int bits) {
                    Expr high = make_int(int64_t(1) << bits);
                    return add(mul(floordiv(a, high), high), xor_low_bits(a, b, bits));
                  };
                  return std::vector<Expr>{swizzled_offset(v[0], v[1], rows, cols, element_bits, s, xor_op)};
                },
                {rows * cols});
}

Layout make_swizzled_layout(int64_t rows, int64_t cols, int element_bits, SwizzleMode mode) {
  if (mode == SwizzleMode::None) return Layout::identity({rows, cols});
  if (!swizzle_fits(mode, cols, element_bits))
    fail(ErrorKind::Layout, Span{},
         std::string("a ") + swizzle_mode_name(mode) + " swizzle does not fit a tile of " +
             std::to_string(cols) + " columns of " + std::to_string(element_bits) + "-bit elements",
         "the row length in bytes must be a multiple of the swizzle width, and elements must "
         "divide 16 bytes");
  const int64_t vec = 128 / element_bits;                 // elements per 16-byte chunk
  const int64_t chunks = swizzle_width_bytes(mode) / 16;  // chunks per segment: 2, 4 or 8
  const int key_bits = chunks == 8 ? 3 : chunks == 4 ? 2 : 1;
  const int64_t segment = vec * chunks;
  return Layout({rows, cols},
                [&](const std::vector<Var>& v) {
                  Expr row = v[0], col = v[1];
                  Expr chunk = floormod(floordiv(col, make_int(vec)), make_int(chunks));
                  Expr key = floordiv(floormod(row, make_int(8)), make_int(8 / chunks));
                  Expr swizzled = add(add(mul(floordiv(col, make_int(segment)), make_int(segment)),
                                          mul(xor_low_bits(chunk, key, key_bits), make_int(vec))),
                                      floormod(col, make_int(vec)));
                  return std::vector<Expr>{row, swizzled};
                },
                {rows, cols});
}

}  // namespace tl
