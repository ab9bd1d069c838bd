#include "arith/linear_form.h"

#include <memory>

#include "arith/expr_equal.h"
#include "arith/int_math.h"

namespace tl::arith {

namespace {
int64_t wrapping_add(DataType t, int64_t a, int64_t b) {
  return wrap_signed(t, int64_t(uint64_t(a) + uint64_t(b)));
}
int64_t wrapping_mul(DataType t, int64_t a, int64_t b) {
  return wrap_signed(t, int64_t(uint64_t(a) * uint64_t(b)));
}

void collect(const Expr& e, int64_t scale, LinearForm* out) {
  if (scale == 0) return;
  if (auto* imm = as<IntImmNode>(e)) {
    out->add_constant(wrapping_mul(out->dtype, imm->value, scale));
    return;
  }
  if (auto* bin = as<BinaryNode>(e); bin && bin->dtype == out->dtype && bin->a->dtype == out->dtype &&
                                     bin->b->dtype == out->dtype) {
    switch (bin->op) {
      case BinaryOp::Add:
        collect(bin->a, scale, out);
        collect(bin->b, scale, out);
        return;
      case BinaryOp::Sub:
        collect(bin->a, scale, out);
        collect(bin->b, wrapping_mul(out->dtype, scale, -1), out);
        return;
      case BinaryOp::Mul: {
        LinearForm lhs = linear_form(bin->a);
        LinearForm rhs = linear_form(bin->b);
        if (rhs.is_const()) {
          lhs.scale(wrapping_mul(out->dtype, scale, rhs.constant));
          out->add(lhs);
          return;
        }
        if (lhs.is_const()) {
          rhs.scale(wrapping_mul(out->dtype, scale, lhs.constant));
          out->add(rhs);
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

// coeff * atom with coeff > 0 as the expression reads best: atom or atom * coeff.
Expr scaled(const Expr& atom, int64_t coeff, DataType t) {
  if (coeff == 1) return atom;
  return make_binary(BinaryOp::Mul, t, atom, make_const(t, coeff));
}
}  // namespace

LinearForm::LinearForm(DataType t, int64_t c) : dtype(t), constant(wrap_signed(t, c)) {}

void LinearForm::add_term(const Expr& atom, int64_t coeff) {
  coeff = wrap_signed(dtype, coeff);
  if (coeff == 0) return;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (expr_equal(terms[i].atom, atom)) {
      terms[i].coeff = wrapping_add(dtype, terms[i].coeff, coeff);
      if (terms[i].coeff == 0) terms.erase(terms.begin() + i);
      return;
    }
  }
  terms.push_back({atom, coeff});
}

void LinearForm::add(const LinearForm& other, int64_t factor) {
  for (auto& t : other.terms) add_term(t.atom, wrapping_mul(dtype, t.coeff, factor));
  add_constant(wrapping_mul(dtype, other.constant, factor));
}

void LinearForm::scale(int64_t factor) {
  factor = wrap_signed(dtype, factor);
  std::vector<LinearTerm> kept;
  for (auto& t : terms) {
    int64_t c = wrapping_mul(dtype, t.coeff, factor);
    if (c != 0) kept.push_back({t.atom, c});
  }
  terms = std::move(kept);
  constant = wrapping_mul(dtype, constant, factor);
}

void LinearForm::add_constant(int64_t c) { constant = wrapping_add(dtype, constant, c); }

LinearForm linear_form(const Expr& e) {
  LinearForm f(e->dtype);
  collect(e, 1, &f);
  return f;
}

Expr make_const(DataType t, int64_t v) { return std::make_shared<IntImmNode>(t, wrap_to(t, v)); }

Expr to_expr(const LinearForm& f) {
  DataType t = f.dtype;
  const int64_t most_negative = wrap_signed(t, kNegInf);  // -2^(bits-1): its negation is not representable
  Expr acc;
  for (auto& term : f.terms) {
    if (term.coeff > 0) acc = acc ? make_binary(BinaryOp::Add, t, acc, scaled(term.atom, term.coeff, t))
                                  : scaled(term.atom, term.coeff, t);
  }
  // With no positive term, a positive constant leads: 3 - x reads better than x * -1 + 3.
  bool constant_leads = false;
  if (!acc && f.constant > 0) {
    acc = make_const(t, f.constant);
    constant_leads = true;
  }
  for (auto& term : f.terms) {
    if (term.coeff > 0) continue;
    if (!acc) {
      acc = make_binary(BinaryOp::Mul, t, term.atom, make_const(t, term.coeff));
    } else if (term.coeff == most_negative) {
      Expr product = make_binary(BinaryOp::Mul, t, term.atom, make_const(t, term.coeff));
      acc = make_binary(BinaryOp::Add, t, acc, product);
    } else {
      acc = make_binary(BinaryOp::Sub, t, acc, scaled(term.atom, -term.coeff, t));
    }
  }
  if (!acc) return make_const(t, f.constant);
  if (constant_leads || f.constant == 0) return acc;
  if (f.constant > 0 || f.constant == most_negative)
    return make_binary(BinaryOp::Add, t, acc, make_const(t, f.constant));
  return make_binary(BinaryOp::Sub, t, acc, make_const(t, -f.constant));
}

}  // namespace tl::arith
