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

namespace tl::amd {

namespace {
Expr c(int64_t v) { return make_int(v); }

void check_shape(const MatrixCoreShape& s) {
  bool ok = s.m == s.n && s.m > 0 && s.k > 0 &&
            (s.wmma ? s.wave == 32 && s.m == 16 : s.wave == 64 && (s.m == 32 || s.m == 16) && s.m * s.k % 64 == 0);
  if (!ok)
    fail(ErrorKind::Internal, Span{},
         "internal: no AMD matrix instruction has the shape " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
             std::to_string(s.k) + " on " + std::to_string(s.wave) + " lanes");
}

// The lane and register of D[i][j] (the documented formulas, see the header).
Expr d_lane(const MatrixCoreShape& s, const Expr& i, const Expr& j) {
  if (s.wmma) return add(j, mul(floormod(i, c(2)), c(16)));
  int64_t groups = s.wave / s.m;  // 4-row groups side by side in the lanes
  return add(j, mul(floormod(floordiv(i, c(4)), c(groups)), c(s.m)));
}
Expr d_register(const MatrixCoreShape& s, const Expr& i) {
  if (s.wmma) return floordiv(i, c(2));
  int64_t groups = s.wave / s.m;
  return add(mul(floordiv(i, c(4 * groups)), c(4)), floormod(i, c(4)));
}

// A input fragment [outer, k] (A: outer = row i; B seen as [j, k]).
Fragment input_fragment(const MatrixCoreShape& s, bool k_first) {
  check_shape(s);
  int64_t kpl = s.inputs_per_lane();
  std::vector<int64_t> shape = k_first ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k};
  auto outer = [k_first](const std::vector<Var>& v) -> Expr { return k_first ? v[1] : v[0]; };
  auto kk = [k_first](const std::vector<Var>& v) -> Expr { return k_first ? v[0] : v[1]; };
  if (s.wmma)
    return Fragment(
        shape, s.wave, [&](const std::vector<Var>& v, const Var& r) { return add(outer(v), mul(r, c(16))); },
        [&](const std::vector<Var>& v) { return kk(v); }, 2);
  return Fragment(
      shape, s.wave,
      [&](const std::vector<Var>& v, const Var&) { return add(outer(v), mul(floordiv(kk(v), c(kpl)), c(s.m))); },
      [&](const std::vector<Var>& v) { return floormod(kk(v), c(kpl)); });
}

Fragment accumulator_fragment(const MatrixCoreShape& s, bool transposed) {
  check_shape(s);
  // transposed: element [i][j] is the instruction's D[j][i].
  return Fragment(
      {s.m, s.n}, s.wave,
      [&](const std::vector<Var>& v, const Var&) { return transposed ? d_lane(s, v[1], v[0]) : d_lane(s, v[0], v[1]); },
      [&](const std::vector<Var>& v) { return transposed ? d_register(s, v[1]) : d_register(s, v[0]); });
}

}  // namespace

Fragment a_fragment(const MatrixCoreShape& s) { return input_fragment(s, false); }
Fragment b_fragment(const MatrixCoreShape& s) { return input_fragment(s, true); }
Fragment c_fragment(const MatrixCoreShape& s) { return accumulator_fragment(s, false); }

Layout a_registers(const MatrixCoreShape& s) {
  check_shape(s);
  int64_t kpl = s.inputs_per_lane();
  return Layout({s.wave, kpl}, [&](const std::vector<Var>& v) {
    Expr outer = floormod(v[0], c(s.m));
    Expr k = s.wmma ? Expr(v[1]) : add(mul(floordiv(v[0], c(s.m)), c(kpl)), v[1]);
    return std::vector<Expr>{outer, k};
  });
}

Layout b_registers(const MatrixCoreShape& s) {
  Layout a = a_registers(s);
  return Layout({s.wave, s.inputs_per_lane()}, [&](const std::vector<Var>& v) {
    std::vector<Expr> ik = a.forward({v[0], v[1]});
    return std::vector<Expr>{ik[1], ik[0]};
  });
}

Fragment gemm_c_fragment(int64_t block_m, int64_t block_n, int64_t warps_m, int64_t warps_n, const MatrixCoreShape& s,
                         bool transposed) {
  if (block_m < 1 || block_n < 1 || warps_m < 1 || warps_n < 1 || block_m % (s.m * warps_m) != 0 ||
      block_n % (s.n * warps_n) != 0)
    fail(ErrorKind::Layout, Span{},
         "a " + std::to_string(block_m) + " x " + std::to_string(block_n) + " accumulator cannot be split over " +
             std::to_string(warps_m) + " x " + std::to_string(warps_n) + " wavefronts of " + std::to_string(s.m) + "x" +
             std::to_string(s.n) + " tiles",
         "block_m must be a multiple of " + std::to_string(s.m) + " * warps_m and block_n of " + std::to_string(s.n) +
             " * warps_n");
  int64_t tiles_m = block_m / (s.m * warps_m), tiles_n = block_n / (s.n * warps_n);
  return accumulator_fragment(s, transposed).repeat({tiles_m, tiles_n}, false).repeat({warps_m, warps_n}, true);
}

Expr chained_a_slot(const MatrixCoreShape& s, const Expr& mi, const Expr& kk, int64_t k_extent) {
  check_shape(s);
  // Tile (mi, kk / steps) of the accumulator, then the kpl registers of step kk % steps
  // inside it: D'[k][m] of a 32x32 tile holds k = 8 t + 4 (lane / 32) + e in register
  // 4 t + e, exactly the B input's k = 4 (lane / 32) + e of step t.
  int64_t steps = s.n / s.k, tiles = k_extent / s.n;
  Expr tile = add(mul(mi, c(tiles)), floordiv(kk, c(steps)));
  return add(mul(tile, c(s.acc_per_lane())), mul(floormod(kk, c(steps)), c(s.inputs_per_lane())));
}

}  // namespace tl::amd
