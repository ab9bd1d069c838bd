#include "arith/analyzer.h"

#include <algorithm>

#include "arith/const_int_bound.h"
#include "arith/expr_equal.h"
#include "arith/int_math.h"
#include "arith/modular_set.h"
#include "arith/rewrite_simplify.h"

namespace tl::arith {

struct Analyzer::Impl {
  VarBounds vars;
  ConstIntBoundAnalyzer bound{vars};
  ModularSetAnalyzer modular{vars};
  RewriteSimplifier rewrite{bound, modular};
};

Analyzer::Analyzer() : impl_(new Impl) {}
Analyzer::~Analyzer() { delete impl_; }

void Analyzer::bind(const VarNode* v, int64_t min, int64_t extent) {
  // An empty range leaves nothing to say; the loop body never runs.
  int64_t max = extent <= 0 ? min : (min > kPosInf - (extent - 1) ? kPosInf : min + (extent - 1));
  bind(v, ConstIntBound{min, max});
}

void Analyzer::bind(const VarNode* v, ConstIntBound bound) {
  if (is_scalar_int(v->dtype)) {
    // What the variable's type can hold is known anyway.
    ConstIntBound range = dtype_range(v->dtype);
    bound.min = std::max(bound.min, range.min);
    bound.max = std::min(bound.max, range.max);
    if (bound.min > bound.max) bound = range;
  }
  impl_->vars[v] = bound;
}

void Analyzer::unbind(const VarNode* v) { impl_->vars.erase(v); }

ConstIntBound Analyzer::const_int_bound(const Expr& e) { return impl_->bound(e); }

ModularSet Analyzer::modular_set(const Expr& e) { return impl_->modular(e); }

Expr Analyzer::simplify(const Expr& e) {
  // Each round is a full bottom-up pass; a second one picks up what the first one exposed.
  constexpr int kMaxRounds = 3;
  Expr cur = e;
  for (int round = 0; round < kMaxRounds; ++round) {
    Expr next = impl_->rewrite(cur);
    if (next == cur || expr_equal(next, cur)) return next;
    cur = next;
  }
  return cur;
}

bool Analyzer::can_prove(const Expr& cond) {
  Expr s = simplify(cond);
  if (auto* v = const_int(s)) return *v != 0;
  if (auto* n = as<BinaryNode>(s)) {
    if (n->op == BinaryOp::And) return can_prove(n->a) && can_prove(n->b);
    if (n->op == BinaryOp::Or) return can_prove(n->a) || can_prove(n->b);
  }
  ConstIntBound b = impl_->bound(s);
  return b.min > 0 || b.max < 0;
}

}  // namespace tl::arith
