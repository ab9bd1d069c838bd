// How a fragment (or the iteration space of a T.Parallel loop) is spread over the threads
// of a block, in closed form, with the loops that enumerate what one thread owns.
//
// The tile is seen through one or two axes: rows x cols (rows = all leading dimensions
// flattened, cols = the last one), or a single axis (the flattened tile). The value along
// each axis is written in mixed radix as a list of digits, most significant first; every
// digit is either held along the threads (its value times its stride is part of the
// thread index) or in registers (its value times its stride is part of the local slot):
//
//     axis value = sum over digits  value_d * (product of the extents of later digits)
//     thread     = sum over thread digits value_d * stride_d  (+ replica digits)
//     local slot = sum over local digits  value_d * stride_d
//
// Replica digits are thread digits that belong to no axis: the threads they tell apart hold
// the same elements (the result of a reduction lives in every thread that took part).
// When the digits of an axis span more than its extent, the slots past the end exist but
// hold nothing (`Owned::exists` says which).
//
// Grid (the default): `group` consecutive lanes share a row, in vectors of `vec` elements
// (at most a warp, unless there are too few rows to keep every thread busy); the block's
// threads form row_groups = threads / group groups, dealt rows round-robin:
//     rows: [rows_per_thread local] [row_groups thread x group]
//     cols: [chunks_per_thread local] [group thread x 1] [vec local]
// Mma (the accumulator of mma.sync m16n8, warp (wm, wn) = warp wm * warps_n + wn):
//     rows: [warps_m thread x 32 warps_n] [M / (16 warps_m) local] [2 local] [8 thread x 4]
//     cols: [warps_n thread x 32] [N / (8 warps_n) local] [4 thread x 1] [2 local]
//   with the four accumulators of one 16 x 8 atom in consecutive slots (c0..c3).
// RowReplicated / ColReplicated: the rows (cols) axis of a 2-D layout alone, the other
// axis's thread digits becoming replicas (the result of reducing the other dimension).
// Broadcast: every thread holds every element.
//
// Rank-1 grid tiles [n] use the two axes [n / vec, vec]: every thread owns whole vectors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "layout/mma_layouts.h"

namespace tl {

class TilePartition {
 public:
  enum class Kind { Grid, Mma, RowReplicated, ColReplicated, Broadcast, Given };

  struct Digit {
    std::string name;  // for messages and loop names
    int64_t extent;
    bool on_thread;
    int64_t stride;  // in the thread index, or in the local slot
    bool operator==(const Digit& o) const {
      return extent == o.extent && on_thread == o.on_thread && stride == o.stride;
    }
  };
  struct Axis {
    int64_t extent;
    std::vector<Digit> digits;  // most significant first
    bool operator==(const Axis& o) const { return extent == o.extent && digits == o.digits; }
  };

  // The default partition of a tile of `shape` (constants) over `threads` threads, for
  // elements of elem_bytes bytes: vectors of up to 16 bytes.
  static TilePartition grid(const std::vector<int64_t>& shape, int64_t threads, int elem_bytes);
  // The mma.sync m16n8 accumulator of an M x N tile on a warps_m x warps_n warp grid
  // (M divisible by 16 warps_m, N by 8 warps_n, threads == 32 warps_m warps_n).
  static TilePartition mma_accumulator(int64_t m, int64_t n, int64_t warps_m, int64_t warps_n);
  // The wgmma m64nN accumulator of an M x N tile on a warpgroups_m x warpgroups_n grid of
  // warpgroups (M divisible by 64 warpgroups_m, N by 8 warpgroups_n, threads == 128 x
  // both), warpgroup (gm, gn) = warpgroup gm * warpgroups_n + gn:
  //   rows: [gm thread x 128 gn] [M / (64 gm) local] [4 warps thread x 32] [2 local] [8 thread x 4]
  //   cols: [gn thread x 128] [N / (8 gn) local] [4 thread x 1] [2 local]
  // so one instruction's accumulators (a 64 x n piece) are consecutive slots in the
  // instruction's register order.
  static TilePartition wgmma_accumulator(int64_t m, int64_t n, int64_t warpgroups_m, int64_t warpgroups_n);
  // The accumulator of AMD's matrix instructions (amd::gemm_c_fragment, layout/mma_layouts.h)
  // for an M x N tile on a warps_m x warps_n grid of wavefronts (wave = s.wave lanes),
  // wavefront (wm, wn) = wm * warps_n + wn, R = s.acc_per_lane() registers per S x S tile.
  // The instruction's D rows are, for MFMA with G = 64 / S 4-row groups side by side in the
  // lanes, [S / (4 G) local x 4] [G thread x S] [4 local x 1] (32x32: [4 local][2 thread x 32]
  // [4 local]; 16x16: [4 thread x 16][4 local]), for WMMA [8 local x 1] [2 thread x 16]; its
  // columns [S thread x 1]. transposed (C = (B^T A^T)^T, MFMA's choice):
  //   rows: [wm thread x wave wn] [M / (S wm) local x NI R] [S thread x 1]
  //   cols: [wn thread x wave] [NI = N / (S wn) local x R] [the instruction's D rows]
  // otherwise the rows take the instruction's D rows and the columns its S lanes.
  static TilePartition amd_accumulator(int64_t m, int64_t n, int64_t warps_m, int64_t warps_n,
                                       const amd::MatrixCoreShape& s, bool transposed);
  // The partition of a reduction's result over `shape` (its own shape): one axis of this
  // 2-D layout, the other's threads turned into replicas.
  TilePartition row_replicated(const std::vector<int64_t>& shape) const;
  TilePartition col_replicated(const std::vector<int64_t>& shape) const;
  static TilePartition broadcast(const std::vector<int64_t>& shape, int64_t threads);
  // The same partition of a tile reshaped with its last dimension kept (rank >= 2 on both
  // sides, the same element count): the rows are the same flattened rows.
  TilePartition with_leading_dims(const std::vector<int64_t>& shape) const;
  // A partition given by hand (a T.Fragment in T.annotate_layout): each axis's digits (a
  // rank-1 tile has one axis, a higher one rows x cols) and the copies' thread digits, as
  // read from the user's table. Threads no digit reaches become replica digits: they hold
  // copies of what the threads below them hold. Empty `why` on success, else the reason.
  static TilePartition given(const std::vector<int64_t>& shape, int64_t threads, std::vector<Axis> axes,
                             std::vector<Digit> replicas, std::string& why);

  Kind kind() const { return kind_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t threads() const { return threads_; }
  const std::vector<Axis>& axes() const { return axes_; }
  const std::vector<Digit>& replica_digits() const { return replicas_; }
  // Elements each thread stores (an upper bound: threads at the edges may use fewer).
  int64_t local_size() const;
  // How many threads hold each element.
  int64_t replicas() const;
  // A rank >= 2 tile seen as rows x cols.
  bool is_2d() const { return axes_.size() == 2 && shape_.size() >= 2; }

  // The owner of a logical element (for replica rep), and its slot in the owner's array.
  int64_t thread_of(const std::vector<int64_t>& index, int64_t rep) const;
  Expr local_index(const std::vector<Expr>& index) const;

  // The axis values of a logical index, and the logical index of axis values.
  std::vector<Expr> axis_values(const std::vector<Expr>& index, Span span) const;
  std::vector<Expr> logical_index(const std::vector<Expr>& axis_values, Span span) const;
  // The value of a thread digit in thread t.
  static Expr digit_of_thread(const Digit& d, const Expr& t, int64_t threads, Span span);

  // The elements thread t owns: loops (vars over [0, extents)) and, inside them, the
  // logical index of the element and the condition that it exists (null when always).
  struct Owned {
    std::vector<Var> vars;
    std::vector<int64_t> extents;
    std::vector<Expr> index;
    Expr exists;
  };
  Owned owned_by(const Expr& t, const std::string& prefix, Span span) const;
  // The condition that thread t holds the first copy of what it owns (null when every
  // element has one copy): work with side effects runs once per element under it.
  Expr first_replica(const Expr& t, Span span) const;

  bool operator==(const TilePartition& o) const;
  std::string str() const;

  // The grid's parameters (see the formulas above), for lowerings that walk a Grid
  // directly; meaningless for other kinds.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t vec() const { return vec_; }
  int64_t group() const { return group_; }
  int64_t row_groups() const { return row_groups_; }
  int64_t chunks() const { return cols_ / vec_; }
  int64_t chunks_per_thread() const { return (chunks() + group_ - 1) / group_; }
  int64_t rows_per_thread() const { return (rows_ + row_groups_ - 1) / row_groups_; }

 private:
  TilePartition replicated_axis(int keep, Kind kind, const std::vector<int64_t>& shape) const;
  // The same mapping with adjacent digits of one kind and contiguous strides merged and
  // unit digits dropped: two partitions are equal when these are.
  std::vector<Axis> canonical_axes() const;
  std::vector<Digit> canonical_replicas() const;

  Kind kind_ = Kind::Grid;
  std::vector<int64_t> shape_;  // the buffer's logical shape
  std::vector<Axis> axes_;
  std::vector<Digit> replicas_;
  int64_t threads_ = 1;
  int64_t rows_ = 1, cols_ = 1, vec_ = 1, group_ = 1, row_groups_ = 1;  // Grid only
};

}  // namespace tl
