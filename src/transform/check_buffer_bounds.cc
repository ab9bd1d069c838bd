#include "transform/check_buffer_bounds.h"

#include <unordered_map>

#include "arith/linear_form.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/printer.h"

namespace tl {
namespace {

struct Range {
  int64_t lo, hi;  // inclusive; every value is taken by some iteration
};

class BufferBounds : public IRVisitor {
 public:
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* n) override {
    for (size_t d = 0; d < n->block_vars.size() && d < n->grid.size(); ++d)
      if (const int64_t* g = const_int(n->grid[d]); g && *g >= 1) ranges_[n->block_vars[d].get()] = {0, *g - 1};
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d)
      ranges_[n->thread_vars[d].get()] = {0, n->threads[d] - 1};
    IRVisitor::visit_kernel(n);
  }
  void visit_for(const ForNode* n) override {
    const int64_t *mn = const_int(n->min), *ext = const_int(n->extent);
    if (mn && ext && *ext < 1) return;  // the body never runs
    if (mn && ext) ranges_[n->var.get()] = {*mn, *mn + *ext - 1};
    IRVisitor::visit_for(n);
    ranges_.erase(n->var.get());
  }
  void visit_if(const IfThenElseNode* n) override {
    visit(n->cond);
    ++guarded_;
    visit(n->then_case);
    if (n->else_case) visit(n->else_case);
    --guarded_;
  }
  void visit_select(const SelectNode* n) override {
    visit(n->cond);
    ++guarded_;
    visit(n->true_value);
    visit(n->false_value);
    --guarded_;
  }
  void visit_binary(const BinaryNode* n) override {
    if (n->op != BinaryOp::And && n->op != BinaryOp::Or) return IRVisitor::visit_binary(n);
    visit(n->a);
    ++guarded_;
    visit(n->b);
    --guarded_;
  }
  void visit_store(const BufferStoreNode* n) override {
    check(n->buffer, n->indices, "written", n->span);
    IRVisitor::visit_store(n);
  }
  void visit_load(const BufferLoadNode* n) override {
    check(n->buffer, n->indices, "read", n->span);
    IRVisitor::visit_load(n);
  }

 private:
  // The exact range of an index, when it is a linear form over indices of known range.
  bool exact_range(const Expr& e, Range& out) const {
    if (!e->dtype.is_integer()) return false;
    arith::LinearForm f = arith::linear_form(e);
    if (f.overflow) return false;
    out = {f.constant, f.constant};
    for (auto& t : f.terms) {
      auto* v = as<VarNode>(t.atom);
      auto it = v ? ranges_.find(v) : ranges_.end();
      if (it == ranges_.end()) return false;
      int64_t a = t.coeff * it->second.lo, b = t.coeff * it->second.hi;
      out.lo += std::min(a, b);
      out.hi += std::max(a, b);
    }
    return true;
  }

  void check(const Buffer& b, const std::vector<Expr>& indices, const char* how, Span span) {
    if (guarded_ > 0 || b->is_global() || indices.size() != b->shape.size()) return;
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t* extent = const_int(b->shape[d]);
      Range r;
      if (!extent || !exact_range(indices[d], r) || (r.lo >= 0 && r.hi < *extent)) continue;
      if (r.hi < 0 || r.lo >= *extent) continue;  // wholly outside: legalize_safe_memory_access says so
      std::string dim = b->shape.size() > 1 ? " in dimension " + std::to_string(d) : "";
      fail(ErrorKind::Bounds, span,
           "buffer '" + b->name + "' has " + std::to_string(*extent) + " elements" + dim + " but is " + how +
               " at index " + to_string(indices[d]) + ", which runs from " + std::to_string(r.lo) + " to " +
               std::to_string(r.hi),
           "the loop runs past the buffer: shrink the loop, enlarge the buffer, or guard the access with an if");
    }
  }

  std::unordered_map<const VarNode*, Range> ranges_;
  int guarded_ = 0;
};

}  // namespace

PrimFunc check_buffer_bounds(const PrimFunc& f) {
  BufferBounds b;
  b.visit(f->body);
  return f;
}

}  // namespace tl
