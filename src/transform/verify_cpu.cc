// The CPU back end runs each block as one sequential tile-level program, so nothing may
// name a thread of the block; see verify_cpu.h.
#include "transform/verify_cpu.h"

#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "ir/functor.h"

namespace tl {
namespace {

class VerifyCPU : public IRVisitor {
 public:
  void check_param_buffers(const PrimFuncNode& f) {
    for (auto& p : f.params)
      if (p.is_buffer()) check_buffer(p.buffer, p.buffer->span);
  }

 protected:
  // The innermost node with a known source location: variables are shared between
  // their uses, so a use is reported at the expression or statement around it.
  struct SpanScope {
    VerifyCPU* self;
    bool pushed;
    SpanScope(VerifyCPU* v, Span s) : self(v), pushed(s.defined()) {
      if (pushed) self->spans_.push_back(s);
    }
    ~SpanScope() {
      if (pushed) self->spans_.pop_back();
    }
  };
  Span here(Span fallback = {}) const { return spans_.empty() ? fallback : spans_.back(); }

  [[noreturn]] static void fail_thread_use(Span span) {
    fail(ErrorKind::Unsupported, span,
         "thread index (T.get_thread_binding) used on target cpu: the CPU back end runs each block as "
         "one tile-level program and has no threads",
         "express per-element work with T.Parallel, or compile for a GPU target");
  }

  void check_buffer(const Buffer& b, Span span) {
    if (!checked_.insert(b.get()).second) return;
    if (b->dtype.is_sub_byte())
      fail(ErrorKind::Unsupported, b->span.defined() ? b->span : span,
           "buffer '" + b->name + "' has dtype " + b->dtype.str() +
               ", which target cpu does not support: sub-byte types exist only as packed storage",
           "store the data as int8/uint8 and unpack the values with shifts and masks");
  }

  void visit_var(const VarNode* v) override {
    if (thread_vars_.count(v)) fail_thread_use(here(v->span));
  }
  void visit_call(const CallNode* n) override {
    SpanScope s(this, n->span);
    if (n->op == "thread_index") fail_thread_use(here());
    if (n->op.rfind("warp_shfl", 0) == 0)
      fail(ErrorKind::Unsupported, here(), "T." + n->op.substr(5) + " (a warp shuffle) is not supported on target cpu",
           "exchange values through a shared buffer, or compile for a CUDA or HIP target");
    if (n->op == "thread_range")
      fail(ErrorKind::Unsupported, here(), "T.ws is not supported on target cpu",
           "warp specialisation by hand needs a CUDA target (sm_90a for its barriers)");
    IRVisitor::visit_call(n);
  }
  void visit_binary(const BinaryNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_binary(n);
  }
  void visit_not(const NotNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_not(n);
  }
  void visit_select(const SelectNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_select(n);
  }
  void visit_cast(const CastNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_cast(n);
  }
  void visit_load(const BufferLoadNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_load(n);
  }
  void visit_buffer(const Buffer& b) override {
    check_buffer(b, here());
    IRVisitor::visit_buffer(b);
  }

  void visit_for(const ForNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_for(n);
  }
  void visit_if(const IfThenElseNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_if(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_store(n);
  }
  void visit_let(const LetStmtNode* n) override {
    {
      SpanScope s(this, n->span);
      visit(n->value);
    }
    visit(n->body);
  }
  void visit_evaluate(const EvaluateNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_evaluate(n);
  }
  void visit_allocate(const AllocateNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_allocate(n);
  }
  void visit_tile_op(const TileOpNode* n) override {
    SpanScope s(this, n->span);
    IRVisitor::visit_tile_op(n);
  }
  void visit_kernel(const KernelNode* n) override {
    SpanScope s(this, n->span);
    if (n->grid.size() > 3)
      fail(ErrorKind::Unsupported, here(),
           "T.Kernel with " + std::to_string(n->grid.size()) + " grid dimensions: at most 3 are supported",
           "fold the extra dimensions into one block index and recover them with // and %");
    for (auto& g : n->grid) visit(g);
    std::vector<const VarNode*> added;
    for (auto& tv : n->thread_vars)
      if (tv && thread_vars_.insert(tv.get()).second) added.push_back(tv.get());
    visit(n->body);
    for (auto* v : added) thread_vars_.erase(v);
  }

 private:
  std::vector<Span> spans_;
  std::unordered_set<const VarNode*> thread_vars_;
  std::unordered_set<const BufferNode*> checked_;
};

}  // namespace

PrimFunc verify_cpu(const PrimFunc& f) {
  VerifyCPU verifier;
  verifier.check_param_buffers(*f);
  verifier.visit(f->body);
  return f;
}

}  // namespace tl
