#include "transform/fence_async_proxy.h"

#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

bool is_barrier(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  auto* call = ev ? as<CallNode>(ev->value) : nullptr;
  return call && (call->op == "sync_threads" || call->op == "named_barrier_sync");
}

class FenceBeforeBarriers : public IRMutator {
 protected:
  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    std::vector<Stmt> out;
    for (auto& x : n->seq) {
      if (is_barrier(x)) {
        out.push_back(fence(x->span));
        out.push_back(x);
      } else {
        out.push_back(mutate(x));
      }
    }
    return std::make_shared<SeqStmtNode>(out, n->span);
  }
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    // A barrier that is a statement of its own (an if's or loop's whole body).
    if (is_barrier(s)) return std::make_shared<SeqStmtNode>(std::vector<Stmt>{fence(n->span), s}, n->span);
    return s;
  }

 private:
  static Stmt fence(Span sp) {
    return std::make_shared<EvaluateNode>(
        std::make_shared<CallNode>(DataType::Void(), "fence_proxy_async", std::vector<Expr>{}, sp), sp);
  }
};

bool issues_wgmma(const Stmt& s) {
  bool found = false;
  for_each_expr(s, [&](const ExprNode* e) {
    if (auto* c = dynamic_cast<const CallNode*>(e)) found = found || c->op == "wgmma";
  });
  return found;
}

}  // namespace

PrimFunc fence_async_proxy(const PrimFunc& f) {
  if (!issues_wgmma(f->body)) return f;
  return with_body(f, FenceBeforeBarriers().mutate(f->body));
}

}  // namespace tl
