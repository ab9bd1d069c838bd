// Modular set analysis: facts of the form  e == coeff * k + base  for some integer k.
#pragma once
#include "arith/const_int_bound.h"

namespace tl::arith {

class ModularSetAnalyzer {
 public:
  explicit ModularSetAnalyzer(const VarBounds& vars) : vars_(vars) {}
  // Normalised: coeff >= 0, and 0 <= base < coeff when coeff > 0.
  ModularSet operator()(const Expr& e) const;

 private:
  ModularSet visit_binary(const BinaryNode* n) const;
  const VarBounds& vars_;
};

// The tightest set that holds both a and b.
ModularSet modular_union(ModularSet a, ModularSet b);

}  // namespace tl::arith
