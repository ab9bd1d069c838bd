#include "transform/check_register_bounds.h"

#include <unordered_map>
#include <unordered_set>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "op/region.h"

namespace tl {
namespace {

class CheckRegisterBounds : public IRVisitor {
 public:
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* n) override {
    for (size_t d = 0; d < n->block_vars.size() && d < n->grid.size(); ++d)
      bind_loop_var(az_, n->block_vars[d].get(), make_int(0), n->grid[d]);
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d) {
      az_.bind(n->thread_vars[d].get(), 0, n->threads[d]);
      independent_.insert(n->thread_vars[d].get());
    }
    IRVisitor::visit_kernel(n);
  }
  void visit_for(const ForNode* n) override {
    bind_loop_var(az_, n->var.get(), n->min, n->extent);
    bool fixed = const_int(n->min) && const_int(n->extent);
    if (fixed) independent_.insert(n->var.get());
    IRVisitor::visit_for(n);
    if (fixed) independent_.erase(n->var.get());
    az_.unbind(n->var.get());
  }
  // Under `if c` an index of c's variables may only take some of its values (a guard
  // against an offset past the fragment's end, acc[i + 16, j] under `if i < 16`).
  void visit_if(const IfThenElseNode* n) override {
    visit(n->cond);
    std::vector<const VarNode*> added;
    for_each_expr(std::make_shared<EvaluateNode>(n->cond, n->span), [&](const ExprNode* e) {
      auto* v = dynamic_cast<const VarNode*>(e);
      if (v && conditioned_.insert(v).second) added.push_back(v);
    });
    visit(n->then_case);
    for (auto* v : added) conditioned_.erase(v);
    visit(n->else_case);
  }
  void visit_let(const LetStmtNode* n) override {
    if (n->var->dtype.is_integer()) az_.bind(n->var.get(), az_.const_int_bound(n->value));
    lets_[n->var.get()] = n->value;
    IRVisitor::visit_let(n);
    lets_.erase(n->var.get());
    az_.unbind(n->var.get());
  }
  void visit_load(const BufferLoadNode* n) override {
    check(n->buffer, n->indices, 1, n->span);
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    check(n->buffer, n->indices, 1, n->span);
    IRVisitor::visit_store(n);
  }
  void visit_call(const CallNode* n) override {
    // Operands that name the first of several elements.
    auto span_of = [&](size_t i, int64_t bytes) {
      if (i >= n->args.size()) return;
      if (auto* l = as<BufferLoadNode>(n->args[i]))
        check(l->buffer, l->indices, std::max<int64_t>(1, bytes / std::max(1, l->buffer->dtype.bytes())), n->span);
    };
    if (n->op == "ldmatrix") {  // ldmatrix(trans, matrices, registers, address): 4 bytes a matrix
      const int64_t* matrices = n->args.size() > 1 ? const_int(n->args[1]) : nullptr;
      span_of(2, 4 * (matrices ? *matrices : 4));
    }
    if (n->op == "mma_sync") {
      if (!n->args.empty())
        if (auto* c = as<BufferLoadNode>(n->args[0])) check(c->buffer, c->indices, 4, n->span);
      span_of(1, 16);
      span_of(2, 8);
    }
    if (n->op == "matrix_core" && n->args.size() == 6) {
      // matrix_core(c, a, b, function, accumulators, inputs per lane): MFMA / WMMA.
      const int64_t *acc = const_int(n->args[4]), *inputs = const_int(n->args[5]);
      if (acc && inputs) {
        if (auto* c = as<BufferLoadNode>(n->args[0])) check(c->buffer, c->indices, *acc, n->span);
        for (size_t i : {size_t(1), size_t(2)})
          if (auto* l = as<BufferLoadNode>(n->args[i])) check(l->buffer, l->indices, *inputs, n->span);
      }
    }
    IRVisitor::visit_call(n);
  }

 private:
  void check(const Buffer& b, const std::vector<Expr>& indices, int64_t count, Span span) {
    if (b->scope != scope::kLocal || indices.size() != 1) return;
    int64_t size = b->const_size();
    if (size < 0) return;
    arith::ConstIntBound r = az_.const_int_bound(indices[0]);
    if (r.min >= 0 && r.max != arith::ConstIntBound::kPosInf && r.max + count <= size) return;
    if (r.min == arith::ConstIntBound::kNegInf || r.max == arith::ConstIntBound::kPosInf) return;  // unknown
    // The range is an over-estimate unless the index is a sum of constant multiples of
    // variables that take every value of a constant range independently (a triangular loop,
    // a product of two loop variables, a loop whose extent depends on another: not proven).
    std::unordered_map<const VarNode*, int> uses;
    if (!exact(indices[0], uses)) return;
    for (auto& [v, k] : uses)
      if (k > 1) return;
    fail(ErrorKind::Bounds, span,
         "per-thread array '" + b->name + "' has " + std::to_string(size) + " elements but is accessed at [" +
             std::to_string(r.min) + ", " + std::to_string(r.max + count - 1) + "]",
         "check the index range of T.alloc_local buffers; when the array is one the compiler made for a "
         "fragment or a T.gemm operand, this is a compiler bug: please report it with the kernel");
  }

  // Whether e's range is exactly what the analyzer says: loop (constant range) and thread
  // variables, let names of such sums, constants, + and - and multiples by constants; the
  // variables it uses are counted in `uses`.
  bool exact(const Expr& e, std::unordered_map<const VarNode*, int>& uses) const {
    if (const_int(e)) return true;
    if (auto* v = as<VarNode>(e)) {
      auto let = lets_.find(v);
      if (let != lets_.end()) return exact(let->second, uses);
      ++uses[v];
      return independent_.count(v) > 0 && !conditioned_.count(v);
    }
    auto* b = as<BinaryNode>(e);
    if (!b) return false;
    if (b->op == BinaryOp::Add || b->op == BinaryOp::Sub) return exact(b->a, uses) && exact(b->b, uses);
    if (b->op == BinaryOp::Mul) return (const_int(b->a) && exact(b->b, uses)) || (const_int(b->b) && exact(b->a, uses));
    return false;
  }

  arith::Analyzer az_;
  std::unordered_set<const VarNode*> independent_;   // loop variables of constant ranges, thread indices
  std::unordered_map<const VarNode*, Expr> lets_;
  std::unordered_set<const VarNode*> conditioned_;  // variables of the enclosing ifs' conditions
};

}  // namespace

PrimFunc check_register_bounds(const PrimFunc& f) {
  CheckRegisterBounds c;
  c.visit(f->body);
  return f;
}

}  // namespace tl
