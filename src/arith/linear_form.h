// Linear forms: an integer expression seen as  c0 + sum(coeff_i * atom_i), where the atoms are
// the parts that are not sums or products by constants (variables, divisions, loads, ...).
// This is the canonical shape the simplifier gives to index arithmetic: like terms combined,
// constants collected, x - x cancelled.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/expr.h"

namespace tl::arith {

struct LinearTerm {
  Expr atom;
  int64_t coeff;
};

// For index types (see assumes_no_overflow) coefficients are mathematical integers; should one
// leave int64, `overflow` is set and the form must not be used. For wrapping types they are
// kept modulo 2^bits (as signed representatives), which is exact in that arithmetic.
struct LinearForm {
  DataType dtype;
  std::vector<LinearTerm> terms;  // distinct atoms (expr_equal), nonzero coefficients
  int64_t constant = 0;
  bool overflow = false;

  explicit LinearForm(DataType t, int64_t c = 0);
  bool is_const() const { return terms.empty(); }
  // Adds coeff * atom, merging with an equal atom already present.
  void add_term(const Expr& atom, int64_t coeff);
  void add(const LinearForm& other, int64_t factor = 1);
  void scale(int64_t factor);
  void add_constant(int64_t c);
  // True when the form is exactly 1 * atom.
  bool is_single_atom() const { return constant == 0 && terms.size() == 1 && terms[0].coeff == 1; }
  // Coefficient arithmetic in this form's number system.
  int64_t plus(int64_t a, int64_t b);
  int64_t times(int64_t a, int64_t b);
};

// Flattens +, - and multiplication by constants (e must be of an integer dtype).
LinearForm linear_form(const Expr& e);
// Rebuilds an expression: positive terms first, then subtracted ones, then the constant.
Expr to_expr(const LinearForm& f);
// An integer immediate of type t holding v wrapped to t's width.
Expr make_const(DataType t, int64_t v);

}  // namespace tl::arith
