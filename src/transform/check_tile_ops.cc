#include "transform/check_tile_ops.h"

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "op/op.h"
#include "op/region.h"

namespace tl {
namespace {

const char* const kKnownOps =
    "copy, fill, clear, gemm, reduce_sum/max/min/abssum/absmax, cumsum, atomic_add/max/min, print";

class TileOpChecker : public IRVisitor {
 public:
  using IRVisitor::visit;

  // Shape variables of the parameters are extents: never negative.
  void bind_shape_vars(const PrimFuncNode& f) {
    for (auto& v : shape_vars(f))
      analyzer_.bind(v.get(), arith::ConstIntBound{0, arith::ConstIntBound::kPosInf});
  }

 protected:
  void visit_for(const ForNode* n) override {
    bind_loop_var(analyzer_, n->var.get(), n->min, n->extent);
    IRVisitor::visit_for(n);
    analyzer_.unbind(n->var.get());
  }
  void visit_let(const LetStmtNode* n) override {
    if (n->var->dtype.is_integer()) analyzer_.bind(n->var.get(), analyzer_.const_int_bound(n->value));
    IRVisitor::visit_let(n);
    analyzer_.unbind(n->var.get());
  }
  void visit_kernel(const KernelNode* n) override {
    for (size_t d = 0; d < n->block_vars.size() && d < n->grid.size(); ++d)
      bind_loop_var(analyzer_, n->block_vars[d].get(), make_int(0), n->grid[d]);
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d)
      bind_loop_var(analyzer_, n->thread_vars[d].get(), make_int(0), make_int(n->threads[d]));
    IRVisitor::visit_kernel(n);
    for (auto& v : n->block_vars) analyzer_.unbind(v.get());
    for (auto& v : n->thread_vars) analyzer_.unbind(v.get());
  }
  void visit_tile_op(const TileOpNode* n) override {
    const TileOpDef* def = find_tile_op(n->op);
    if (!def)
      fail(ErrorKind::Name, n->span, "unknown tile operator 'T." + n->op + "'",
           std::string("the tile operators are ") + kKnownOps);
    def->check(*n, analyzer_);
    IRVisitor::visit_tile_op(n);
  }

 private:
  arith::Analyzer analyzer_;
};

}  // namespace

PrimFunc check_tile_ops(const PrimFunc& f) {
  TileOpChecker checker;
  checker.bind_shape_vars(*f);
  checker.visit(f->body);
  return f;
}

}  // namespace tl
