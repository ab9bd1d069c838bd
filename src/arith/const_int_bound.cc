#include "arith/const_int_bound.h"

#include <algorithm>
#include <cstdlib>

#include "arith/int_math.h"

namespace tl::arith {

namespace {
using Bound = ConstIntBound;

constexpr Bound kEverything{kNegInf, kPosInf};
constexpr Bound kBoolUnknown{0, 1};

bool is_inf(int64_t v) { return v == kNegInf || v == kPosInf; }

int64_t saturate(__int128 v) {
  if (v >= __int128(kPosInf)) return kPosInf;
  if (v <= __int128(kNegInf)) return kNegInf;
  return int64_t(v);
}

// Ends of a sum: an unbounded end stays unbounded, whatever the other side adds.
int64_t add_lower(int64_t a, int64_t b) {
  if (a == kNegInf || b == kNegInf) return kNegInf;
  if (a == kPosInf || b == kPosInf) return kPosInf;
  return saturate(__int128(a) + b);
}
int64_t add_upper(int64_t a, int64_t b) {
  if (a == kPosInf || b == kPosInf) return kPosInf;
  if (a == kNegInf || b == kNegInf) return kNegInf;
  return saturate(__int128(a) + b);
}
int64_t negate(int64_t v) {
  if (v == kNegInf) return kPosInf;
  if (v == kPosInf) return kNegInf;
  return -v;
}

// An unbounded end times a nonzero value stays unbounded; inf * 0 = 0, since every actual
// value is finite.
int64_t mul_point(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (is_inf(a) || is_inf(b)) return (a < 0) != (b < 0) ? kNegInf : kPosInf;
  return saturate(__int128(a) * b);
}

// x / y at one corner of the rectangle (y != 0). An infinite end divided by a finite one stays
// infinite; a finite value divided by an unbounded one tends to 0 (or -1 for floor division of
// opposite signs).
int64_t div_point(int64_t x, int64_t y, bool floor) {
  bool negative = (x < 0) != (y < 0);
  if (is_inf(x)) return negative ? kNegInf : kPosInf;
  if (is_inf(y)) return (floor && x != 0 && negative) ? -1 : 0;
  return floor ? floordiv_int(x, y) : x / y;
}

void extend(Bound* b, int64_t v) {
  b->min = std::min(b->min, v);
  b->max = std::max(b->max, v);
}

// Division is monotone in each operand on each side of 0, so its extremes lie at corners.
Bound bound_div(Bound a, Bound b, bool floor) {
  Bound out{kPosInf, kNegInf};
  bool any = false;
  auto corners = [&](int64_t lo, int64_t hi) {
    for (int64_t x : {a.min, a.max})
      for (int64_t y : {lo, hi}) extend(&out, div_point(x, y, floor));
    any = true;
  };
  if (b.min < 0) corners(b.min, std::min<int64_t>(b.max, -1));
  if (b.max > 0) corners(std::max<int64_t>(b.min, 1), b.max);
  return any ? out : kEverything;  // division by zero only: undefined
}

// Truncating remainder: its magnitude is below |b| and its sign is a's.
Bound bound_truncmod(Bound a, Bound b) {
  if (b.min == 0 && b.max == 0) return kEverything;
  int64_t magnitude = std::max(b.min == kNegInf ? kPosInf : std::abs(b.min), b.max);
  int64_t limit = magnitude == kPosInf ? kPosInf : magnitude - 1;
  int64_t lo = a.min >= 0 ? 0 : std::max(a.min, negate(limit));
  int64_t hi = a.max <= 0 ? 0 : std::min(a.max, limit);
  return {lo, hi};
}

// Floor remainder: it takes the divisor's sign.
Bound bound_floormod(Bound a, Bound b) {
  if (b.is_const() && b.min != 0 && !is_inf(a.min) && !is_inf(a.max) && !is_inf(b.min)) {
    int64_t c = b.min;
    // Within one period the remainder grows with a.
    if (floordiv_int(a.min, c) == floordiv_int(a.max, c))
      return {floormod_int(a.min, c), floormod_int(a.max, c)};
  }
  if (b.min > 0) {
    int64_t hi = b.max == kPosInf ? kPosInf : b.max - 1;
    if (a.min >= 0) hi = std::min(hi, a.max);
    return {0, hi};
  }
  if (b.max < 0) {
    int64_t lo = b.min == kNegInf ? kNegInf : b.min + 1;
    if (a.max <= 0) lo = std::max(lo, a.min);
    return {lo, 0};
  }
  if (b.min == 0 && b.max == 0) return kEverything;
  return {b.min == kNegInf ? kNegInf : std::min<int64_t>(0, b.min + 1),
          b.max == kPosInf ? kPosInf : std::max<int64_t>(0, b.max - 1)};
}

// The smallest k such that every value of b lies in [-2^k, 2^k - 1]; 64 when there is none
// below 63 (unbounded ends).
int width_of(Bound b) {
  if (is_inf(b.min) || is_inf(b.max)) return 64;
  int k = 0;
  while (k < 63 && !(b.min >= -(int64_t(1) << k) && b.max <= (int64_t(1) << k) - 1)) ++k;
  return k;
}

// a & b, a | b, a ^ b of two's complement values. Within [-2^k, 2^k) the bits above k are all
// copies of the sign bit, so every result stays there too; the signs of the operands say more.
Bound bound_bitwise(BinaryOp op, Bound a, Bound b) {
  int k = std::max(width_of(a), width_of(b));
  Bound span = k >= 63 ? kEverything : Bound{-(int64_t(1) << k), (int64_t(1) << k) - 1};
  bool a_nonneg = a.min >= 0, b_nonneg = b.min >= 0;
  bool a_neg = a.max < 0, b_neg = b.max < 0;
  switch (op) {
    case BinaryOp::BitAnd:
      // Clearing bits of a non-negative value keeps it in [0, value].
      if (a_nonneg && b_nonneg) return {0, std::min(a.max, b.max)};
      if (a_nonneg) return {0, a.max};
      if (b_nonneg) return {0, b.max};
      // Both negative: the sign stays, and clearing bits only lowers the value.
      if (a_neg && b_neg) return {span.min, std::min(a.max, b.max)};
      return span;
    case BinaryOp::BitOr:
      // Setting bits of a value raises it, up to (for non-negative values) their sum.
      if (a_nonneg && b_nonneg) {
        int64_t sum = add_upper(a.max, b.max);
        return {std::max(a.min, b.min), std::min(span.max, sum)};
      }
      if (a_neg && b_neg) return {std::max(a.min, b.min), -1};
      if (a_neg) return {a.min, -1};
      if (b_neg) return {b.min, -1};
      return span;
    default:  // BitXor
      if ((a_nonneg && b_nonneg) || (a_neg && b_neg)) return {0, span.max};
      if ((a_nonneg && b_neg) || (a_neg && b_nonneg)) return {span.min, -1};
      return span;
  }
}

// 2^lo .. 2^hi for a shift amount in [lo, hi] below `bits`; nothing for an amount that may be
// out of range (the shift is then undefined).
bool shift_factor(Bound amount, int bits, Bound* factor) {
  if (amount.min < 0 || amount.max >= bits || amount.max >= 63) return false;
  *factor = {int64_t(1) << amount.min, int64_t(1) << amount.max};
  return true;
}

bool surely_true(Bound b) { return b.min > 0 || b.max < 0; }
bool surely_false(Bound b) { return b.min == 0 && b.max == 0; }

Bound from_decision(int decided) { return decided < 0 ? kBoolUnknown : Bound{decided, decided}; }

bool within(Bound inner, Bound outer) { return inner.min >= outer.min && inner.max <= outer.max; }
}  // namespace

ConstIntBound bound_add(ConstIntBound a, ConstIntBound b) {
  return {add_lower(a.min, b.min), add_upper(a.max, b.max)};
}
ConstIntBound bound_sub(ConstIntBound a, ConstIntBound b) {
  return bound_add(a, {negate(b.max), negate(b.min)});
}
ConstIntBound bound_mul(ConstIntBound a, ConstIntBound b) {
  Bound out{kPosInf, kNegInf};
  for (int64_t x : {a.min, a.max})
    for (int64_t y : {b.min, b.max}) extend(&out, mul_point(x, y));
  return out;
}
ConstIntBound bound_union(ConstIntBound a, ConstIntBound b) {
  return {std::min(a.min, b.min), std::max(a.max, b.max)};
}

int decide_comparison(BinaryOp op, ConstIntBound d) {
  switch (op) {
    case BinaryOp::EQ:
      if (d.min == 0 && d.max == 0) return 1;
      return (d.min > 0 || d.max < 0) ? 0 : -1;
    case BinaryOp::NE:
      if (d.min == 0 && d.max == 0) return 0;
      return (d.min > 0 || d.max < 0) ? 1 : -1;
    case BinaryOp::LT: return d.max < 0 ? 1 : d.min >= 0 ? 0 : -1;
    case BinaryOp::LE: return d.max <= 0 ? 1 : d.min > 0 ? 0 : -1;
    case BinaryOp::GT: return d.min > 0 ? 1 : d.max <= 0 ? 0 : -1;
    case BinaryOp::GE: return d.min >= 0 ? 1 : d.max < 0 ? 0 : -1;
    default: return -1;
  }
}

ConstIntBound ConstIntBoundAnalyzer::operator()(const Expr& e) const {
  Bound r = visit(e);
  if (!is_scalar_int(e->dtype)) return r;
  Bound range = dtype_range(e->dtype);
  if (r.min > r.max) return range;
  // A signed index type never leaves its range (no overflow); a wrapping type that might
  // leave it can hold anything.
  if (assumes_no_overflow(e->dtype) || e->dtype.is_bool()) {
    Bound clamped{std::max(r.min, range.min), std::min(r.max, range.max)};
    return clamped.min <= clamped.max ? clamped : range;
  }
  return within(r, range) ? r : range;
}

ConstIntBound ConstIntBoundAnalyzer::bound_of(const LinearForm& f) const {
  if (f.overflow) return kEverything;
  Bound acc{f.constant, f.constant};
  for (auto& t : f.terms) acc = bound_add(acc, bound_mul((*this)(t.atom), {t.coeff, t.coeff}));
  return acc;
}

ConstIntBound ConstIntBoundAnalyzer::bound_of_difference(const Expr& a, const Expr& b) const {
  LinearForm d = linear_form(a);
  d.add(linear_form(b), -1);
  return bound_of(d);
}

ConstIntBound ConstIntBoundAnalyzer::visit(const Expr& e) const {
  DataType t = e->dtype;
  switch (e->kind) {
    case ExprKind::IntImm: {
      int64_t v = static_cast<const IntImmNode*>(e.get())->value;
      return {v, v};
    }
    case ExprKind::Var: {
      auto it = vars_.find(static_cast<const VarNode*>(e.get()));
      if (it != vars_.end()) return it->second;
      return is_scalar_int(t) ? dtype_range(t) : kEverything;
    }
    case ExprKind::Binary:
      return visit_binary(e, static_cast<const BinaryNode*>(e.get()));
    case ExprKind::Not: {
      Bound a = (*this)(static_cast<const NotNode*>(e.get())->a);
      if (surely_false(a)) return {1, 1};
      if (surely_true(a)) return {0, 0};
      return kBoolUnknown;
    }
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      if (!is_scalar_int(t)) return kEverything;
      Bound c = (*this)(n->cond);
      if (surely_true(c)) return (*this)(n->true_value);
      if (surely_false(c)) return (*this)(n->false_value);
      return bound_union((*this)(n->true_value), (*this)(n->false_value));
    }
    case ExprKind::Cast: {
      auto* n = static_cast<const CastNode*>(e.get());
      if (!is_scalar_int(t)) return kEverything;
      if (!is_scalar_int(n->value->dtype)) return dtype_range(t);  // float -> int: out of range is undefined
      Bound v = (*this)(n->value);
      if (t.is_bool()) return surely_false(v) ? Bound{0, 0} : surely_true(v) ? Bound{1, 1} : kBoolUnknown;
      Bound range = dtype_range(t);
      return within(v, range) ? v : range;
    }
    default:
      return is_scalar_int(t) ? dtype_range(t) : kEverything;
  }
}

ConstIntBound ConstIntBoundAnalyzer::visit_comparison(const BinaryNode* n) const {
  DataType t = n->a->dtype;
  if (!is_scalar_int(t)) {
    auto* x = as<FloatImmNode>(n->a);
    auto* y = as<FloatImmNode>(n->b);
    if (!x || !y) return kBoolUnknown;
    double a = x->value, b = y->value;
    bool r = false;
    switch (n->op) {
      case BinaryOp::EQ: r = a == b; break;
      case BinaryOp::NE: r = a != b; break;
      case BinaryOp::LT: r = a < b; break;
      case BinaryOp::LE: r = a <= b; break;
      case BinaryOp::GT: r = a > b; break;
      default: r = a >= b; break;
    }
    return {r, r};
  }
  Bound d = assumes_no_overflow(t) ? bound_of_difference(n->a, n->b)
                                   : bound_sub((*this)(n->a), (*this)(n->b));
  return from_decision(decide_comparison(n->op, d));
}

ConstIntBound ConstIntBoundAnalyzer::visit_binary(const Expr& e, const BinaryNode* n) const {
  if (is_comparison(n->op)) return visit_comparison(n);
  if (is_logical(n->op)) {
    Bound a = (*this)(n->a), b = (*this)(n->b);
    if (n->op == BinaryOp::And) {
      if (surely_false(a) || surely_false(b)) return {0, 0};
      return surely_true(a) && surely_true(b) ? Bound{1, 1} : kBoolUnknown;
    }
    if (surely_true(a) || surely_true(b)) return {1, 1};
    return surely_false(a) && surely_false(b) ? Bound{0, 0} : kBoolUnknown;
  }
  if (!is_scalar_int(n->dtype)) return kEverything;
  bool linear_op = n->op == BinaryOp::Add || n->op == BinaryOp::Sub || n->op == BinaryOp::Mul;
  if (linear_op && assumes_no_overflow(n->dtype)) {
    // Through the linear form, shared terms cancel: x*2 - x is bounded like x.
    LinearForm f = linear_form(e);
    if (!f.overflow && !(f.is_single_atom() && f.terms[0].atom.get() == e.get())) return bound_of(f);
  }
  Bound a = (*this)(n->a), b = (*this)(n->b);
  switch (n->op) {
    case BinaryOp::Add: return bound_add(a, b);
    case BinaryOp::Sub: return bound_sub(a, b);
    case BinaryOp::Mul: return bound_mul(a, b);
    case BinaryOp::Div: return bound_div(a, b, false);
    case BinaryOp::Mod: return bound_truncmod(a, b);
    case BinaryOp::FloorDiv: return bound_div(a, b, true);
    case BinaryOp::FloorMod: return bound_floormod(a, b);
    case BinaryOp::Min: return {std::min(a.min, b.min), std::min(a.max, b.max)};
    case BinaryOp::Max: return {std::max(a.min, b.min), std::max(a.max, b.max)};
    case BinaryOp::BitXor: {
      // ~x, stored as x ^ all-ones: -1 - x for signed types, max - x for unsigned ones.
      const int64_t* c = const_int(n->b);
      Bound range = dtype_range(n->dtype);
      if (c && n->dtype.is_int() && *c == -1) return bound_sub({-1, -1}, a);
      if (c && n->dtype.is_uint() && n->dtype.bits < 64 && *c == range.max) return bound_sub({range.max, range.max}, a);
      return bound_bitwise(n->op, a, b);
    }
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr: return bound_bitwise(n->op, a, b);
    case BinaryOp::ShiftLeft:
    case BinaryOp::ShiftRight: {
      // x << s is x * 2^s and x >> s is floordiv(x, 2^s) (arithmetic for signed x), as long as
      // the product stays inside the type (then nothing wrapped).
      Bound factor;
      if (!shift_factor(b, n->dtype.bits, &factor)) return dtype_range(n->dtype);
      Bound r = n->op == BinaryOp::ShiftLeft ? bound_mul(a, factor) : bound_div(a, factor, true);
      return within(r, dtype_range(n->dtype)) ? r : dtype_range(n->dtype);
    }
    default: return dtype_range(n->dtype);
  }
}

}  // namespace tl::arith
