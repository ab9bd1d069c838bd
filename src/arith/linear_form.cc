#include "arith/linear_form.h"

#include <memory>

#include "arith/expr_equal.h"
#include "arith/int_math.h"

namespace tl::arith {

namespace {
void collect(const Expr& e, int64_t scale, LinearForm* out) {
  if (scale == 0) return;
  if (auto* imm = as<IntImmNode>(e)) {
    out->add_constant(out->times(imm->value, scale));
    return;
  }
  auto* bin = as<BinaryNode>(e);
  bool same_type =
      bin && bin->dtype == out->dtype && bin->a->dtype == out->dtype && bin->b->dtype == out->dtype;
  if (same_type) {
    switch (bin->op) {
      case BinaryOp::Add:
        collect(bin->a, scale, out);
        collect(bin->b, scale, out);
        return;
      case BinaryOp::Sub:
        collect(bin->a, scale, out);
        collect(bin->b, out->times(scale, -1), out);
        return;
      case BinaryOp::Mul: {
        LinearForm lhs = linear_form(bin->a);
        LinearForm rhs = linear_form(bin->b);
        if (rhs.is_const() && !rhs.overflow) {
          lhs.scale(out->times(scale, rhs.constant));
          out->add(lhs);
          return;
        }
        if (lhs.is_const() && !lhs.overflow) {
          rhs.scale(out->times(scale, lhs.constant));
          out->add(rhs);
          return;
        }
        // (x * 4) * y is 4 * (x * y): constant factors leave products, so like products combine.
        bool monomials = lhs.terms.size() == 1 && lhs.constant == 0 && rhs.terms.size() == 1 &&
                         rhs.constant == 0 && !lhs.overflow && !rhs.overflow;
        if (monomials && (lhs.terms[0].coeff != 1 || rhs.terms[0].coeff != 1)) {
          Expr product = std::make_shared<BinaryNode>(BinaryOp::Mul, out->dtype, lhs.terms[0].atom,
                                                      rhs.terms[0].atom);
          out->add_term(product, out->times(scale, out->times(lhs.terms[0].coeff, rhs.terms[0].coeff)));
          return;
        }
        break;
      }
      default:
        break;
    }
  }
  out->add_term(e, scale);
}

Expr make_binary(BinaryOp op, DataType t, Expr a, Expr b) {
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b));
}

// coeff * atom for coeff > 0, as it reads best: atom or atom * coeff.
Expr scaled(const Expr& atom, int64_t coeff, DataType t) {
  if (coeff == 1) return atom;
  return make_binary(BinaryOp::Mul, t, atom, make_const(t, coeff));
}

// Whether -v is an ordinary value of t, so that "- atom * (-v)" can be written.
bool negatable(DataType t, int64_t v) {
  ConstIntBound r = dtype_range(DataType::Int(t.bits));
  return v != kNegInf && -v >= r.min && -v <= r.max;
}
}  // namespace

LinearForm::LinearForm(DataType t, int64_t c) : dtype(t) { constant = plus(0, c); }

int64_t LinearForm::plus(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) && assumes_no_overflow(dtype)) overflow = true;
  return assumes_no_overflow(dtype) ? r : wrap_signed(dtype, r);
}

int64_t LinearForm::times(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) && assumes_no_overflow(dtype)) overflow = true;
  return assumes_no_overflow(dtype) ? r : wrap_signed(dtype, r);
}

void LinearForm::add_term(const Expr& atom, int64_t coeff) {
  coeff = plus(0, coeff);
  if (coeff == 0) return;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (expr_equal(terms[i].atom, atom)) {
      terms[i].coeff = plus(terms[i].coeff, coeff);
      if (terms[i].coeff == 0) terms.erase(terms.begin() + i);
      return;
    }
  }
  terms.push_back({atom, coeff});
}

void LinearForm::add(const LinearForm& other, int64_t factor) {
  if (other.overflow) overflow = true;
  for (auto& t : other.terms) add_term(t.atom, times(t.coeff, factor));
  add_constant(times(other.constant, factor));
}

void LinearForm::scale(int64_t factor) {
  std::vector<LinearTerm> kept;
  for (auto& t : terms) {
    int64_t c = times(t.coeff, factor);
    if (c != 0) kept.push_back({t.atom, c});
  }
  terms = std::move(kept);
  constant = times(constant, factor);
}

void LinearForm::add_constant(int64_t c) { constant = plus(constant, c); }

LinearForm linear_form(const Expr& e) {
  LinearForm f(e->dtype);
  collect(e, 1, &f);
  return f;
}

Expr make_const(DataType t, int64_t v) { return std::make_shared<IntImmNode>(t, wrap_to(t, v)); }

Expr to_expr(const LinearForm& f) {
  DataType t = f.dtype;
  Expr acc;
  for (auto& term : f.terms) {
    if (term.coeff <= 0) continue;
    Expr part = scaled(term.atom, term.coeff, t);
    acc = acc ? make_binary(BinaryOp::Add, t, acc, part) : part;
  }
  // With no positive term, a positive constant leads: 3 - x reads better than x * -1 + 3.
  bool constant_leads = false;
  if (!acc && f.constant > 0) {
    acc = make_const(t, f.constant);
    constant_leads = true;
  }
  for (auto& term : f.terms) {
    if (term.coeff > 0) continue;
    Expr product = make_binary(BinaryOp::Mul, t, term.atom, make_const(t, term.coeff));
    if (!acc) {
      acc = product;
    } else if (!negatable(t, term.coeff)) {
      acc = make_binary(BinaryOp::Add, t, acc, product);
    } else {
      acc = make_binary(BinaryOp::Sub, t, acc, scaled(term.atom, -term.coeff, t));
    }
  }
  if (!acc) return make_const(t, f.constant);
  if (constant_leads || f.constant == 0) return acc;
  if (f.constant > 0 || !negatable(t, f.constant))
    return make_binary(BinaryOp::Add, t, acc, make_const(t, f.constant));
  return make_binary(BinaryOp::Sub, t, acc, make_const(t, -f.constant));
}

}  // namespace tl::arith
