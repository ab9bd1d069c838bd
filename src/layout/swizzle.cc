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
