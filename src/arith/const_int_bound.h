// Constant interval bounds of integer expressions, given the ranges of bound variables.
#pragma once
#include <unordered_map>

#include "arith/analyzer.h"
#include "arith/linear_form.h"

namespace tl::arith {

using VarBounds = std::unordered_map<const VarNode*, ConstIntBound>;

class ConstIntBoundAnalyzer {
 public:
  explicit ConstIntBoundAnalyzer(const VarBounds& vars) : vars_(vars) {}
  // The interval of e; for a bool expression [0, 1] or the decided constant. Unknown values of
  // integer type get their dtype's range, non-integers are unbounded.
  ConstIntBound operator()(const Expr& e) const;
  // The interval of c0 + sum(coeff * atom), treating the atoms as independent.
  ConstIntBound bound_of(const LinearForm& f) const;
  // The interval of a - b, computed on the linear form of the difference so that shared terms
  // cancel (only meaningful for types that do not overflow; see assumes_no_overflow).
  ConstIntBound bound_of_difference(const Expr& a, const Expr& b) const;

 private:
  ConstIntBound visit(const Expr& e) const;
  ConstIntBound visit_binary(const Expr& e, const BinaryNode* n) const;
  ConstIntBound visit_comparison(const BinaryNode* n) const;

  const VarBounds& vars_;
};

// Decides `d op 0` for a comparison op from d's interval: 1 true, 0 false, -1 unknown.
int decide_comparison(BinaryOp op, ConstIntBound d);

// Interval arithmetic that treats kNegInf / kPosInf as unbounded ends and saturates on overflow.
ConstIntBound bound_add(ConstIntBound a, ConstIntBound b);
ConstIntBound bound_sub(ConstIntBound a, ConstIntBound b);
ConstIntBound bound_mul(ConstIntBound a, ConstIntBound b);
ConstIntBound bound_union(ConstIntBound a, ConstIntBound b);

}  // namespace tl::arith
