#include "layout/tile_partition.h"

#include <numeric>
#include <sstream>

#include "ir/error.h"
#include "ir/op.h"

namespace tl {
namespace {

int64_t product(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// The largest power of two that is at most limit and divides n (1 when none larger).
int64_t pow2_dividing(int64_t n, int64_t limit) {
  int64_t p = 1;
  while (p * 2 <= limit && n % (p * 2) == 0) p *= 2;
  return p;
}

Expr c(int64_t v) { return make_int(v); }

// Row-major flat index of `index` over `shape`, and back.
Expr flatten(const std::vector<Expr>& index, const std::vector<int64_t>& shape, Span sp) {
  Expr flat = c(0);
  for (size_t d = 0; d < index.size(); ++d) flat = add(mul(flat, c(shape[d]), sp), index[d], sp);
  return flat;
}
std::vector<Expr> unflatten(const Expr& flat, const std::vector<int64_t>& shape, Span sp) {
  std::vector<Expr> out(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    Expr q = stride == 1 ? flat : floordiv(flat, c(stride), sp);
    out[d] = d == 0 ? q : floormod(q, c(shape[d]), sp);
    stride *= shape[d];
  }
  return out;
}
int64_t flatten(const std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < index.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

}  // namespace

TilePartition TilePartition::grid(const std::vector<int64_t>& shape, int64_t threads, int elem_bytes) {
  TilePartition p;
  p.kind_ = Kind::Grid;
  p.shape_ = shape;
  p.grid_shape_ = shape;
  p.threads_ = threads;
  int64_t max_vec = std::max<int64_t>(1, 16 / std::max(1, elem_bytes));
  if (shape.size() == 1) {
    p.vec_ = pow2_dividing(shape[0], max_vec);
    p.rows_ = shape[0] / p.vec_;
    p.cols_ = p.vec_;
  } else {
    p.rows_ = product(shape, 0, shape.size() - 1);
    p.cols_ = shape.back();
    p.vec_ = pow2_dividing(p.cols_, max_vec);
  }
  p.group_ = std::min(pow2_dividing(threads, 32), std::max<int64_t>(1, pow2_dividing(p.chunks(), 32)));
  p.row_groups_ = threads / p.group_;
  return p;
}

TilePartition TilePartition::row_replicated(const std::vector<int64_t>& shape) const {
  TilePartition p = *this;
  p.kind_ = Kind::RowReplicated;
  p.shape_ = shape;
  return p;
}

TilePartition TilePartition::col_replicated(const std::vector<int64_t>& shape) const {
  TilePartition p = *this;
  p.kind_ = Kind::ColReplicated;
  p.shape_ = shape;
  return p;
}

TilePartition TilePartition::broadcast(const std::vector<int64_t>& shape, int64_t threads) {
  TilePartition p;
  p.kind_ = Kind::Broadcast;
  p.shape_ = shape;
  p.grid_shape_ = shape;
  p.threads_ = threads;
  p.rows_ = product(shape, 0, shape.size());
  p.row_groups_ = threads;
  return p;
}

Expr TilePartition::first_replica(const Expr& t, Span sp) const {
  switch (kind_) {
    case Kind::Grid: return nullptr;
    case Kind::RowReplicated:
      return group_ == 1 ? nullptr : binary(BinaryOp::EQ, floormod(t, c(group_), sp), c(0), sp);
    case Kind::ColReplicated:
      return row_groups_ == 1 ? nullptr : binary(BinaryOp::EQ, floordiv(t, c(group_), sp), c(0), sp);
    case Kind::Broadcast: return threads_ == 1 ? nullptr : binary(BinaryOp::EQ, t, c(0), sp);
  }
  return nullptr;
}

int64_t TilePartition::local_size() const {
  switch (kind_) {
    case Kind::Broadcast: return rows_;
    case Kind::Grid: return rows_per_thread() * chunks_per_thread() * vec_;
    case Kind::RowReplicated: return rows_per_thread();
    case Kind::ColReplicated: return chunks_per_thread() * vec_;
  }
  return 0;
}

int64_t TilePartition::replicas() const {
  switch (kind_) {
    case Kind::Broadcast: return threads_;
    case Kind::Grid: return 1;
    case Kind::RowReplicated: return group_;
    case Kind::ColReplicated: return row_groups_;
  }
  return 1;
}

int64_t TilePartition::thread_of(const std::vector<int64_t>& index, int64_t rep) const {
  int64_t flat = flatten(index, shape_);
  switch (kind_) {
    case Kind::Grid: {
      int64_t row, col;
      if (grid_shape_.size() == 1) {
        row = flat / vec_;
        col = flat % vec_;
      } else {
        row = flat / cols_;
        col = flat % cols_;
      }
      return (row % row_groups_) * group_ + (col / vec_) % group_;
    }
    case Kind::Broadcast: return rep;
    case Kind::RowReplicated: return (flat % row_groups_) * group_ + rep;
    case Kind::ColReplicated: return rep * group_ + (flat / vec_) % group_;
  }
  return 0;
}

std::vector<Expr> TilePartition::split_row(const Expr& flat, Span sp) const {
  if (grid_shape_.size() == 1) return {floordiv(flat, c(vec_), sp), floormod(flat, c(vec_), sp)};
  return {floordiv(flat, c(cols_), sp), floormod(flat, c(cols_), sp)};
}

Expr TilePartition::local_index(const std::vector<Expr>& index) const {
  Span sp = index.empty() ? Span{} : index[0]->span;
  Expr flat = flatten(index, shape_, sp);
  switch (kind_) {
    case Kind::Grid: {
      auto rc = split_row(flat, sp);
      Expr chunk = floordiv(rc[1], c(vec_), sp);
      Expr slot = add(mul(floordiv(rc[0], c(row_groups_), sp), c(chunks_per_thread()), sp),
                      floordiv(chunk, c(group_), sp), sp);
      return add(mul(slot, c(vec_), sp), floormod(rc[1], c(vec_), sp), sp);
    }
    case Kind::Broadcast: return flat;
    case Kind::RowReplicated: return floordiv(flat, c(row_groups_), sp);
    case Kind::ColReplicated: {
      Expr chunk = floordiv(flat, c(vec_), sp);
      return add(mul(floordiv(chunk, c(group_), sp), c(vec_), sp), floormod(flat, c(vec_), sp), sp);
    }
  }
  return flat;
}

TilePartition::Owned TilePartition::owned_by(const Expr& t, const std::string& prefix, Span sp) const {
  Owned o;
  auto loop = [&](const std::string& name, int64_t extent) {
    o.vars.push_back(make_var(prefix + name, DataType::Int(32), sp));
    o.extents.push_back(extent);
    return Expr(o.vars.back());
  };
  auto both = [&](Expr a, Expr b) { return a ? (b ? land(a, b, sp) : a) : b; };
  if (kind_ == Kind::Broadcast) {
    o.index = unflatten(loop("_e", rows_), shape_, sp);
    return o;
  }
  Expr row_in_group = floordiv(t, c(group_), sp);
  Expr lane_in_group = floormod(t, c(group_), sp);
  Expr row, chunk;
  if (kind_ != Kind::ColReplicated) {
    Expr r = loop("_r", rows_per_thread());
    row = add(mul(r, c(row_groups_), sp), row_in_group, sp);
    if (rows_ % row_groups_ != 0) o.exists = both(o.exists, lt(row, c(rows_), sp));
  }
  Expr col;
  if (kind_ != Kind::RowReplicated) {
    Expr cc = loop("_c", chunks_per_thread());
    Expr vv = loop("_v", vec_);
    chunk = add(mul(cc, c(group_), sp), lane_in_group, sp);
    col = add(mul(chunk, c(vec_), sp), vv, sp);
    if (chunks() % group_ != 0) o.exists = both(o.exists, lt(chunk, c(chunks()), sp));
  }
  switch (kind_) {
    case Kind::Grid: {
      if (grid_shape_.size() == 1) {
        o.index = {add(mul(row, c(vec_), sp), col, sp)};
      } else {
        std::vector<int64_t> leading(grid_shape_.begin(), grid_shape_.end() - 1);
        o.index = unflatten(row, leading, sp);
        o.index.push_back(col);
      }
      break;
    }
    case Kind::RowReplicated: o.index = unflatten(row, shape_, sp); break;
    case Kind::ColReplicated: o.index = unflatten(col, shape_, sp); break;
    case Kind::Broadcast: break;  // handled above
  }
  return o;
}

bool TilePartition::operator==(const TilePartition& o) const {
  return kind_ == o.kind_ && shape_ == o.shape_ && rows_ == o.rows_ && cols_ == o.cols_ && vec_ == o.vec_ &&
         group_ == o.group_ && row_groups_ == o.row_groups_ && threads_ == o.threads_;
}

std::string TilePartition::str() const {
  std::ostringstream os;
  const char* names[] = {"grid", "row-replicated", "col-replicated", "broadcast"};
  os << names[int(kind_)] << "(";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? "x" : "") << shape_[i];
  os << ": " << rows_ << " rows x " << cols_ << " cols, vec " << vec_ << ", " << group_ << " threads per row, "
     << row_groups_ << " row groups)";
  return os.str();
}

}  // namespace tl
