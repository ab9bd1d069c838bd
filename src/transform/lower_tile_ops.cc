#include "transform/lower_tile_ops.h"

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "op/op.h"
#include "op/region.h"
#include "transform/pass.h"

namespace tl {
namespace {

class TileOpLowerer : public IRMutator {
 public:
  explicit TileOpLowerer(const Target& target) : target_(target) {}
  using IRMutator::mutate;

  // Shape variables of the parameters are extents: never negative.
  void bind_shape_vars(const PrimFuncNode& f) {
    for (auto& v : shape_vars(f))
      analyzer_.bind(v.get(), arith::ConstIntBound{0, arith::ConstIntBound::kPosInf});
  }

 protected:
  static bool contributes_to_reducer(const Stmt& body) {
    bool found = false;
    for_each_expr(body, [&](const ExprNode* e) {
      if (auto* c = dynamic_cast<const CallNode*>(e)) found = found || c->op == "reducer_update";
    });
    return found;
  }
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    bind_loop_var(analyzer_, n->var.get(), n->min, n->extent);
    Stmt body = mutate(n->body);
    analyzer_.unbind(n->var.get());
    // The CPU runs a pipelined loop in order; the stage attributes mean nothing there. A
    // T.Parallel loop with a reducer's contributions runs in order too: iterations may add
    // into the same element (acc[i % 3]), which a vectorised loop would lose.
    bool to_serial = (n->for_kind == ForKind::Pipelined && target_.kind == "cpu") ||
                     (n->for_kind == ForKind::Parallel && contributes_to_reducer(n->body));
    if (body == n->body && !to_serial) return s;
    return std::make_shared<ForNode>(n->var, n->min, n->extent, to_serial ? ForKind::Serial : n->for_kind,
                                     body, to_serial ? Attrs{} : n->attrs, n->span);
  }
  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    if (n->var->dtype.is_integer()) analyzer_.bind(n->var.get(), analyzer_.const_int_bound(n->value));
    Stmt out = IRMutator::mutate_let(s, n);
    analyzer_.unbind(n->var.get());
    return out;
  }
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    for (size_t d = 0; d < n->block_vars.size() && d < n->grid.size(); ++d)
      bind_loop_var(analyzer_, n->block_vars[d].get(), make_int(0), n->grid[d]);
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d)
      bind_loop_var(analyzer_, n->thread_vars[d].get(), make_int(0), make_int(n->threads[d]));
    Stmt out = IRMutator::mutate_kernel(s, n);
    for (auto& v : n->block_vars) analyzer_.unbind(v.get());
    for (auto& v : n->thread_vars) analyzer_.unbind(v.get());
    return out;
  }
  Stmt mutate_tile_op(const Stmt&, const TileOpNode* n) override {
    const TileOpDef* def = find_tile_op(n->op);
    if (!def) fail(ErrorKind::Name, n->span, "unknown tile operator 'T." + n->op + "'");
    LowerContext ctx{target_, analyzer_};
    return def->lower(*n, ctx);
  }
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    Stmt store = reducer_update_as_store(n);  // the block is one program: each contribution once
    return store ? store : IRMutator::mutate_evaluate(s, n);
  }

 private:
  const Target& target_;
  arith::Analyzer analyzer_;
};

}  // namespace

PrimFunc lower_tile_ops(const PrimFunc& f, const Target& target) {
  TileOpLowerer lowerer(target);
  lowerer.bind_shape_vars(*f);
  Stmt body = lowerer.mutate(f->body);
  if (body == f->body) return f;
  return with_body(f, body);
}

}  // namespace tl
