#include "arith/modular_set.h"

#include <algorithm>
#include <optional>

#include "arith/int_math.h"
#include "ir/op.h"

namespace tl::arith {

namespace {
constexpr ModularSet kUnknown{1, 0};

ModularSet exact(int64_t v) { return {0, v}; }

ModularSet normalise(int64_t coeff, int64_t base) {
  if (coeff == kNegInf) return kUnknown;
  if (coeff < 0) coeff = -coeff;
  if (coeff == 0) return {0, base};
  return {coeff, floormod_int(base, coeff)};
}

// Checked arithmetic: a fact whose numbers overflow is dropped.
bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool checked_sub(int64_t a, int64_t b, int64_t* out) { return !__builtin_sub_overflow(a, b, out); }
bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

ModularSet combine_add(ModularSet a, ModularSet b, bool subtract) {
  int64_t base;
  bool ok = subtract ? checked_sub(a.base, b.base, &base) : checked_add(a.base, b.base, &base);
  return ok ? normalise(gcd_int(a.coeff, b.coeff), base) : kUnknown;
}

// (c1*k + b1)(c2*j + b2) = c1*c2*kj + c1*b2*k + c2*b1*j + b1*b2.
ModularSet combine_mul(ModularSet a, ModularSet b) {
  int64_t cc, cb, bc, base;
  if (!checked_mul(a.coeff, b.coeff, &cc) || !checked_mul(a.coeff, b.base, &cb) ||
      !checked_mul(b.coeff, a.base, &bc) || !checked_mul(a.base, b.base, &base))
    return kUnknown;
  return normalise(gcd_int(gcd_int(cc, cb), bc), base);
}

// floor((c*k + b) / d) = (c/d)*k + floor(b/d) when d divides c.
ModularSet combine_floordiv(ModularSet a, int64_t d) {
  if (a.coeff % d != 0 || (a.base == kNegInf && d == -1)) return kUnknown;
  return normalise(a.coeff / d, floordiv_int(a.base, d));
}

// (c*k + b) mod d: exact when d divides c, otherwise congruent to b modulo gcd(c, d).
ModularSet combine_floormod(ModularSet a, int64_t d) {
  if (a.coeff % d == 0) return exact(floormod_int(a.base, d));
  return normalise(gcd_int(a.coeff, d), a.base);
}

// Truncating division only stays on the lattice when it divides exactly.
ModularSet combine_truncdiv(ModularSet a, int64_t d) {
  if (a.coeff == 0 && !(a.base == kNegInf && d == -1)) return exact(a.base / d);
  if (a.coeff % d == 0 && a.base % d == 0) return normalise(a.coeff / d, a.base / d);
  return kUnknown;
}

ModularSet combine_truncmod(ModularSet a, int64_t d) {
  if (d == 1 || d == -1) return exact(0);
  if (a.coeff == 0) return exact(a.base % d);
  if (a.coeff % d == 0 && a.base % d == 0) return exact(0);
  return normalise(gcd_int(a.coeff, d), a.base);  // a % d = a - d*q
}
}  // namespace

ModularSet modular_union(ModularSet a, ModularSet b) {
  int64_t diff;
  if (!checked_sub(a.base, b.base, &diff)) return kUnknown;
  return normalise(gcd_int(gcd_int(a.coeff, b.coeff), diff), a.base);
}

ModularSet ModularSetAnalyzer::operator()(const Expr& e) const {
  if (!is_scalar_int(e->dtype) || !assumes_no_overflow(e->dtype)) {
    // Wrapping types: only constants are certain.
    if (auto* v = const_int(e)) return exact(*v);
    return kUnknown;
  }
  switch (e->kind) {
    case ExprKind::IntImm:
      return exact(static_cast<const IntImmNode*>(e.get())->value);
    case ExprKind::Var: {
      auto it = vars_.find(static_cast<const VarNode*>(e.get()));
      if (it != vars_.end() && it->second.is_const()) return exact(it->second.min);
      return kUnknown;
    }
    case ExprKind::Binary:
      return visit_binary(static_cast<const BinaryNode*>(e.get()));
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return modular_union((*this)(n->true_value), (*this)(n->false_value));
    }
    case ExprKind::Cast: {
      // A widening (or same-range) cast between index types keeps the value.
      auto* n = static_cast<const CastNode*>(e.get());
      DataType from = n->value->dtype;
      if (assumes_no_overflow(from) && from.bits <= e->dtype.bits) return (*this)(n->value);
      return kUnknown;
    }
    default:
      return kUnknown;
  }
}

ModularSet ModularSetAnalyzer::visit_binary(const BinaryNode* n) const {
  if (n->a->dtype != n->dtype || n->b->dtype != n->dtype) return kUnknown;
  switch (n->op) {
    case BinaryOp::Add: return combine_add((*this)(n->a), (*this)(n->b), false);
    case BinaryOp::Sub: return combine_add((*this)(n->a), (*this)(n->b), true);
    case BinaryOp::Mul: return combine_mul((*this)(n->a), (*this)(n->b));
    case BinaryOp::Min:
    case BinaryOp::Max: return modular_union((*this)(n->a), (*this)(n->b));
    default: break;
  }
  if (is_bitwise(n->op)) {
    // With a constant c: x >> c is floordiv(x, 2^c), and x & (2^k - 1) is floormod(x, 2^k)
    // (two's complement). x << c is x * 2^c modulo 2^bits: bit tricks let it wrap, so only
    // the congruence modulo a power of two (which wrapping keeps) is used. Nothing is known
    // of the other bit operations.
    const int64_t* c = const_int(n->b);
    if (!c) return kUnknown;
    ModularSet a = (*this)(n->a);
    if (is_shift(n->op)) {
      if (*c < 0 || *c >= n->dtype.bits || *c >= 62) return kUnknown;
      int64_t p = int64_t(1) << *c;
      if (n->op == BinaryOp::ShiftRight) return combine_floordiv(a, p);
      if (a.coeff == 0) {
        std::optional<int64_t> v = fold_bitwise(BinaryOp::ShiftLeft, n->dtype, a.base, *c);
        return v ? exact(*v) : kUnknown;
      }
      ModularSet m = combine_mul(a, exact(p));
      if (m.coeff == 0) return kUnknown;
      int64_t two_power = m.coeff & -m.coeff;  // the largest power of two dividing the modulus
      if (n->dtype.bits < 63) two_power = std::min(two_power, int64_t(1) << n->dtype.bits);
      return normalise(two_power, m.base);
    }
    if (n->op == BinaryOp::BitAnd && *c >= 0 && *c < kPosInf && ((*c + 1) & *c) == 0)
      return combine_floormod(a, *c + 1);
    return kUnknown;
  }
  const int64_t* divisor = const_int(n->b);
  if (!divisor || *divisor == 0) return kUnknown;
  ModularSet a = (*this)(n->a);
  switch (n->op) {
    case BinaryOp::FloorDiv: return combine_floordiv(a, *divisor);
    case BinaryOp::FloorMod: return combine_floormod(a, *divisor);
    case BinaryOp::Div: return combine_truncdiv(a, *divisor);
    case BinaryOp::Mod: return combine_truncmod(a, *divisor);
    default: return kUnknown;
  }
}

}  // namespace tl::arith
