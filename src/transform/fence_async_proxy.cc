#include "transform/fence_async_proxy.h"

#include <set>
#include <string>

#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

bool is_barrier(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  auto* call = ev ? as<CallNode>(ev->value) : nullptr;
  return call && (call->op == "sync_threads" || call->op == "named_barrier_sync" || call->op == "cluster_sync");
}

bool is_arrival(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  auto* call = ev ? as<CallNode>(ev->value) : nullptr;
  return call && (call->op == "mbarrier_arrive" || call->op == "mbarrier_arrive_expect_tx" ||
                  call->op == "mbarrier_arrive_cluster" || call->op == "mbarrier_arrive_remote");
}

// Calls that name shared memory without writing it through the generic proxy: the async
// proxy's own reads and writes (ordered by mbarriers) and the barriers' protocol.
bool leaves_shared_to_async_proxy(const std::string& op) {
  static const std::set<std::string> ops = {"wgmma",         "tma_load",     "tma_load_multicast",
                                            "mbarrier_wait", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
                                            "mbarrier_arrive_cluster", "mbarrier_arrive_remote",
                                            "mbarrier_expect_tx", "cp_async_barrier_noinc", "ldmatrix", "fence_proxy_async", "wgmma_desc",
                                            "tma_store", "tma_reduce_add", "tma_store_commit", "tma_store_wait_read", "tma_store_wait"};
  return ops.count(op) > 0;
}

// Whether s may write shared memory through the generic proxy (ordinary stores, cp.async,
// a barrier's initialisation...): what the async proxy must be fenced from.
bool writes_shared_generically(const Stmt& s) {
  struct V : IRVisitor {
    bool found = false;
    using IRVisitor::visit;
    void visit_store(const BufferStoreNode* n) override {
      found = found || n->buffer->is_shared();
      IRVisitor::visit_store(n);
    }
    void visit_call(const CallNode* n) override {
      if (!leaves_shared_to_async_proxy(n->op))
        for (auto& a : n->args)
          if (auto* l = as<BufferLoadNode>(a); l && l->buffer->is_shared()) found = true;
      IRVisitor::visit_call(n);
    }
  } v;
  v.visit(s);
  return v.found;
}

// A proxy fence before each barrier that some generic shared-memory write since the last
// fence may reach (along the statements in order, loops' back edges and both branches of
// a condition), so that wgmma and TMA see it after the barrier. A barrier behind which
// only registers and global memory were written (a GEMM's epilogue stores) takes none:
// the fence would wait for those stores.
class FenceBeforeBarriers : public IRMutator {
 protected:
  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    std::vector<Stmt> out;
    for (auto& x : n->seq) out.push_back(mutate(x));
    return make_seq(out, n->span);
  }
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    // An mbarrier arrival hands shared memory to other threads by hand (T.ws regions),
    // which may read it through the async proxy (wgmma): the same fence as a barrier.
    if (is_barrier(s) || is_arrival(s)) {
      if (!dirty_) return s;
      dirty_ = false;
      return std::make_shared<SeqStmtNode>(std::vector<Stmt>{fence(n->span), s}, n->span);
    }
    dirty_ = dirty_ || writes_shared_generically(s);
    return s;
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    dirty_ = dirty_ || n->buffer->is_shared();
    return s;
  }
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    // A later iteration starts with what an earlier one left; no iteration may run at all.
    bool entry = dirty_ || writes_shared_generically(n->body);
    dirty_ = entry;
    Stmt out = IRMutator::mutate_for(s, n);
    dirty_ = dirty_ || entry;
    return out;
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    bool entry = dirty_;
    Stmt then_case = mutate(n->then_case);
    bool after_then = dirty_;
    dirty_ = entry;
    Stmt else_case = n->else_case ? mutate(n->else_case) : nullptr;
    dirty_ = dirty_ || after_then;
    if (then_case == n->then_case && else_case == n->else_case) return s;
    return std::make_shared<IfThenElseNode>(n->cond, then_case, else_case, n->span);
  }
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override {
    dirty_ = true;  // not expected after lowering; taken as a write
    return s;
  }

 private:
  static Stmt fence(Span sp) {
    return std::make_shared<EvaluateNode>(
        std::make_shared<CallNode>(DataType::Void(), "fence_proxy_async", std::vector<Expr>{}, sp), sp);
  }
  bool dirty_ = false;
};

// wgmma and TMA stores (and reductions) read shared memory through the async proxy.
bool reads_shared_asynchronously(const Stmt& s) {
  bool found = false;
  for_each_expr(s, [&](const ExprNode* e) {
    if (auto* c = dynamic_cast<const CallNode*>(e)) found = found || c->op == "wgmma" || c->op == "tma_store" || c->op == "tma_reduce_add";
  });
  return found;
}

bool has_call(const Stmt& s, const std::string& op) {
  bool found = false;
  for_each_expr(s, [&](const ExprNode* e) {
    if (auto* c = dynamic_cast<const CallNode*>(e)) found = found || c->op == op;
  });
  return found;
}

// cp.async copies that other threads wrote, completed by the arrivals of
// T.cp_async_barrier_noinc, were written through the generic proxy after any fence their
// writers could run: the waiting thread fences after its wait, before wgmma reads them.
class FenceAfterWaits : public IRMutator {
 protected:
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    auto* call = as<CallNode>(n->value);
    if (!call || call->op != "mbarrier_wait") return s;
    Stmt fence = std::make_shared<EvaluateNode>(
        std::make_shared<CallNode>(DataType::Void(), "fence_proxy_async", std::vector<Expr>{}, n->span), n->span);
    return std::make_shared<SeqStmtNode>(std::vector<Stmt>{s, fence}, n->span);
  }
};

}  // namespace

PrimFunc fence_async_proxy(const PrimFunc& f) {
  if (!reads_shared_asynchronously(f->body)) return f;
  Stmt body = FenceBeforeBarriers().mutate(f->body);
  if (has_call(body, "cp_async_barrier_noinc")) body = FenceAfterWaits().mutate(body);
  return with_body(f, body);
}

}  // namespace tl
