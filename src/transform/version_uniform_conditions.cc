// A T.Parallel loop nest holding a condition that is a linear inequality (or a conjunction
// of them) in the loop's indices plus terms the whole block shares (block indices, enclosing
// loop counters) becomes
//
//     if (the condition holds at its least favourable corner of the tile) { the loop, condition true }
//     else { the loop as written }
//
// The test is block-uniform (no divergence) and costs one comparison per run of the loop;
// attention's causal mask `bx * M + i >= k * N + j` then applies only on diagonal tiles, a
// ragged-edge mask `k * N + j < len` only on the last one. Where the test is a constant the
// loop is simply rewritten (or left as it is).
#include "transform/version_uniform_conditions.h"

#include <unordered_map>
#include <unordered_set>

#include "arith/linear_form.h"
#include "ir/functor.h"
#include "ir/op.h"

namespace tl {
namespace {

// Every variable an expression or statement mentions.
class VarUses : public IRVisitor {
 public:
  std::unordered_set<const VarNode*> vars;
  bool loads = false;  // a value read from memory, which the nest might change
  using IRVisitor::visit;

 protected:
  void visit_var(const VarNode* n) override { vars.insert(n); }
  void visit_load(const BufferLoadNode* n) override {
    loads = true;
    IRVisitor::visit_load(n);
  }
};

// Variables bound inside a statement (loop counters, lets): not uniform outside it.
class BoundVars : public IRVisitor {
 public:
  std::unordered_set<const VarNode*> vars;
  using IRVisitor::visit;

 protected:
  void visit_for(const ForNode* n) override {
    vars.insert(n->var.get());
    IRVisitor::visit_for(n);
  }
  void visit_let(const LetStmtNode* n) override {
    vars.insert(n->var.get());
    IRVisitor::visit_let(n);
  }
};

struct IndexRange {
  int64_t min, extent;
};

// The block-uniform test under which `cond` holds at every point of the nest (null when
// there is none this pass can state).
class AllTrueTest {
 public:
  AllTrueTest(const std::unordered_map<const VarNode*, IndexRange>& indices,
              const std::unordered_set<const VarNode*>& bound)
      : indices_(indices), bound_(bound) {}

  Expr operator()(const Expr& cond) {
    auto* b = as<BinaryNode>(cond);
    if (!b) return nullptr;
    if (b->op == BinaryOp::And) {
      Expr x = (*this)(b->a), y = (*this)(b->b);
      if (!x || !y) return nullptr;
      const int64_t *cx = const_int(x), *cy = const_int(y);
      if ((cx && !*cx) || (cy && !*cy)) return make_bool(false, cond->span);
      return cx ? y : cy ? x : land(x, y, cond->span);
    }
    if (!b->a->dtype.is_int() || !b->b->dtype.is_int()) return nullptr;
    // As "difference >= 0" over the integers.
    switch (b->op) {
      case BinaryOp::GE: return at_least_zero(b->a, b->b, 0, cond->span);
      case BinaryOp::GT: return at_least_zero(b->a, b->b, 1, cond->span);
      case BinaryOp::LE: return at_least_zero(b->b, b->a, 0, cond->span);
      case BinaryOp::LT: return at_least_zero(b->b, b->a, 1, cond->span);
      default: return nullptr;
    }
  }

 private:
  // min over the nest of (hi - lo - gap) >= 0, as an expression of the uniform terms.
  Expr at_least_zero(const Expr& hi, const Expr& lo, int64_t gap, Span span) {
    arith::LinearForm f = arith::linear_form(sub(hi, lo, span));
    if (f.overflow) return nullptr;
    arith::LinearForm uniform(f.dtype, f.constant - gap);
    bool uses_index = false;
    for (const arith::LinearTerm& t : f.terms) {
      auto* v = as<VarNode>(t.atom);
      auto it = v ? indices_.find(v) : indices_.end();
      if (it != indices_.end()) {
        // The least favourable value of this index: its first or its last.
        int64_t at = t.coeff > 0 ? it->second.min : it->second.min + it->second.extent - 1;
        uniform.add_constant(uniform.times(t.coeff, at));
        uses_index = true;
        continue;
      }
      VarUses uses;
      uses.visit(t.atom);
      if (uses.loads) return nullptr;
      for (const VarNode* u : uses.vars)
        if (indices_.count(u) || bound_.count(u)) return nullptr;  // varies inside the nest
      uniform.add_term(t.atom, t.coeff);
    }
    if (!uses_index || uniform.overflow) return nullptr;  // already uniform: nothing to gain
    if (uniform.is_const()) return make_bool(uniform.constant >= 0, span);
    return binary(BinaryOp::GE, arith::to_expr(uniform), arith::make_const(uniform.dtype, 0), span);
  }

  const std::unordered_map<const VarNode*, IndexRange>& indices_;
  const std::unordered_set<const VarNode*>& bound_;
};

// The nest's copy with one condition node taken as true.
class AssumeTrue : public IRMutator {
 public:
  explicit AssumeTrue(const ExprNode* cond) : cond_(cond) {}

 protected:
  Expr mutate_select(const Expr& e, const SelectNode* n) override {
    if (n->cond.get() == cond_) return mutate(n->true_value);
    return IRMutator::mutate_select(e, n);
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    if (n->cond.get() == cond_) return mutate(n->then_case);
    return IRMutator::mutate_if(s, n);
  }

 private:
  const ExprNode* cond_;
};

// The conditions of a nest, in program order: selects' and ifs'.
class Conditions : public IRVisitor {
 public:
  std::vector<Expr> found;
  using IRVisitor::visit;

 protected:
  void visit_select(const SelectNode* n) override {
    found.push_back(n->cond);
    IRVisitor::visit_select(n);
  }
  void visit_if(const IfThenElseNode* n) override {
    found.push_back(n->cond);
    IRVisitor::visit_if(n);
  }
};

class Versioner : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Parallel) return IRMutator::mutate_for(s, n);
    // The nest's indices: this loop and the parallel loops directly inside it.
    std::unordered_map<const VarNode*, IndexRange> indices;
    for (const ForNode* f = n; f && f->for_kind == ForKind::Parallel; f = as<ForNode>(f->body)) {
      const int64_t *mn = const_int(f->min), *ext = const_int(f->extent);
      if (!mn || !ext || *ext < 1) return s;
      indices[f->var.get()] = {*mn, *ext};
    }
    BoundVars bound;
    bound.visit(n->body);
    Conditions conditions;
    conditions.visit(n->body);
    AllTrueTest all_true(indices, bound.vars);
    for (const Expr& cond : conditions.found) {
      Expr test = all_true(cond);
      if (!test) continue;
      Stmt without = AssumeTrue(cond.get()).mutate(s);
      if (const int64_t* v = const_int(test)) return *v ? without : s;
      report.push_back(n->span.str() + ": T.Parallel loop: its condition at line " + std::to_string(cond->span.line) +
                       " holds for the whole tile when a block-uniform test does; a copy without it runs then");
      return std::make_shared<IfThenElseNode>(test, without, s, n->span);
    }
    return s;  // one nest: its inner parallel loops are part of it
  }
};

}  // namespace

PrimFunc version_uniform_conditions(const PrimFunc& f) {
  Versioner v;
  Stmt body = v.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), v.report);
}

}  // namespace tl
