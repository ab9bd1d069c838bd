#include "transform/simplify.h"

#include <functional>
#include <memory>
#include <optional>

#include "arith/int_math.h"
#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {

namespace {
using arith::ConstIntBound;

int64_t saturating_add(int64_t a, int64_t b) {
  if (a == arith::kPosInf || b == arith::kPosInf) return arith::kPosInf;
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? arith::kPosInf : r;
}

bool is_noop(const Stmt& s) {
  if (!s) return true;
  auto* seq = as<SeqStmtNode>(s);
  return seq && seq->seq.empty();
}

class Simplifier : public IRMutator {
 public:
  explicit Simplifier(arith::Analyzer& analyzer) : an_(analyzer) {}

  // Binds v for the duration of a scope. Scopes nest: on leaving, v gets back the range it had
  // (from an enclosing scope of this pass or from the caller's analyzer), or is unbound.
  class Scope {
   public:
    Scope(Simplifier* s, const Var& v, ConstIntBound b) : s_(s), v_(v) {
      ConstIntBound before = s->an_.const_int_bound(v);
      ConstIntBound range = arith::dtype_range(v->dtype);
      if (before.min != range.min || before.max != range.max) saved_ = before;
      s->an_.bind(v.get(), b);
    }
    ~Scope() {
      if (saved_) {
        s_->an_.bind(v_.get(), *saved_);
      } else {
        s_->an_.unbind(v_.get());
      }
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Simplifier* s_;
    Var v_;
    std::optional<ConstIntBound> saved_;
  };

 protected:
  // Analyzer::simplify handles a whole expression tree at once.
  Expr mutate_var(const Expr& e) override { return an_.simplify(e); }
  Expr mutate_binary(const Expr& e, const BinaryNode*) override { return an_.simplify(e); }
  Expr mutate_not(const Expr& e, const NotNode*) override { return an_.simplify(e); }
  Expr mutate_select(const Expr& e, const SelectNode*) override { return an_.simplify(e); }
  Expr mutate_cast(const Expr& e, const CastNode*) override { return an_.simplify(e); }
  Expr mutate_load(const Expr& e, const BufferLoadNode*) override { return an_.simplify(e); }
  Expr mutate_call(const Expr& e, const CallNode*) override { return an_.simplify(e); }

  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (auto& c : n->seq) {
      Stmt m = mutate(c);
      changed |= m != c;
      if (!is_noop(m)) out.push_back(m);
    }
    if (!changed) return s;
    return make_seq(std::move(out), n->span);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    Expr min = mutate(n->min), extent = mutate(n->extent);
    ConstIntBound extent_bound = an_.const_int_bound(extent);
    if (extent_bound.max <= 0) return nullptr;  // never runs
    // A warp-specialised pipeline keeps its loop even for one iteration: its roles are
    // split per loop.
    if (const int64_t* e = const_int(extent); e && *e == 1 && !n->attrs.count("ws_pipeline")) {
      Stmt body = substitute(n->body, {{n->var.get(), min}});
      return mutate(body);
    }
    ConstIntBound min_bound = an_.const_int_bound(min);
    // The body runs with min <= var <= min + extent - 1.
    int64_t last = saturating_add(min_bound.max, extent_bound.max - 1);
    Stmt body;
    {
      Scope scope(this, n->var, {min_bound.min, last});
      body = mutate(n->body);
    }
    if (is_noop(body)) return nullptr;
    if (min == n->min && extent == n->extent && body == n->body) return s;
    return std::make_shared<ForNode>(n->var, min, extent, n->for_kind, body, n->attrs, n->span);
  }

  // The bounds a condition implies for the variables it compares with constants (x < c,
  // x <= c, x >= c, x > c, either side, and conjunctions), tighter than what is known.
  std::vector<std::pair<Var, ConstIntBound>> bounds_implied_by(const Expr& cond) {
    std::vector<std::pair<Var, ConstIntBound>> out;
    std::function<void(const Expr&)> learn = [&](const Expr& c) {
      auto* b = as<BinaryNode>(c);
      if (!b) return;
      if (b->op == BinaryOp::And) {
        learn(b->a);
        learn(b->b);
        return;
      }
      BinaryOp op = b->op;
      Expr var = b->a, bound = b->b;
      if (!as<VarNode>(var)) {  // c < x reads as x > c
        std::swap(var, bound);
        if (op == BinaryOp::LT) op = BinaryOp::GT;
        else if (op == BinaryOp::LE) op = BinaryOp::GE;
        else if (op == BinaryOp::GT) op = BinaryOp::LT;
        else if (op == BinaryOp::GE) op = BinaryOp::LE;
        else return;
      }
      auto* v = as<VarNode>(var);
      const int64_t* k = const_int(bound);
      if (!v || !k || !arith::is_scalar_int(v->dtype)) return;
      Var handle = std::static_pointer_cast<const VarNode>(var);
      ConstIntBound have = an_.const_int_bound(var);
      for (auto& [w, nb] : out)
        if (w.get() == v) have = nb;
      if (op == BinaryOp::LT) have.max = std::min(have.max, *k - 1);
      else if (op == BinaryOp::LE) have.max = std::min(have.max, *k);
      else if (op == BinaryOp::GT) have.min = std::max(have.min, *k + 1);
      else if (op == BinaryOp::GE) have.min = std::max(have.min, *k);
      else return;
      if (have.min > have.max) return;  // never true: left to the simplifier
      out.push_back({handle, have});
    };
    learn(cond);
    return out;
  }

  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    Expr cond = mutate(n->cond);
    if (auto* v = const_int(cond)) {
      Stmt taken = *v ? n->then_case : n->else_case;
      return taken ? mutate(taken) : nullptr;
    }
    Stmt then_case;
    {
      // Inside `if x >= c and x < d` (a T.ws region's thread range, a tail guard) x is known
      // to be in [c, d - 1]: index arithmetic over it folds.
      std::vector<std::unique_ptr<Scope>> scopes;
      for (auto& [v, b] : bounds_implied_by(cond)) scopes.push_back(std::make_unique<Scope>(this, v, b));
      then_case = mutate(n->then_case);
    }
    Stmt else_case = n->else_case ? mutate(n->else_case) : nullptr;
    if (is_noop(else_case)) else_case = nullptr;
    if (is_noop(then_case)) {
      if (!else_case) return nullptr;
      // Keep an empty then branch rather than inventing a negated condition.
      then_case = make_seq({}, n->span);
    }
    if (cond == n->cond && then_case == n->then_case && else_case == n->else_case) return s;
    return std::make_shared<IfThenElseNode>(cond, then_case, else_case, n->span);
  }

  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    Expr value = mutate(n->value);
    Stmt body;
    if (arith::is_scalar_int(n->var->dtype)) {
      Scope scope(this, n->var, an_.const_int_bound(value));
      body = mutate(n->body);
    } else {
      body = mutate(n->body);
    }
    if (is_noop(body)) return nullptr;
    if (value == n->value && body == n->body) return s;
    return std::make_shared<LetStmtNode>(n->var, value, body, n->span);
  }

  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    Stmt r = IRMutator::mutate_allocate(s, n);
    auto* a = as<AllocateNode>(r);
    if (a && is_noop(a->body)) return nullptr;
    return r;
  }

  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    bool changed = false;
    std::vector<Expr> grid = mutate_exprs(n->grid, &changed);
    std::vector<std::unique_ptr<Scope>> scopes;
    for (size_t d = 0; d < n->block_vars.size() && d < grid.size(); ++d) {
      ConstIntBound g = an_.const_int_bound(grid[d]);
      int64_t last = g.max == arith::kPosInf ? arith::kPosInf : std::max<int64_t>(g.max - 1, 0);
      scopes.push_back(std::make_unique<Scope>(this, n->block_vars[d], ConstIntBound{0, last}));
    }
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d) {
      int64_t last = std::max<int64_t>(n->threads[d] - 1, 0);
      scopes.push_back(std::make_unique<Scope>(this, n->thread_vars[d], ConstIntBound{0, last}));
    }
    Stmt body = mutate(n->body);
    while (!scopes.empty()) scopes.pop_back();  // innermost first
    if (!body) body = make_seq({}, n->span);
    if (!changed && body == n->body) return s;
    return std::make_shared<KernelNode>(n->block_vars, std::move(grid), n->thread_vars, n->threads, body,
                                        n->span, n->cluster);
  }

 private:
  arith::Analyzer& an_;
};
}  // namespace

Stmt simplify_stmt(const Stmt& s, arith::Analyzer& analyzer) {
  Simplifier simplifier(analyzer);
  Stmt out = simplifier.mutate(s);
  return out ? out : make_seq({}, s ? s->span : Span{});
}

PrimFunc simplify(const PrimFunc& f) {
  arith::Analyzer analyzer;
  // Shape variables are extents of real arguments: at least 1.
  for (auto& v : shape_vars(*f)) analyzer.bind(v.get(), ConstIntBound{1, arith::kPosInf});
  return with_body(f, simplify_stmt(f->body, analyzer));
}

}  // namespace tl
