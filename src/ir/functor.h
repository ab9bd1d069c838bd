// Visitor and mutator over expressions and statements.
// Subclasses override the visit_* they care about and call the base to recurse.
// The mutator rebuilds a node only when a child changed, so unchanged trees stay shared.
#pragma once
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/function.h"

namespace tl {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  void visit(const Expr& e);
  void visit(const Stmt& s);
  void visit_region(const BufferRegion& r);

 protected:
  virtual void visit_int(const IntImmNode*) {}
  virtual void visit_float(const FloatImmNode*) {}
  virtual void visit_string(const StringImmNode*) {}
  virtual void visit_var(const VarNode*) {}
  virtual void visit_binary(const BinaryNode* n);
  virtual void visit_not(const NotNode* n);
  virtual void visit_select(const SelectNode* n);
  virtual void visit_cast(const CastNode* n);
  virtual void visit_load(const BufferLoadNode* n);
  virtual void visit_call(const CallNode* n);
  // Buffers reached from loads, stores, regions and allocations (shape expressions visited).
  virtual void visit_buffer(const Buffer& b);

  virtual void visit_seq(const SeqStmtNode* n);
  virtual void visit_for(const ForNode* n);
  virtual void visit_while(const WhileNode* n);
  virtual void visit_if(const IfThenElseNode* n);
  virtual void visit_store(const BufferStoreNode* n);
  virtual void visit_let(const LetStmtNode* n);
  virtual void visit_evaluate(const EvaluateNode* n);
  virtual void visit_allocate(const AllocateNode* n);
  virtual void visit_tile_op(const TileOpNode* n);
  virtual void visit_kernel(const KernelNode* n);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  Expr mutate(const Expr& e);
  Stmt mutate(const Stmt& s);
  BufferRegion mutate_region(const BufferRegion& r);
  std::vector<Expr> mutate_exprs(const std::vector<Expr>& v, bool* changed);

 protected:
  virtual Expr mutate_int(const Expr& e) { return e; }
  virtual Expr mutate_float(const Expr& e) { return e; }
  virtual Expr mutate_string(const Expr& e) { return e; }
  virtual Expr mutate_var(const Expr& e) { return e; }
  virtual Expr mutate_binary(const Expr& e, const BinaryNode* n);
  virtual Expr mutate_not(const Expr& e, const NotNode* n);
  virtual Expr mutate_select(const Expr& e, const SelectNode* n);
  virtual Expr mutate_cast(const Expr& e, const CastNode* n);
  virtual Expr mutate_load(const Expr& e, const BufferLoadNode* n);
  virtual Expr mutate_call(const Expr& e, const CallNode* n);
  // Lets a pass swap buffers (e.g. for a re-laid-out copy); default: unchanged.
  virtual Buffer mutate_buffer(const Buffer& b) { return b; }

  virtual Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n);
  virtual Stmt mutate_for(const Stmt& s, const ForNode* n);
  virtual Stmt mutate_while(const Stmt& s, const WhileNode* n);
  virtual Stmt mutate_if(const Stmt& s, const IfThenElseNode* n);
  virtual Stmt mutate_store(const Stmt& s, const BufferStoreNode* n);
  virtual Stmt mutate_let(const Stmt& s, const LetStmtNode* n);
  virtual Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n);
  virtual Stmt mutate_allocate(const Stmt& s, const AllocateNode* n);
  virtual Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n);
  virtual Stmt mutate_kernel(const Stmt& s, const KernelNode* n);
};

// Calls fn on every expression node under s, parents before children.
void for_each_expr(const Stmt& s, const std::function<void(const ExprNode*)>& fn);

// The buffers s may write: stores, atomics' destinations and the regions of tile operators
// other than their inputs (a copy's source, a gemm's A and B, a reduction's source).
std::unordered_set<const BufferNode*> buffers_written(const Stmt& s);
// The storage (data handles) s may write, through any buffer over it (T.reshape/T.view).
std::unordered_set<const VarNode*> storage_written(const Stmt& s);
// The names s binds: the variables of its loops and lets.
std::unordered_set<const VarNode*> vars_bound_in(const Stmt& s);

// Replaces variables by expressions (keyed by VarNode identity).
Expr substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map);
Stmt substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map);

}  // namespace tl
