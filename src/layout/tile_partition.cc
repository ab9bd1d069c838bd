#include "layout/tile_partition.h"

#include <algorithm>
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
std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    out[d] = d == 0 ? flat : flat % shape[d];
    flat /= shape[d];
  }
  return out;
}

int64_t digits_span(const TilePartition::Axis& a) {
  int64_t p = 1;
  for (auto& d : a.digits) p *= d.extent;
  return p;
}

// The digit values of an axis value, most significant first.
std::vector<int64_t> split_digits(int64_t v, const std::vector<TilePartition::Digit>& digits) {
  std::vector<int64_t> out(digits.size());
  for (size_t k = digits.size(); k-- > 0;) {
    out[k] = k == 0 ? v : v % digits[k].extent;
    v /= digits[k].extent;
  }
  return out;
}
std::vector<Expr> split_digits(const Expr& v, const std::vector<TilePartition::Digit>& digits, Span sp) {
  std::vector<Expr> out(digits.size());
  int64_t place = 1;
  for (size_t k = digits.size(); k-- > 0;) {
    Expr q = place == 1 ? v : floordiv(v, c(place), sp);
    out[k] = k == 0 ? q : floormod(q, c(digits[k].extent), sp);
    place *= digits[k].extent;
  }
  return out;
}

}  // namespace

TilePartition TilePartition::grid(const std::vector<int64_t>& shape, int64_t threads, int elem_bytes) {
  TilePartition p;
  p.kind_ = Kind::Grid;
  p.shape_ = shape;
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
  // Fewer rows than row groups would leave threads idle: let a row span several warps.
  while (threads / p.group_ > p.rows_ && threads % (p.group_ * 2) == 0 && p.chunks() % (p.group_ * 2) == 0)
    p.group_ *= 2;
  p.row_groups_ = threads / p.group_;
  int64_t cpt = p.chunks_per_thread();
  p.axes_ = {
      Axis{p.rows_, {Digit{"r", p.rows_per_thread(), false, cpt * p.vec_}, Digit{"rg", p.row_groups_, true, p.group_}}},
      Axis{p.cols_, {Digit{"c", cpt, false, p.vec_}, Digit{"lane", p.group_, true, 1}, Digit{"v", p.vec_, false, 1}}},
  };
  return p;
}

TilePartition TilePartition::mma_accumulator(int64_t m, int64_t n, int64_t warps_m, int64_t warps_n) {
  if (m % (16 * warps_m) != 0 || n % (8 * warps_n) != 0)
    fail(ErrorKind::Internal, Span{},
         "internal: an mma accumulator of " + std::to_string(m) + " x " + std::to_string(n) + " does not split over " +
             std::to_string(warps_m) + " x " + std::to_string(warps_n) + " warps");
  TilePartition p;
  p.kind_ = Kind::Mma;
  p.shape_ = {m, n};
  p.threads_ = 32 * warps_m * warps_n;
  int64_t mi = m / (16 * warps_m), ni = n / (8 * warps_n);
  // Slot of accumulator (mi, ni, h, e): (mi * NI + ni) * 4 + h * 2 + e.
  p.axes_ = {
      Axis{m, {Digit{"wm", warps_m, true, 32 * warps_n}, Digit{"mi", mi, false, ni * 4}, Digit{"h", 2, false, 2},
               Digit{"g", 8, true, 4}}},
      Axis{n, {Digit{"wn", warps_n, true, 32}, Digit{"ni", ni, false, 4}, Digit{"t", 4, true, 1},
               Digit{"e", 2, false, 1}}},
  };
  return p;
}

TilePartition TilePartition::wgmma_accumulator(int64_t m, int64_t n, int64_t gm, int64_t gn) {
  if (m % (64 * gm) != 0 || n % (8 * gn) != 0)
    fail(ErrorKind::Internal, Span{},
         "internal: a wgmma accumulator of " + std::to_string(m) + " x " + std::to_string(n) +
             " does not split over " + std::to_string(gm) + " x " + std::to_string(gn) + " warpgroups");
  TilePartition p;
  p.kind_ = Kind::Mma;
  p.shape_ = {m, n};
  p.threads_ = 128 * gm * gn;
  int64_t mi = m / (64 * gm), ni = n / (8 * gn);
  p.axes_ = {
      Axis{m, {Digit{"gm", gm, true, 128 * gn}, Digit{"mi", mi, false, ni * 4}, Digit{"w", 4, true, 32},
               Digit{"h", 2, false, 2}, Digit{"g", 8, true, 4}}},
      Axis{n, {Digit{"gn", gn, true, 128}, Digit{"ni", ni, false, 4}, Digit{"t", 4, true, 1},
               Digit{"e", 2, false, 1}}},
  };
  return p;
}

TilePartition TilePartition::amd_accumulator(int64_t m, int64_t n, int64_t wm, int64_t wn, const amd::MatrixCoreShape& s,
                                             bool transposed) {
  if (m % (s.m * wm) != 0 || n % (s.n * wn) != 0)
    fail(ErrorKind::Internal, Span{},
         "internal: an AMD matrix-core accumulator of " + std::to_string(m) + " x " + std::to_string(n) +
             " does not split over " + std::to_string(wm) + " x " + std::to_string(wn) + " wavefronts");
  TilePartition p;
  p.kind_ = Kind::Mma;
  p.shape_ = {m, n};
  p.threads_ = s.wave * wm * wn;
  int64_t mi = m / (s.m * wm), ni = n / (s.n * wn), regs = s.acc_per_lane();
  // The instruction's D row digits (registers: local, lanes: thread) and its column digit.
  std::vector<Digit> d_rows;
  if (s.wmma) {
    d_rows = {Digit{"r", 8, false, 1}, Digit{"h", 2, true, 16}};
  } else {
    int64_t groups = s.wave / s.m;
    if (s.m / (4 * groups) > 1) d_rows.push_back(Digit{"r", s.m / (4 * groups), false, 4});
    d_rows.push_back(Digit{"q", groups, true, s.m});
    d_rows.push_back(Digit{"e", 4, false, 1});
  }
  Digit d_col{"l", s.n, true, 1};
  auto axis = [](int64_t extent, std::vector<Digit> outer, const std::vector<Digit>& inner) {
    std::vector<Digit> digits;
    for (auto& d : outer)
      if (d.extent > 1) digits.push_back(d);
    digits.insert(digits.end(), inner.begin(), inner.end());
    return Axis{extent, digits};
  };
  Digit dwm{"wm", wm, true, s.wave * wn}, dmi{"mi", mi, false, ni * regs};
  Digit dwn{"wn", wn, true, s.wave}, dni{"ni", ni, false, regs};
  if (transposed)
    p.axes_ = {axis(m, {dwm, dmi}, {d_col}), axis(n, {dwn, dni}, d_rows)};
  else
    p.axes_ = {axis(m, {dwm, dmi}, d_rows), axis(n, {dwn, dni}, {d_col})};
  return p;
}

TilePartition TilePartition::replicated_axis(int keep, Kind kind, const std::vector<int64_t>& shape) const {
  TilePartition p = *this;
  p.kind_ = kind;
  p.shape_ = shape;
  p.axes_ = {axes_[keep]};
  for (auto& d : axes_[1 - keep].digits)
    if (d.on_thread) p.replicas_.push_back(d);
  // The kept local digits, packed densely in their old order of significance.
  std::vector<Digit*> locals;
  for (auto& d : p.axes_[0].digits)
    if (!d.on_thread) locals.push_back(&d);
  std::stable_sort(locals.begin(), locals.end(), [](Digit* a, Digit* b) { return a->stride > b->stride; });
  int64_t stride = 1;
  for (size_t k = locals.size(); k-- > 0;) {
    locals[k]->stride = stride;
    stride *= locals[k]->extent;
  }
  return p;
}

TilePartition TilePartition::with_leading_dims(const std::vector<int64_t>& shape) const {
  TilePartition p = *this;
  p.shape_ = shape;
  return p;
}

TilePartition TilePartition::row_replicated(const std::vector<int64_t>& shape) const {
  return replicated_axis(0, Kind::RowReplicated, shape);
}

TilePartition TilePartition::col_replicated(const std::vector<int64_t>& shape) const {
  return replicated_axis(1, Kind::ColReplicated, shape);
}

TilePartition TilePartition::broadcast(const std::vector<int64_t>& shape, int64_t threads) {
  TilePartition p;
  p.kind_ = Kind::Broadcast;
  p.shape_ = shape;
  p.threads_ = threads;
  int64_t n = product(shape, 0, shape.size());
  p.axes_ = {Axis{n, {Digit{"e", n, false, 1}}}};
  p.replicas_ = {Digit{"copy", threads, true, 1}};
  p.rows_ = n;
  p.row_groups_ = threads;
  return p;
}

TilePartition TilePartition::given(const std::vector<int64_t>& shape, int64_t threads, std::vector<Axis> axes,
                                   std::vector<Digit> replicas, std::string& why) {
  TilePartition p;
  p.kind_ = Kind::Given;
  p.shape_ = shape;
  p.threads_ = threads;
  int64_t elements = product(shape, 0, shape.size());
  if (axes.empty() || axes.size() > 2 || (axes.size() == 2 && shape.size() < 2)) {
    why = "malformed digits";
    return p;
  }
  int64_t covered = 1;
  for (auto& a : axes) covered *= a.extent;
  if (covered != elements || (axes.size() == 2 && axes[1].extent != shape.back())) {
    why = "its axes do not cover the tile";
    return p;
  }
  // Thread digits (axes' and copies') must tile [0, used threads) without overlap; the
  // gaps between them and the threads above become replica digits.
  std::vector<Digit> on_thread = replicas, local;
  for (auto& a : axes) {
    int64_t span = 1;
    for (auto& d : a.digits) span *= d.extent;
    if (span != a.extent) {
      why = "an axis's digits do not multiply to its extent";
      return p;
    }
    for (auto& d : a.digits) (d.on_thread ? on_thread : local).push_back(d);
  }
  auto by_stride = [](const Digit& x, const Digit& y) { return x.stride < y.stride; };
  std::sort(on_thread.begin(), on_thread.end(), by_stride);
  std::sort(local.begin(), local.end(), by_stride);
  int64_t next = 1;
  for (auto& d : local) {
    if (d.extent == 1) continue;
    if (d.stride != next) {
      why = "its slots leave gaps or overlap (slot strides must number each thread's elements 0, 1, 2, ...)";
      return p;
    }
    next *= d.extent;
  }
  next = 1;
  int gaps = 0;
  for (auto& d : on_thread) {
    if (d.extent == 1) continue;
    if (d.stride < next || d.stride % next != 0) {
      why = "two of its elements (or copies) fall on the same thread and slot";
      return p;
    }
    if (d.stride > next) replicas.push_back(Digit{"gap" + std::to_string(gaps++), d.stride / next, true, next});
    next = d.stride * d.extent;
  }
  if (next > threads || threads % next != 0) {
    why = "it uses threads 0.." + std::to_string(next - 1) + ", which does not divide the " +
          std::to_string(threads) + " threads that run it";
    return p;
  }
  if (next < threads) replicas.push_back(Digit{"above", threads / next, true, next});
  p.axes_ = std::move(axes);
  p.replicas_ = std::move(replicas);
  return p;
}

Expr TilePartition::digit_of_thread(const Digit& d, const Expr& t, int64_t threads, Span sp) {
  Expr q = d.stride == 1 ? t : floordiv(t, c(d.stride), sp);
  return d.stride * d.extent >= threads ? q : floormod(q, c(d.extent), sp);
}

Expr TilePartition::first_replica(const Expr& t, Span sp) const {
  Expr cond;
  for (auto& d : replicas_) {
    if (d.extent == 1) continue;
    Expr is0 = binary(BinaryOp::EQ, digit_of_thread(d, t, threads_, sp), c(0), sp);
    cond = cond ? land(cond, is0, sp) : is0;
  }
  return cond;
}

int64_t TilePartition::local_size() const {
  int64_t n = 1;
  for (auto& a : axes_)
    for (auto& d : a.digits)
      if (!d.on_thread) n *= d.extent;
  return n;
}

int64_t TilePartition::replicas() const {
  int64_t n = 1;
  for (auto& d : replicas_) n *= d.extent;
  return n;
}

std::vector<Expr> TilePartition::axis_values(const std::vector<Expr>& index, Span sp) const {
  if (is_2d() && shape_.back() == axes_[1].extent) {
    std::vector<int64_t> leading(shape_.begin(), shape_.end() - 1);
    std::vector<Expr> lead_idx(index.begin(), index.end() - 1);
    return {flatten(lead_idx, leading, sp), index.back()};
  }
  std::vector<int64_t> extents;
  for (auto& a : axes_) extents.push_back(a.extent);
  return unflatten(flatten(index, shape_, sp), extents, sp);
}

std::vector<Expr> TilePartition::logical_index(const std::vector<Expr>& values, Span sp) const {
  if (is_2d() && shape_.back() == axes_[1].extent) {
    std::vector<int64_t> leading(shape_.begin(), shape_.end() - 1);
    std::vector<Expr> out = unflatten(values[0], leading, sp);
    out.push_back(values[1]);
    return out;
  }
  std::vector<int64_t> extents;
  for (auto& a : axes_) extents.push_back(a.extent);
  return unflatten(flatten(values, extents, sp), shape_, sp);
}

int64_t TilePartition::thread_of(const std::vector<int64_t>& index, int64_t rep) const {
  std::vector<int64_t> extents;
  for (auto& a : axes_) extents.push_back(a.extent);
  std::vector<int64_t> values = unflatten(flatten(index, shape_), extents);
  int64_t t = 0;
  for (size_t a = 0; a < axes_.size(); ++a) {
    auto dv = split_digits(values[a], axes_[a].digits);
    for (size_t k = 0; k < dv.size(); ++k)
      if (axes_[a].digits[k].on_thread) t += dv[k] * axes_[a].digits[k].stride;
  }
  auto rv = split_digits(rep, replicas_);
  for (size_t k = 0; k < rv.size(); ++k) t += rv[k] * replicas_[k].stride;
  return t;
}

Expr TilePartition::local_index(const std::vector<Expr>& index) const {
  Span sp = index.empty() ? Span{} : index[0]->span;
  std::vector<Expr> values = axis_values(index, sp);
  Expr slot = c(0);
  for (size_t a = 0; a < axes_.size(); ++a) {
    auto dv = split_digits(values[a], axes_[a].digits, sp);
    for (size_t k = 0; k < dv.size(); ++k) {
      const Digit& d = axes_[a].digits[k];
      if (!d.on_thread && d.extent > 1) slot = add(slot, d.stride == 1 ? dv[k] : mul(dv[k], c(d.stride), sp), sp);
    }
  }
  return slot;
}

TilePartition::Owned TilePartition::owned_by(const Expr& t, const std::string& prefix, Span sp) const {
  Owned o;
  std::vector<Expr> values;
  for (auto& a : axes_) {
    Expr v = c(0);
    int64_t place = digits_span(a);
    for (auto& d : a.digits) {
      place /= d.extent;
      Expr dv;
      if (d.on_thread) {
        dv = digit_of_thread(d, t, threads_, sp);
      } else {
        o.vars.push_back(make_var(prefix + "_" + d.name, DataType::Int(32), sp));
        o.extents.push_back(d.extent);
        dv = o.vars.back();
      }
      v = add(v, place == 1 ? dv : mul(dv, c(place), sp), sp);
    }
    if (digits_span(a) > a.extent) {
      Expr inside = lt(v, c(a.extent), sp);
      o.exists = o.exists ? land(o.exists, inside, sp) : inside;
    }
    values.push_back(v);
  }
  o.index = logical_index(values, sp);
  return o;
}

namespace {
// Adjacent digits (most significant first) of one kind whose strides continue each other
// are one digit; unit digits change nothing.
std::vector<TilePartition::Digit> merged(const std::vector<TilePartition::Digit>& digits) {
  std::vector<TilePartition::Digit> out;
  for (auto& d : digits) {
    if (d.extent == 1) continue;
    if (!out.empty() && out.back().on_thread == d.on_thread && out.back().stride == d.stride * d.extent) {
      out.back().extent *= d.extent;
      out.back().stride = d.stride;
    } else {
      out.push_back(d);
    }
  }
  return out;
}
}  // namespace

std::vector<TilePartition::Axis> TilePartition::canonical_axes() const {
  std::vector<Axis> out;
  for (auto& a : axes_) out.push_back(Axis{a.extent, merged(a.digits)});
  return out;
}

std::vector<TilePartition::Digit> TilePartition::canonical_replicas() const {
  std::vector<Digit> sorted = replicas_;  // copies have no order: most significant first
  std::sort(sorted.begin(), sorted.end(), [](const Digit& x, const Digit& y) { return x.stride > y.stride; });
  return merged(sorted);
}

bool TilePartition::operator==(const TilePartition& o) const {
  return shape_ == o.shape_ && threads_ == o.threads_ && canonical_axes() == o.canonical_axes() &&
         canonical_replicas() == o.canonical_replicas();
}

std::string TilePartition::str() const {
  std::ostringstream os;
  const char* names[] = {"grid", "mma", "row-replicated", "col-replicated", "broadcast", "given"};
  os << names[int(kind_)] << "(";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? "x" : "") << shape_[i];
  os << " over " << threads_ << " threads:";
  auto digit = [&](const Digit& d) {
    os << " " << d.name << d.extent;
    if (d.on_thread) os << "@t" << d.stride;
  };
  const char* axis_names[] = {"rows", "cols"};
  for (size_t a = 0; a < axes_.size(); ++a) {
    os << (a ? ";" : "") << " " << (axes_.size() == 2 ? axis_names[a] : "elements") << " " << axes_[a].extent << " =";
    for (auto& d : axes_[a].digits) digit(d);
  }
  if (!replicas_.empty()) {
    os << "; copies";
    for (auto& d : replicas_) digit(d);
  }
  os << ")";
  return os.str();
}

}  // namespace tl
