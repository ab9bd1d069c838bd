// Integer analysis of index expressions: constant bounds, modular sets, simplification
// and proofs. An Analyzer holds the ranges of the variables in scope (loop variables,
// block indices, shape variables known to be positive).
#pragma once
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "ir/expr.h"

namespace tl::arith {

// Inclusive interval [min, max]; kNegInf / kPosInf stand for unbounded.
struct ConstIntBound {
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  int64_t min = kNegInf;
  int64_t max = kPosInf;
  bool is_const() const { return min == max; }
};

// The set { coeff * k + base : k integer }; coeff == 0 means exactly base.
// coeff == 1, base == 0 means nothing is known.
struct ModularSet {
  int64_t coeff = 1;
  int64_t base = 0;
};

class Analyzer {
 public:
  Analyzer();
  ~Analyzer();
  // v ranges over [min, min + extent).
  void bind(const VarNode* v, int64_t min, int64_t extent);
  // v ranges over an interval given by a bound (e.g. a shape variable >= 1).
  void bind(const VarNode* v, ConstIntBound bound);
  // Forgets what bind() said about v.
  void unbind(const VarNode* v);

  ConstIntBound const_int_bound(const Expr& e);
  ModularSet modular_set(const Expr& e);
  // Returns an equivalent, simpler expression (same dtype). Never changes meaning.
  Expr simplify(const Expr& e);
  // True only when cond (a bool expression) holds for every value of the bound variables.
  bool can_prove(const Expr& cond);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace tl::arith
