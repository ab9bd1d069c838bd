#include "layout/mma_layouts.h"

#include <string>

#include "ir/error.h"
#include "ir/op.h"

namespace tl::mma {

namespace {
Expr c(int64_t v) { return make_int(v); }
}  // namespace

// Each fragment below inverts the documented (lane, i) -> (row, col) formulas:
// groupID = row % 8, threadID_in_group comes from the column, i from the halves.

Fragment m16n8k16_a_fragment() {
  return Fragment(
      {16, 16}, kWarpSize,
      [](const std::vector<Var>& v, const Var&) {
        return add(mul(floormod(v[0], c(8)), c(4)), floordiv(floormod(v[1], c(8)), c(2)));
      },
      [](const std::vector<Var>& v) {
        return add(add(mul(floordiv(v[1], c(8)), c(4)), mul(floordiv(v[0], c(8)), c(2))),
                   floormod(v[1], c(2)));
      });
}

Fragment m16n8k16_b_fragment() {
  return Fragment(
      {16, 8}, kWarpSize,
      [](const std::vector<Var>& v, const Var&) {
        return add(mul(v[1], c(4)), floordiv(floormod(v[0], c(8)), c(2)));
      },
      [](const std::vector<Var>& v) { return add(mul(floordiv(v[0], c(8)), c(2)), floormod(v[0], c(2))); });
}

Fragment m16n8k16_c_fragment() {
  return Fragment(
      {16, 8}, kWarpSize,
      [](const std::vector<Var>& v, const Var&) {
        return add(mul(floormod(v[0], c(8)), c(4)), floordiv(v[1], c(2)));
      },
      [](const std::vector<Var>& v) { return add(mul(floordiv(v[0], c(8)), c(2)), floormod(v[1], c(2))); });
}

Layout ldmatrix_x4_address_layout() {
  return Layout({kWarpSize}, [](const std::vector<Var>& v) {
    return std::vector<Expr>{floordiv(v[0], c(8)), floormod(v[0], c(8))};
  });
}

Fragment ldmatrix_x4_result_fragment() {
  return Fragment(
      {4, 8, 8}, kWarpSize,
      [](const std::vector<Var>& v, const Var&) { return add(mul(v[1], c(4)), floordiv(v[2], c(2))); },
      [](const std::vector<Var>& v) { return add(mul(v[0], c(2)), floormod(v[2], c(2))); });
}

Layout ldmatrix_x4_a_address_layout() {
  return Layout({kWarpSize}, [](const std::vector<Var>& v) {
    return std::vector<Expr>{floormod(v[0], c(16)), floordiv(v[0], c(16))};
  });
}

Fragment gemm_c_fragment(int64_t block_m, int64_t block_n, int64_t warps_m, int64_t warps_n) {
  if (block_m < 1 || block_n < 1 || warps_m < 1 || warps_n < 1 || block_m % (16 * warps_m) != 0 ||
      block_n % (8 * warps_n) != 0)
    fail(ErrorKind::Layout, Span{},
         "a " + std::to_string(block_m) + " x " + std::to_string(block_n) +
             " accumulator cannot be split over " + std::to_string(warps_m) + " x " +
             std::to_string(warps_n) + " warps of m16n8 tiles",
         "block_m must be a multiple of 16 * warps_m and block_n a multiple of 8 * warps_n");
  int64_t tiles_m = block_m / (16 * warps_m), tiles_n = block_n / (8 * warps_n);
  return m16n8k16_c_fragment().repeat({tiles_m, tiles_n}, false).repeat({warps_m, warps_n}, true);
}

}  // namespace tl::mma
