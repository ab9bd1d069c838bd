#include "arith/rewrite_simplify.h"

#include <cmath>
#include <optional>

#include "arith/expr_equal.h"
#include "arith/int_math.h"
#include "ir/op.h"

namespace tl::arith {

namespace {
Expr make_binary(BinaryOp op, DataType t, Expr a, Expr b) {
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b));
}
Expr make_bool_const(bool v) { return std::make_shared<IntImmNode>(DataType::Bool(), v); }

const BinaryNode* as_binary(const Expr& e, BinaryOp op) {
  auto* n = as<BinaryNode>(e);
  return n && n->op == op ? n : nullptr;
}

bool in_range(DataType t, int64_t v) {
  ConstIntBound r = dtype_range(t);
  return v >= r.min && v <= r.max;
}

// Folds op on two constants of operand type t with that type's semantics (uint64 values are
// kept as their bit pattern). Nothing for a division by zero or a signed overflow of division.
std::optional<int64_t> fold_int(BinaryOp op, DataType t, int64_t x, int64_t y) {
  bool u64 = t.is_uint() && t.bits >= 64;
  uint64_t ux = uint64_t(x), uy = uint64_t(y);
  auto less = [&](int64_t p, int64_t q) { return u64 ? uint64_t(p) < uint64_t(q) : p < q; };
  switch (op) {
    case BinaryOp::Add: return wrap_to(t, int64_t(ux + uy));
    case BinaryOp::Sub: return wrap_to(t, int64_t(ux - uy));
    case BinaryOp::Mul: return wrap_to(t, int64_t(ux * uy));
    case BinaryOp::Div:
    case BinaryOp::Mod:
    case BinaryOp::FloorDiv:
    case BinaryOp::FloorMod: {
      if (y == 0) return std::nullopt;
      bool quotient = op == BinaryOp::Div || op == BinaryOp::FloorDiv;
      if (u64) return int64_t(quotient ? ux / uy : ux % uy);
      if (x == kNegInf && y == -1) return std::nullopt;
      int64_t r = op == BinaryOp::Div ? x / y
                  : op == BinaryOp::Mod ? x % y
                  : op == BinaryOp::FloorDiv ? floordiv_int(x, y)
                                             : floormod_int(x, y);
      return wrap_to(t, r);
    }
    case BinaryOp::Min: return less(x, y) ? x : y;
    case BinaryOp::Max: return less(x, y) ? y : x;
    case BinaryOp::EQ: return x == y;
    case BinaryOp::NE: return x != y;
    case BinaryOp::LT: return less(x, y);
    case BinaryOp::LE: return !less(y, x);
    case BinaryOp::GT: return less(y, x);
    case BinaryOp::GE: return !less(x, y);
    case BinaryOp::And: return x && y;
    case BinaryOp::Or: return x || y;
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr:
    case BinaryOp::BitXor:
    case BinaryOp::ShiftLeft:
    case BinaryOp::ShiftRight: return fold_bitwise(op, t, x, y);  // nothing for an out-of-range shift
  }
  return std::nullopt;
}

// Whether v is exactly a value of the float type t (only float32 and float64 are folded).
bool exact_in(DataType t, double v) {
  if (t.code != TypeCode::Float || !std::isfinite(v)) return false;
  if (t.bits == 64) return true;
  return t.bits == 32 && double(float(v)) == v;
}

// x op y for float constants, only when the real result needs no rounding: then every
// evaluation order and precision gives this same value.
std::optional<double> fold_float_exact(BinaryOp op, DataType t, double x, double y) {
  if (!exact_in(t, x) || !exact_in(t, y)) return std::nullopt;
  double r = 0;
  bool exact = false;
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      double b = op == BinaryOp::Add ? y : -y;
      r = x + b;
      double b_virtual = r - x;  // two-sum: the rounding error of x + b, computed exactly
      exact = (x - (r - b_virtual)) + (b - b_virtual) == 0;
      break;
    }
    case BinaryOp::Mul:
      r = x * y;
      exact = std::fma(x, y, -r) == 0;
      break;
    case BinaryOp::Div:
      if (y == 0) return std::nullopt;
      r = x / y;
      exact = std::fma(r, y, -x) == 0;
      break;
    default:
      return std::nullopt;
  }
  if (!exact || !exact_in(t, r)) return std::nullopt;
  return r;
}

BinaryOp negate_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::EQ: return BinaryOp::NE;
    case BinaryOp::NE: return BinaryOp::EQ;
    case BinaryOp::LT: return BinaryOp::GE;
    case BinaryOp::LE: return BinaryOp::GT;
    case BinaryOp::GT: return BinaryOp::LE;
    default: return BinaryOp::LT;  // GE
  }
}

// Whether x is the negation of y: not(y), or the opposite comparison of the same operands.
bool negates(const Expr& x, const Expr& y) {
  if (auto* m = as<NotNode>(x); m && expr_equal(m->a, y)) return true;
  if (auto* m = as<NotNode>(y); m && expr_equal(m->a, x)) return true;
  auto* cx = as<BinaryNode>(x);
  auto* cy = as<BinaryNode>(y);
  if (!cx || !cy || !is_comparison(cx->op) || !is_comparison(cy->op)) return false;
  bool integer = is_scalar_int(cx->a->dtype);
  if (!integer && cx->op != BinaryOp::EQ && cx->op != BinaryOp::NE) return false;
  return negate_comparison(cx->op) == cy->op && expr_equal(cx->a, cy->a) && expr_equal(cx->b, cy->b);
}

// Whether every value of `to` survives a round trip through `via`.
bool holds_all_values(DataType via, DataType to) {
  if (!via.is_integer() || via.lanes != 1 || to.lanes != 1) return false;
  if (to.is_bool()) return true;
  if (!to.is_integer()) return false;
  if (via.is_int() == to.is_int()) return via.bits >= to.bits;
  return via.is_int() && via.bits > to.bits;  // unsigned inside a wider signed type
}

// Replaces floormod(X, c) * k + floordiv(X, c) * (k * c) by X * k (also for truncating div/mod),
// the identity that undoes splitting an index into quotient and remainder.
void recombine_div_mod(LinearForm* f) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < f->terms.size() && !again; ++i) {
      auto* rem = as<BinaryNode>(f->terms[i].atom);
      if (!rem || (rem->op != BinaryOp::FloorMod && rem->op != BinaryOp::Mod)) continue;
      const int64_t* c = const_int(rem->b);
      if (!c || *c == 0) continue;
      BinaryOp quotient_op = rem->op == BinaryOp::FloorMod ? BinaryOp::FloorDiv : BinaryOp::Div;
      int64_t k = f->terms[i].coeff;
      int64_t want;
      if (__builtin_mul_overflow(k, *c, &want)) continue;
      for (size_t j = 0; j < f->terms.size(); ++j) {
        auto* quo = as_binary(f->terms[j].atom, quotient_op);
        if (!quo || f->terms[j].coeff != f->plus(0, want) || !expr_equal(quo->b, rem->b) ||
            !expr_equal(quo->a, rem->a))
          continue;
        Expr x = rem->a;
        f->terms.erase(f->terms.begin() + std::max(i, j));
        f->terms.erase(f->terms.begin() + std::min(i, j));
        f->add(linear_form(x), k);
        again = true;
        break;
      }
    }
  }
}
}  // namespace

Expr RewriteSimplifier::rebuild(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  if (a == n->a && b == n->b) return e;
  return make_binary(n->op, n->dtype, std::move(a), std::move(b));
}

Expr RewriteSimplifier::fold_if_known(const Expr& e) const {
  if (!is_scalar_int(e->dtype) || e->kind == ExprKind::IntImm) return e;
  ConstIntBound b = bound_(e);
  if (!b.is_const() || b.min == kNegInf || b.min == kPosInf) return e;
  return make_const(e->dtype, b.min);
}

Expr RewriteSimplifier::visit(const Expr& e) const {
  // Hand back the original node when nothing changed, so unchanged trees stay shared.
  Expr r = visit_node(e);
  return r != e && expr_equal(r, e) ? e : r;
}

Expr RewriteSimplifier::visit_node(const Expr& e) const {
  switch (e->kind) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::StringImm:
      return e;
    case ExprKind::Var:
      return fold_if_known(e);
    case ExprKind::Binary:
      return fold_if_known(visit_binary(e, static_cast<const BinaryNode*>(e.get())));
    case ExprKind::Not:
      return fold_if_known(logical_not(e, visit(static_cast<const NotNode*>(e.get())->a)));
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return fold_if_known(select(e, visit(n->cond), visit(n->true_value), visit(n->false_value)));
    }
    case ExprKind::Cast: {
      auto* n = static_cast<const CastNode*>(e.get());
      return fold_if_known(cast(e, n->dtype, visit(n->value)));
    }
    case ExprKind::BufferLoad: {
      auto* n = static_cast<const BufferLoadNode*>(e.get());
      std::vector<Expr> indices;
      bool changed = false;
      for (auto& i : n->indices) {
        indices.push_back(visit(i));
        changed |= indices.back() != i;
      }
      if (!changed) return e;
      return std::make_shared<BufferLoadNode>(n->dtype, n->buffer, std::move(indices), n->span);
    }
    case ExprKind::Call: {
      auto* n = static_cast<const CallNode*>(e.get());
      std::vector<Expr> args;
      bool changed = false;
      for (auto& a : n->args) {
        args.push_back(visit(a));
        changed |= args.back() != a;
      }
      if (!changed) return e;
      return std::make_shared<CallNode>(n->dtype, n->op, std::move(args), n->span);
    }
  }
  return e;
}

Expr RewriteSimplifier::visit_binary(const Expr& e, const BinaryNode* n) const {
  Expr a = visit(n->a), b = visit(n->b);
  if (is_logical(n->op)) return logical(e, n, a, b);
  if (is_comparison(n->op)) return comparison(e, n, a, b);
  DataType t = n->dtype;
  if (a->dtype != t || b->dtype != t || t.lanes != 1) return rebuild(e, n, a, b);
  if (t.is_float()) return float_arith(e, n, a, b);
  if (!t.is_integer()) return rebuild(e, n, a, b);

  const int64_t* ca = const_int(a);
  const int64_t* cb = const_int(b);
  if (ca && cb) {
    if (auto r = fold_int(n->op, t, *ca, *cb)) return make_const(t, *r);
    return rebuild(e, n, a, b);
  }
  switch (n->op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul: {
      Expr node = rebuild(e, n, a, b);
      LinearForm f = linear_form(node);
      return f.overflow ? node : canonical(std::move(f));
    }
    case BinaryOp::FloorDiv:
      return cb && *cb != 0 ? floordiv_const(a, *cb) : rebuild(e, n, a, b);
    case BinaryOp::FloorMod:
      return cb && *cb != 0 ? floormod_const(a, *cb) : rebuild(e, n, a, b);
    case BinaryOp::Div:
    case BinaryOp::Mod:
      return trunc_div_mod(e, n, a, b);
    case BinaryOp::Min:
    case BinaryOp::Max:
      return min_max(e, n, a, b);
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr:
    case BinaryOp::BitXor:
    case BinaryOp::ShiftLeft:
    case BinaryOp::ShiftRight:
      return bitwise(e, n, a, b);
    default:
      return rebuild(e, n, a, b);
  }
}

// Identities of the bit operations, exact in every integer type (they never look inside the
// bits of a non-constant operand, only at its bounds).
Expr RewriteSimplifier::bitwise(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  DataType t = n->dtype;
  BinaryOp op = n->op;
  int64_t ones = all_ones_value(t);
  const int64_t* ca = const_int(a);
  const int64_t* cb = const_int(b);
  if (ca && !cb && !is_shift(op)) {  // the constant on the right: & | ^ commute
    std::swap(a, b);
    std::swap(ca, cb);
  }
  if (is_shift(op)) {
    if (cb && *cb == 0) return a;
    if (ca && *ca == 0 && cb && *cb > 0 && *cb < t.bits) return a;  // 0 << c, 0 >> c
    return rebuild(e, n, a, b);
  }
  if (cb) {
    if (*cb == 0) return op == BinaryOp::BitAnd ? make_const(t, 0) : a;          // x & 0, x | 0, x ^ 0
    if (*cb == ones && op != BinaryOp::BitXor) return op == BinaryOp::BitAnd ? a : b;  // x & ~0, x | ~0
    // (x ^ c1) ^ c2 = x ^ (c1 ^ c2), and alike for & and |; ~~x = x.
    if (auto* inner = as<BinaryNode>(a); inner && inner->op == op && inner->dtype == t) {
      if (const int64_t* c1 = const_int(inner->b)) {
        int64_t c = *fold_bitwise(op, t, *c1, *cb);
        Expr combined = make_const(t, c);
        return bitwise(e, n, inner->a, combined);
      }
    }
    // x & (2^k - 1) is floormod(x, 2^k): x itself when 0 <= x < 2^k, a constant when x's
    // modular set fixes it.
    if (op == BinaryOp::BitAnd && *cb > 0 && *cb < kPosInf && ((*cb + 1) & *cb) == 0) {
      ConstIntBound ba = bound_(a);
      if (ba.min >= 0 && ba.max <= *cb) return a;
      ModularSet m = modular_(a);
      if (m.coeff % (*cb + 1) == 0) return make_const(t, floormod_int(m.base, *cb + 1));
    }
  }
  if (expr_equal(a, b)) return op == BinaryOp::BitXor ? make_const(t, 0) : a;  // x & x, x | x, x ^ x
  if (a == n->a && b == n->b) return e;
  return make_binary(op, t, std::move(a), std::move(b));
}

Expr RewriteSimplifier::canonical(LinearForm f) const {
  recombine_div_mod(&f);
  return to_expr(f);
}

// floordiv(a, c) for a constant c != 0.
Expr RewriteSimplifier::floordiv_const(const Expr& a, int64_t c) const {
  DataType t = a->dtype;
  if (auto* v = const_int(a)) {
    if (auto r = fold_int(BinaryOp::FloorDiv, t, *v, c)) return make_const(t, *r);
  }
  if (c == 1) return a;
  Expr plain = make_binary(BinaryOp::FloorDiv, t, a, make_const(t, c));
  if (!assumes_no_overflow(t)) return plain;
  LinearForm f = linear_form(a);
  if (f.overflow) return plain;
  if (c == -1) {
    f.scale(-1);
    return f.overflow ? plain : canonical(f);
  }
  // floordiv(q*c + r, c) = q + floordiv(r, c): exact for every sign, as q*c/c is an integer.
  LinearForm quotient(t), rest(t, f.constant);
  for (auto& term : f.terms) {
    if (term.coeff % c == 0) {
      quotient.add_term(term.atom, term.coeff / c);
    } else {
      rest.add_term(term.atom, term.coeff);
    }
  }
  if (!quotient.is_const()) {
    quotient.add(linear_form(floordiv_const(to_expr(rest), c)));
    return quotient.overflow ? plain : canonical(quotient);
  }
  ConstIntBound b = bound_(a);
  if (b.min != kNegInf && b.max != kPosInf) {
    int64_t lo = floordiv_int(b.min, c), hi = floordiv_int(b.max, c);
    if (lo == hi) return make_const(t, lo);
  }
  // floordiv(y + r, c) = floordiv(y, c) when r stays inside y's aligned block.
  if (Expr y = base_of_offset_in_block(f, c)) return floordiv_const(y, c);
  // A factor common to every term and the divisor cancels: floordiv(g*x, g*d) = floordiv(x, d).
  int64_t g = gcd_int(f.constant, c);
  for (auto& term : f.terms) g = gcd_int(g, term.coeff);
  if (g > 1 && g != kPosInf) {
    LinearForm reduced(t, f.constant / g);
    for (auto& term : f.terms) reduced.add_term(term.atom, term.coeff / g);
    return floordiv_const(to_expr(reduced), c / g);
  }
  if (f.is_single_atom() && c > 0) {
    auto* inner = as<BinaryNode>(f.terms[0].atom);
    const int64_t* c1 = inner && inner->dtype == t ? const_int(inner->b) : nullptr;
    if (c1 && *c1 != 0) {
      // floordiv(floordiv(x, c1), c) = floordiv(x, c1 * c) for c > 0.
      int64_t product;
      bool fits = !__builtin_mul_overflow(*c1, c, &product) && in_range(t, product);
      if (inner->op == BinaryOp::FloorDiv && fits)
        return floordiv_const(inner->a, product);
      // floordiv(floormod(x, c1), c) = floormod(floordiv(x, c), c1 / c) when c divides c1.
      if (inner->op == BinaryOp::FloorMod && *c1 > 0 && *c1 % c == 0)
        return floormod_const(floordiv_const(inner->a, c), *c1 / c);
    }
  }
  return plain;
}

// For f = y + r (r > 0 its constant, y the rest) and c > 0: y when the offset stays inside
// an aligned block, else null. With y = g k + b (its modular set) and g = gcd(that period,
// c) dividing c, floormod(y, c) is at most c - g + b, so when b + r < g, y + r lies in y's
// block of c: floordiv(y + r, c) = floordiv(y, c) and floormod(y + r, c) = floormod(y, c) + r
// (floordiv(2q + 1, 8) = floordiv(2q, 8): a vector's lanes under a layout by hand).
Expr RewriteSimplifier::base_of_offset_in_block(const LinearForm& f, int64_t c) const {
  if (c <= 0 || f.constant <= 0 || f.terms.empty()) return nullptr;
  LinearForm y(f.dtype);
  for (auto& term : f.terms) y.add_term(term.atom, term.coeff);
  Expr ye = to_expr(y);
  ModularSet m = modular_(ye);
  int64_t block = gcd_int(m.coeff, c);
  return block > 1 && floormod_int(m.base, block) + f.constant < block ? ye : nullptr;
}

// floormod(a, c) for a constant c != 0.
Expr RewriteSimplifier::floormod_const(const Expr& a, int64_t c) const {
  DataType t = a->dtype;
  if (auto* v = const_int(a)) {
    if (auto r = fold_int(BinaryOp::FloorMod, t, *v, c)) return make_const(t, *r);
  }
  if (c == 1 || c == -1) return make_const(t, 0);
  Expr plain = make_binary(BinaryOp::FloorMod, t, a, make_const(t, c));
  if (!assumes_no_overflow(t)) return plain;
  LinearForm f = linear_form(a);
  if (f.overflow) return plain;
  // Multiples of c do not change the remainder.
  LinearForm rest(t, floormod_int(f.constant, c));
  for (auto& term : f.terms)
    if (term.coeff % c != 0) rest.add_term(term.atom, term.coeff);
  if (rest.is_const()) return make_const(t, rest.constant);
  bool changed = rest.terms.size() != f.terms.size() || rest.constant != f.constant;
  Expr x = changed ? to_expr(rest) : a;
  // Within one period: floormod(x, c) = x - q*c.
  ConstIntBound b = bound_(x);
  if (b.min != kNegInf && b.max != kPosInf) {
    int64_t q = floordiv_int(b.min, c);
    if (q == floordiv_int(b.max, c)) {
      rest.add_constant(rest.times(-q, c));
      if (!rest.overflow) return canonical(rest);
    }
  }
  ModularSet m = modular_(x);
  if (m.coeff % c == 0) return make_const(t, floormod_int(m.base, c));
  // floormod(y + r, c) = floormod(y, c) + r when r stays inside y's aligned block.
  if (Expr y = base_of_offset_in_block(rest, c)) {
    LinearForm out = linear_form(floormod_const(y, c));
    out.add_constant(rest.constant);
    if (!out.overflow) return canonical(out);
  }
  // floormod(g*x, g*d) = g * floormod(x, d) for g > 0.
  int64_t g = gcd_int(rest.constant, c);
  for (auto& term : rest.terms) g = gcd_int(g, term.coeff);
  if (g > 1 && g != kPosInf) {
    LinearForm reduced(t, rest.constant / g);
    for (auto& term : rest.terms) reduced.add_term(term.atom, term.coeff / g);
    LinearForm out(t);
    out.add(linear_form(floormod_const(to_expr(reduced), c / g)), g);
    return canonical(out);
  }
  // floormod(floormod(x, c1), c) = floormod(x, c) when c divides c1.
  if (rest.is_single_atom()) {
    auto* inner = as_binary(rest.terms[0].atom, BinaryOp::FloorMod);
    const int64_t* c1 = inner && inner->dtype == t ? const_int(inner->b) : nullptr;
    if (c1 && *c1 != 0 && *c1 % c == 0) return floormod_const(inner->a, c);
  }
  return changed ? make_binary(BinaryOp::FloorMod, t, x, make_const(t, c)) : plain;
}

Expr RewriteSimplifier::trunc_div_mod(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  DataType t = n->dtype;
  bool is_div = n->op == BinaryOp::Div;
  if (!assumes_no_overflow(t)) return rebuild(e, n, a, b);
  const int64_t* cb = const_int(b);
  if (cb && *cb == 1) return is_div ? a : make_const(t, 0);
  ConstIntBound ba = bound_(a), bb = bound_(b);
  // With both sides non-negative, truncation and floor agree.
  if (ba.min >= 0 && bb.min >= 0) {
    if (cb && *cb != 0) return is_div ? floordiv_const(a, *cb) : floormod_const(a, *cb);
    return make_binary(is_div ? BinaryOp::FloorDiv : BinaryOp::FloorMod, t, a, b);
  }
  if (cb && *cb != 0 && *cb != kNegInf) {
    int64_t magnitude = *cb < 0 ? -*cb : *cb;
    if (ba.min > -magnitude && ba.max < magnitude) return is_div ? make_const(t, 0) : a;
  }
  return rebuild(e, n, a, b);
}

Expr RewriteSimplifier::min_max(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  DataType t = n->dtype;
  bool is_min = n->op == BinaryOp::Min;
  if (expr_equal(a, b)) return a;
  ConstIntBound d =
      assumes_no_overflow(t) ? bound_.bound_of_difference(a, b) : bound_sub(bound_(a), bound_(b));
  if (d.max <= 0) return is_min ? a : b;  // a <= b
  if (d.min >= 0) return is_min ? b : a;  // a >= b
  auto* inner_a = as<BinaryNode>(a);
  auto* inner_b = as<BinaryNode>(b);
  auto has_operand = [](const BinaryNode* m, const Expr& x) {
    return expr_equal(m->a, x) || expr_equal(m->b, x);
  };
  BinaryOp dual = is_min ? BinaryOp::Max : BinaryOp::Min;
  // min(min(x, y), x) = min(x, y);  min(max(x, y), x) = x  (and the mirrored forms).
  if (inner_a && inner_a->op == n->op && has_operand(inner_a, b)) return a;
  if (inner_b && inner_b->op == n->op && has_operand(inner_b, a)) return b;
  if (inner_a && inner_a->op == dual && has_operand(inner_a, b)) return b;
  if (inner_b && inner_b->op == dual && has_operand(inner_b, a)) return a;
  return rebuild(e, n, a, b);
}

Expr RewriteSimplifier::comparison(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  DataType t = a->dtype;
  if (b->dtype != t || t.lanes != 1) return rebuild(e, n, a, b);
  if (!is_scalar_int(t)) {
    auto* x = as<FloatImmNode>(a);
    auto* y = as<FloatImmNode>(b);
    if (!x || !y) return rebuild(e, n, a, b);
    return fold_if_known(make_binary(n->op, DataType::Bool(), a, b));  // the bound decides constants
  }
  const int64_t* ca = const_int(a);
  const int64_t* cb = const_int(b);
  if (ca && cb) return make_bool_const(*fold_int(n->op, t, *ca, *cb) != 0);
  if (!assumes_no_overflow(t)) {
    int decided = decide_comparison(n->op, bound_sub(bound_(a), bound_(b)));
    return decided >= 0 ? make_bool_const(decided) : rebuild(e, n, a, b);
  }
  LinearForm diff = linear_form(a);
  diff.add(linear_form(b), -1);
  if (diff.overflow) return rebuild(e, n, a, b);
  int decided = decide_comparison(n->op, bound_.bound_of(diff));
  if (decided >= 0) return make_bool_const(decided);
  if (n->op == BinaryOp::EQ || n->op == BinaryOp::NE) {
    ModularSet m = modular_(to_expr(diff));
    if (m.coeff > 0 && m.base != 0) return make_bool_const(n->op == BinaryOp::NE);  // never zero
  }
  Expr canon = canonical_comparison(n->op, diff);
  Expr same = rebuild(e, n, a, b);
  if (!canon || expr_equal(canon, same)) return same;
  return canon;
}

// Rewrites  sum(coeff*atom) + k  op  0  as  P op N + K: positive terms on the left, the others on
// the right, the common factor of the coefficients divided out. Null when it cannot be written.
Expr RewriteSimplifier::canonical_comparison(BinaryOp op, const LinearForm& diff) const {
  DataType t = diff.dtype;
  if (diff.is_const() || diff.constant == kNegInf) return nullptr;
  int64_t g = 0;
  for (auto& term : diff.terms) g = gcd_int(g, term.coeff);
  if (g == 0 || g == kPosInf) return nullptr;
  int64_t rhs = -diff.constant;  // the condition is  sum(coeff*atom) op rhs
  int64_t k;
  switch (op) {
    case BinaryOp::LT:
    case BinaryOp::GE:
      k = -floordiv_int(-rhs, g);  // ceil(rhs / g)
      break;
    case BinaryOp::LE:
    case BinaryOp::GT:
      k = floordiv_int(rhs, g);
      break;
    default:  // EQ, NE
      if (rhs % g != 0) return make_bool_const(op == BinaryOp::NE);
      k = rhs / g;
      break;
  }
  LinearForm lhs(t), right(t, k);
  for (auto& term : diff.terms) {
    int64_t c = term.coeff / g;
    if (c > 0) {
      lhs.add_term(term.atom, c);
    } else {
      if (c == kNegInf) return nullptr;
      right.add_term(term.atom, -c);
    }
  }
  if (lhs.is_const()) {
    // 0 op N + k  is  -k op N.
    if (k == kNegInf) return nullptr;
    lhs.add_constant(-k);
    right.constant = 0;
  }
  if (!in_range(t, lhs.constant) || !in_range(t, right.constant)) return nullptr;
  return make_binary(op, DataType::Bool(), to_expr(lhs), to_expr(right));
}

Expr RewriteSimplifier::logical(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  if (!a->dtype.is_bool() || !b->dtype.is_bool()) return rebuild(e, n, a, b);
  bool is_and = n->op == BinaryOp::And;
  const int64_t* ca = const_int(a);
  const int64_t* cb = const_int(b);
  // The absorbing constant decides; the neutral one disappears.
  if (ca) return (*ca != 0) == is_and ? b : make_bool_const(!is_and);
  if (cb) return (*cb != 0) == is_and ? a : make_bool_const(!is_and);
  if (expr_equal(a, b)) return a;
  if (negates(a, b)) return make_bool_const(!is_and);  // x && !x, x || !x
  return rebuild(e, n, a, b);
}

Expr RewriteSimplifier::float_arith(const Expr& e, const BinaryNode* n, Expr a, Expr b) const {
  DataType t = n->dtype;
  auto* fa = as<FloatImmNode>(a);
  auto* fb = as<FloatImmNode>(b);
  if (fa && fb) {
    if (auto r = fold_float_exact(n->op, t, fa->value, fb->value)) return make_float(*r, t);
    bool ordered = !std::isnan(fa->value) && !std::isnan(fb->value) && fa->value != fb->value;
    if (ordered && n->op == BinaryOp::Min) return fa->value < fb->value ? a : b;
    if (ordered && n->op == BinaryOp::Max) return fa->value > fb->value ? a : b;
  }
  // Identities exact for every float, signed zeros and NaN included.
  auto is_float_const = [](const FloatImmNode* f, double v) { return f && f->value == v; };
  if ((n->op == BinaryOp::Mul || n->op == BinaryOp::Div) && is_float_const(fb, 1.0)) return a;
  if (n->op == BinaryOp::Mul && is_float_const(fa, 1.0)) return b;
  if (n->op == BinaryOp::Sub && fb && fb->value == 0.0 && !std::signbit(fb->value)) return a;
  return rebuild(e, n, a, b);
}

Expr RewriteSimplifier::logical_not(const Expr& e, Expr a) const {
  auto* n = static_cast<const NotNode*>(e.get());
  if (auto* v = const_int(a)) return make_bool_const(*v == 0);
  if (auto* inner = as<NotNode>(a)) {
    if (inner->a->dtype.is_bool()) return inner->a;
  }
  if (auto* cmp = as<BinaryNode>(a); cmp && is_comparison(cmp->op)) {
    // For floats only == and != negate into each other (NaN makes !(x < y) differ from x >= y).
    bool integer = is_scalar_int(cmp->a->dtype);
    if (integer || cmp->op == BinaryOp::EQ || cmp->op == BinaryOp::NE)
      return make_binary(negate_comparison(cmp->op), DataType::Bool(), cmp->a, cmp->b);
  }
  if (a == n->a) return e;
  return std::make_shared<NotNode>(a, n->span);
}

Expr RewriteSimplifier::select(const Expr& e, Expr c, Expr t, Expr f) const {
  auto* n = static_cast<const SelectNode*>(e.get());
  if (auto* v = const_int(c)) return *v ? t : f;
  if (expr_equal(t, f)) return t;
  if (c == n->cond && t == n->true_value && f == n->false_value) return e;
  return std::make_shared<SelectNode>(c, t, f, n->span);
}

Expr RewriteSimplifier::cast(const Expr& e, DataType t, Expr v) const {
  auto* n = static_cast<const CastNode*>(e.get());
  if (v->dtype == t) return v;
  if (t.lanes == 1 && v->dtype.lanes == 1) {
    if (auto* i = as<IntImmNode>(v)) {
      if (is_scalar_int(t)) return make_const(t, i->value);  // wraps as C does
      bool huge_unsigned = v->dtype.is_uint() && i->value < 0;  // a uint64 above 2^63
      double value = double(i->value);
      if (t.is_float() && !huge_unsigned && std::abs(value) < 9007199254740992.0 && exact_in(t, value))
        return make_float(value, t);
    }
    if (auto* f = as<FloatImmNode>(v)) {
      if (t.is_float() && exact_in(t, f->value)) return make_float(f->value, t);
      if (is_scalar_int(t) && !t.is_bool() && std::isfinite(f->value)) {
        double truncated = std::trunc(f->value);
        ConstIntBound r = dtype_range(t);
        bool fits = truncated > -9.0e18 && truncated < 9.0e18 && int64_t(truncated) >= r.min &&
                    int64_t(truncated) <= r.max;
        if (fits) return make_const(t, int64_t(truncated));
      }
    }
    // cast(T, cast(U, x)) with x of type T is x when U holds every value of T.
    if (auto* inner = as<CastNode>(v); inner && inner->value->dtype == t && holds_all_values(inner->dtype, t))
      return inner->value;
  }
  if (v == n->value) return e;
  return std::make_shared<CastNode>(t, v, n->span);
}

}  // namespace tl::arith
