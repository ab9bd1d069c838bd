// How a fragment (or the iteration space of a T.Parallel loop) is spread over the threads
// of a block: the first GPU layouts, in closed form, with the loops that enumerate what
// one thread owns.
//
// Grid: the tile seen as rows x cols (rows = all leading dimensions flattened, cols = the
// last one) is cut into vectors of `vec` contiguous elements of a row; `group` threads
// share a row (consecutive lanes, so row-wise reductions are warp shuffles) and the
// block's threads form row_groups = threads / group such groups, dealt the rows round-robin:
//     chunk c = j / vec,  thread(i, j) = (i % row_groups) * group + c % group,
//     local(i, j) = ((i / row_groups) * chunks_per_thread + c / group) * vec + j % vec.
// RowReplicated: one value per row of a grid tile, held by every thread of that row's
// group (the result of a reduction along the last dimension).
// ColReplicated: one value per column of a 2-D grid tile, held by every row group (the
// result of a reduction along the first dimension).
//
// Broadcast: every thread holds every element (e.g. the result of reducing a whole tile).
//
// Rank-1 tiles [n] use the grid of shape [n / vec, vec]: every thread owns whole vectors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tl {

class TilePartition {
 public:
  enum class Kind { Grid, RowReplicated, ColReplicated, Broadcast };

  // The default partition of a tile of `shape` (constants) over `threads` threads, for
  // elements of elem_bytes bytes: vectors of up to 16 bytes.
  static TilePartition grid(const std::vector<int64_t>& shape, int64_t threads, int elem_bytes);
  // The partition of a reduction's result over `shape` (its own shape), derived from the
  // grid of the reduced tile.
  TilePartition row_replicated(const std::vector<int64_t>& shape) const;
  TilePartition col_replicated(const std::vector<int64_t>& shape) const;
  static TilePartition broadcast(const std::vector<int64_t>& shape, int64_t threads);

  Kind kind() const { return kind_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t threads() const { return threads_; }
  // Elements each thread stores (an upper bound: threads at the edges may use fewer).
  int64_t local_size() const;
  // How many threads hold each element.
  int64_t replicas() const;

  // The owner of a logical element (for replica rep), and its slot in the owner's array.
  int64_t thread_of(const std::vector<int64_t>& index, int64_t rep) const;
  Expr local_index(const std::vector<Expr>& index) const;

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

  // The grid's parameters (see the formulas above), for lowerings that walk it directly.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t vec() const { return vec_; }
  int64_t group() const { return group_; }
  int64_t row_groups() const { return row_groups_; }
  int64_t chunks() const { return cols_ / vec_; }
  int64_t chunks_per_thread() const { return (chunks() + group_ - 1) / group_; }
  int64_t rows_per_thread() const { return (rows_ + row_groups_ - 1) / row_groups_; }
  // Whether the grid tile is a real 2-D (or higher) tile rather than a rank-1 one.
  bool is_2d() const { return grid_shape_.size() >= 2; }

 private:
  // The flat row of a logical index of the grid tile, and its column.
  std::vector<Expr> split_row(const Expr& row, Span span) const;

  Kind kind_ = Kind::Grid;
  std::vector<int64_t> shape_;  // the buffer's logical shape
  int64_t rows_ = 1, cols_ = 1; // the grid tile (of the tile this layout derives from)
  int64_t vec_ = 1, group_ = 1, row_groups_ = 1, threads_ = 1;
  std::vector<int64_t> grid_shape_;  // logical shape of that grid tile
};

}  // namespace tl
