// The rewriting simplifier behind Analyzer::simplify: one bottom-up pass that puts integer
// arithmetic into linear canonical form and applies division, min/max, comparison, logic and
// bit-operation rules justified by the bound and modular analyses.
//
// Assumption: signed integer types of 32 bits or more (index types) do not overflow, neither in
// the input nor in the result. Other integer types wrap; for them only rewrites that are exact in
// wrapping arithmetic are made. Float expressions keep their structure; constants fold only
// when the result is exact.
#pragma once
#include "arith/const_int_bound.h"
#include "arith/linear_form.h"
#include "arith/modular_set.h"

namespace tl::arith {

class RewriteSimplifier {
 public:
  RewriteSimplifier(const ConstIntBoundAnalyzer& bound, const ModularSetAnalyzer& modular)
      : bound_(bound), modular_(modular) {}
  // One bottom-up pass; the result has e's dtype and e's value for every value of the variables.
  Expr operator()(const Expr& e) const { return visit(e); }

 private:
  Expr visit(const Expr& e) const;
  Expr visit_node(const Expr& e) const;
  Expr visit_binary(const Expr& e, const BinaryNode* n) const;
  Expr rebuild(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;

  // Each takes simplified operands.
  Expr canonical(LinearForm f) const;
  Expr floordiv_const(const Expr& a, int64_t c) const;
  Expr floormod_const(const Expr& a, int64_t c) const;
  Expr base_of_offset_in_block(const LinearForm& f, int64_t c) const;
  Expr trunc_div_mod(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr min_max(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr bitwise(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr comparison(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr canonical_comparison(BinaryOp op, const LinearForm& diff) const;
  Expr logical(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr float_arith(const Expr& e, const BinaryNode* n, Expr a, Expr b) const;
  Expr logical_not(const Expr& e, Expr a) const;
  Expr select(const Expr& e, Expr c, Expr t, Expr f) const;
  Expr cast(const Expr& e, DataType t, Expr v) const;
  // Replaces an integer or bool expression whose bound is a single value by that constant.
  Expr fold_if_known(const Expr& e) const;

  const ConstIntBoundAnalyzer& bound_;
  const ModularSetAnalyzer& modular_;
};

}  // namespace tl::arith
