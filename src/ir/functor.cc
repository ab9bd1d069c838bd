#include "ir/functor.h"

#include <functional>
#include <unordered_map>

namespace tl {

// ---------------------------------------------------------------- visitor

void IRVisitor::visit(const Expr& e) {
  if (!e) return;
  switch (e->kind) {
    case ExprKind::IntImm: return visit_int(static_cast<const IntImmNode*>(e.get()));
    case ExprKind::FloatImm: return visit_float(static_cast<const FloatImmNode*>(e.get()));
    case ExprKind::StringImm: return visit_string(static_cast<const StringImmNode*>(e.get()));
    case ExprKind::Var: return visit_var(static_cast<const VarNode*>(e.get()));
    case ExprKind::Binary: return visit_binary(static_cast<const BinaryNode*>(e.get()));
    case ExprKind::Not: return visit_not(static_cast<const NotNode*>(e.get()));
    case ExprKind::Select: return visit_select(static_cast<const SelectNode*>(e.get()));
    case ExprKind::Cast: return visit_cast(static_cast<const CastNode*>(e.get()));
    case ExprKind::BufferLoad: return visit_load(static_cast<const BufferLoadNode*>(e.get()));
    case ExprKind::Call: return visit_call(static_cast<const CallNode*>(e.get()));
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::Seq: return visit_seq(static_cast<const SeqStmtNode*>(s.get()));
    case StmtKind::For: return visit_for(static_cast<const ForNode*>(s.get()));
    case StmtKind::IfThenElse: return visit_if(static_cast<const IfThenElseNode*>(s.get()));
    case StmtKind::BufferStore: return visit_store(static_cast<const BufferStoreNode*>(s.get()));
    case StmtKind::LetStmt: return visit_let(static_cast<const LetStmtNode*>(s.get()));
    case StmtKind::Evaluate: return visit_evaluate(static_cast<const EvaluateNode*>(s.get()));
    case StmtKind::Allocate: return visit_allocate(static_cast<const AllocateNode*>(s.get()));
    case StmtKind::TileOp: return visit_tile_op(static_cast<const TileOpNode*>(s.get()));
    case StmtKind::Kernel: return visit_kernel(static_cast<const KernelNode*>(s.get()));
    case StmtKind::While: return visit_while(static_cast<const WhileNode*>(s.get()));
  }
}

void IRVisitor::visit_region(const BufferRegion& r) {
  visit_buffer(r.buffer);
  for (auto& rg : r.ranges) {
    visit(rg.min);
    visit(rg.extent);
  }
}

void IRVisitor::visit_binary(const BinaryNode* n) {
  visit(n->a);
  visit(n->b);
}
void IRVisitor::visit_not(const NotNode* n) { visit(n->a); }
void IRVisitor::visit_select(const SelectNode* n) {
  visit(n->cond);
  visit(n->true_value);
  visit(n->false_value);
}
void IRVisitor::visit_cast(const CastNode* n) { visit(n->value); }
void IRVisitor::visit_load(const BufferLoadNode* n) {
  visit_buffer(n->buffer);
  for (auto& i : n->indices) visit(i);
}
void IRVisitor::visit_call(const CallNode* n) {
  for (auto& a : n->args) visit(a);
}
void IRVisitor::visit_buffer(const Buffer& b) {
  for (auto& e : b->shape) visit(e);
  for (auto& e : b->strides) visit(e);
}

void IRVisitor::visit_seq(const SeqStmtNode* n) {
  for (auto& s : n->seq) visit(s);
}
void IRVisitor::visit_for(const ForNode* n) {
  visit(n->min);
  visit(n->extent);
  visit(n->body);
}
void IRVisitor::visit_while(const WhileNode* n) {
  visit(n->cond);
  visit(n->body);
}
void IRVisitor::visit_if(const IfThenElseNode* n) {
  visit(n->cond);
  visit(n->then_case);
  visit(n->else_case);
}
void IRVisitor::visit_store(const BufferStoreNode* n) {
  visit_buffer(n->buffer);
  visit(n->value);
  for (auto& i : n->indices) visit(i);
}
void IRVisitor::visit_let(const LetStmtNode* n) {
  visit(n->value);
  visit(n->body);
}
void IRVisitor::visit_evaluate(const EvaluateNode* n) { visit(n->value); }
void IRVisitor::visit_allocate(const AllocateNode* n) {
  visit_buffer(n->buffer);
  auto it = n->attrs.find("init");
  if (it != n->attrs.end() && std::holds_alternative<Expr>(it->second)) visit(std::get<Expr>(it->second));
  visit(n->body);
}
void IRVisitor::visit_tile_op(const TileOpNode* n) {
  for (auto& r : n->regions) visit_region(r);
  for (auto& a : n->args) visit(a);
}
void IRVisitor::visit_kernel(const KernelNode* n) {
  for (auto& g : n->grid) visit(g);
  visit(n->body);
}

// ---------------------------------------------------------------- mutator

Expr IRMutator::mutate(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
    case ExprKind::IntImm: return mutate_int(e);
    case ExprKind::FloatImm: return mutate_float(e);
    case ExprKind::StringImm: return mutate_string(e);
    case ExprKind::Var: return mutate_var(e);
    case ExprKind::Binary: return mutate_binary(e, static_cast<const BinaryNode*>(e.get()));
    case ExprKind::Not: return mutate_not(e, static_cast<const NotNode*>(e.get()));
    case ExprKind::Select: return mutate_select(e, static_cast<const SelectNode*>(e.get()));
    case ExprKind::Cast: return mutate_cast(e, static_cast<const CastNode*>(e.get()));
    case ExprKind::BufferLoad: return mutate_load(e, static_cast<const BufferLoadNode*>(e.get()));
    case ExprKind::Call: return mutate_call(e, static_cast<const CallNode*>(e.get()));
  }
  return e;
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Seq: return mutate_seq(s, static_cast<const SeqStmtNode*>(s.get()));
    case StmtKind::For: return mutate_for(s, static_cast<const ForNode*>(s.get()));
    case StmtKind::IfThenElse: return mutate_if(s, static_cast<const IfThenElseNode*>(s.get()));
    case StmtKind::BufferStore: return mutate_store(s, static_cast<const BufferStoreNode*>(s.get()));
    case StmtKind::LetStmt: return mutate_let(s, static_cast<const LetStmtNode*>(s.get()));
    case StmtKind::Evaluate: return mutate_evaluate(s, static_cast<const EvaluateNode*>(s.get()));
    case StmtKind::Allocate: return mutate_allocate(s, static_cast<const AllocateNode*>(s.get()));
    case StmtKind::TileOp: return mutate_tile_op(s, static_cast<const TileOpNode*>(s.get()));
    case StmtKind::Kernel: return mutate_kernel(s, static_cast<const KernelNode*>(s.get()));
    case StmtKind::While: return mutate_while(s, static_cast<const WhileNode*>(s.get()));
  }
  return s;
}

std::vector<Expr> IRMutator::mutate_exprs(const std::vector<Expr>& v, bool* changed) {
  std::vector<Expr> out;
  out.reserve(v.size());
  for (auto& e : v) {
    out.push_back(mutate(e));
    if (out.back() != e) *changed = true;
  }
  return out;
}

BufferRegion IRMutator::mutate_region(const BufferRegion& r) {
  BufferRegion out{mutate_buffer(r.buffer), {}, r.span};
  for (auto& rg : r.ranges) out.ranges.push_back({mutate(rg.min), mutate(rg.extent)});
  return out;
}

Expr IRMutator::mutate_binary(const Expr& e, const BinaryNode* n) {
  Expr a = mutate(n->a), b = mutate(n->b);
  if (a == n->a && b == n->b) return e;
  return std::make_shared<BinaryNode>(n->op, n->dtype, a, b, n->span);
}
Expr IRMutator::mutate_not(const Expr& e, const NotNode* n) {
  Expr a = mutate(n->a);
  if (a == n->a) return e;
  return std::make_shared<NotNode>(a, n->span);
}
Expr IRMutator::mutate_select(const Expr& e, const SelectNode* n) {
  Expr c = mutate(n->cond), t = mutate(n->true_value), f = mutate(n->false_value);
  if (c == n->cond && t == n->true_value && f == n->false_value) return e;
  return std::make_shared<SelectNode>(c, t, f, n->span);
}
Expr IRMutator::mutate_cast(const Expr& e, const CastNode* n) {
  Expr v = mutate(n->value);
  if (v == n->value) return e;
  return std::make_shared<CastNode>(n->dtype, v, n->span);
}
Expr IRMutator::mutate_load(const Expr& e, const BufferLoadNode* n) {
  bool changed = false;
  auto idx = mutate_exprs(n->indices, &changed);
  Buffer b = mutate_buffer(n->buffer);
  if (!changed && b == n->buffer) return e;
  return std::make_shared<BufferLoadNode>(n->dtype, b, std::move(idx), n->span);
}
Expr IRMutator::mutate_call(const Expr& e, const CallNode* n) {
  bool changed = false;
  auto args = mutate_exprs(n->args, &changed);
  if (!changed) return e;
  return std::make_shared<CallNode>(n->dtype, n->op, std::move(args), n->span);
}

Stmt IRMutator::mutate_seq(const Stmt& s, const SeqStmtNode* n) {
  std::vector<Stmt> out;
  bool changed = false;
  for (auto& c : n->seq) {
    out.push_back(mutate(c));
    if (out.back() != c) changed = true;
  }
  if (!changed) return s;
  return make_seq(std::move(out), n->span);
}
Stmt IRMutator::mutate_for(const Stmt& s, const ForNode* n) {
  Expr mn = mutate(n->min), ext = mutate(n->extent);
  Stmt body = mutate(n->body);
  if (mn == n->min && ext == n->extent && body == n->body) return s;
  return std::make_shared<ForNode>(n->var, mn, ext, n->for_kind, body, n->attrs, n->span);
}
Stmt IRMutator::mutate_while(const Stmt& s, const WhileNode* n) {
  Expr c = mutate(n->cond);
  Stmt body = mutate(n->body);
  if (c == n->cond && body == n->body) return s;
  return std::make_shared<WhileNode>(c, body, n->span);
}
Stmt IRMutator::mutate_if(const Stmt& s, const IfThenElseNode* n) {
  Expr c = mutate(n->cond);
  Stmt t = mutate(n->then_case), f = mutate(n->else_case);
  if (c == n->cond && t == n->then_case && f == n->else_case) return s;
  return std::make_shared<IfThenElseNode>(c, t, f, n->span);
}
Stmt IRMutator::mutate_store(const Stmt& s, const BufferStoreNode* n) {
  bool changed = false;
  Expr v = mutate(n->value);
  auto idx = mutate_exprs(n->indices, &changed);
  Buffer b = mutate_buffer(n->buffer);
  if (!changed && v == n->value && b == n->buffer) return s;
  return std::make_shared<BufferStoreNode>(b, v, std::move(idx), n->span);
}
Stmt IRMutator::mutate_let(const Stmt& s, const LetStmtNode* n) {
  Expr v = mutate(n->value);
  Stmt body = mutate(n->body);
  if (v == n->value && body == n->body) return s;
  return std::make_shared<LetStmtNode>(n->var, v, body, n->span);
}
Stmt IRMutator::mutate_evaluate(const Stmt& s, const EvaluateNode* n) {
  Expr v = mutate(n->value);
  if (v == n->value) return s;
  return std::make_shared<EvaluateNode>(v, n->span);
}
Stmt IRMutator::mutate_allocate(const Stmt& s, const AllocateNode* n) {
  Buffer b = mutate_buffer(n->buffer);
  Attrs attrs = n->attrs;
  bool changed = b != n->buffer;
  auto it = attrs.find("init");
  if (it != attrs.end() && std::holds_alternative<Expr>(it->second)) {
    Expr old = std::get<Expr>(it->second);
    Expr nw = mutate(old);
    if (nw != old) {
      it->second = nw;
      changed = true;
    }
  }
  Stmt body = mutate(n->body);
  if (!changed && body == n->body) return s;
  return std::make_shared<AllocateNode>(b, body, std::move(attrs), n->span);
}
Stmt IRMutator::mutate_tile_op(const Stmt& s, const TileOpNode* n) {
  std::vector<BufferRegion> regions;
  bool changed = false;
  for (auto& r : n->regions) {
    regions.push_back(mutate_region(r));
    const BufferRegion& nr = regions.back();
    if (nr.buffer != r.buffer) changed = true;
    for (size_t i = 0; i < r.ranges.size(); ++i)
      if (nr.ranges[i].min != r.ranges[i].min || nr.ranges[i].extent != r.ranges[i].extent) changed = true;
  }
  auto args = mutate_exprs(n->args, &changed);
  if (!changed) return s;
  return std::make_shared<TileOpNode>(n->op, std::move(regions), std::move(args), n->attrs, n->span);
}
Stmt IRMutator::mutate_kernel(const Stmt& s, const KernelNode* n) {
  bool changed = false;
  auto grid = mutate_exprs(n->grid, &changed);
  Stmt body = mutate(n->body);
  if (!changed && body == n->body) return s;
  return std::make_shared<KernelNode>(n->block_vars, std::move(grid), n->thread_vars, n->threads, body,
                                      n->span, n->cluster);
}

// ---------------------------------------------------------------- helpers

namespace {
class FnVisitor : public IRVisitor {
 public:
  explicit FnVisitor(const std::function<void(const ExprNode*)>& fn) : fn_(fn) {}
  using IRVisitor::visit;

 protected:
  void visit_int(const IntImmNode* n) override { fn_(n); }
  void visit_float(const FloatImmNode* n) override { fn_(n); }
  void visit_string(const StringImmNode* n) override { fn_(n); }
  void visit_var(const VarNode* n) override { fn_(n); }
  void visit_binary(const BinaryNode* n) override { fn_(n); IRVisitor::visit_binary(n); }
  void visit_not(const NotNode* n) override { fn_(n); IRVisitor::visit_not(n); }
  void visit_select(const SelectNode* n) override { fn_(n); IRVisitor::visit_select(n); }
  void visit_cast(const CastNode* n) override { fn_(n); IRVisitor::visit_cast(n); }
  void visit_load(const BufferLoadNode* n) override { fn_(n); IRVisitor::visit_load(n); }
  void visit_call(const CallNode* n) override { fn_(n); IRVisitor::visit_call(n); }

 private:
  const std::function<void(const ExprNode*)>& fn_;
};

class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::unordered_map<const VarNode*, Expr>& m) : map_(m) {}

 protected:
  Expr mutate_var(const Expr& e) override {
    auto it = map_.find(static_cast<const VarNode*>(e.get()));
    return it == map_.end() ? e : it->second;
  }

 private:
  const std::unordered_map<const VarNode*, Expr>& map_;
};
}  // namespace

void for_each_expr(const Stmt& s, const std::function<void(const ExprNode*)>& fn) {
  FnVisitor v(fn);
  v.visit(s);
}

Expr substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map) {
  Substituter sub(map);
  return sub.mutate(e);
}
Stmt substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map) {
  Substituter sub(map);
  return sub.mutate(s);
}

std::unordered_set<const VarNode*> vars_bound_in(const Stmt& s) {
  std::unordered_set<const VarNode*> out;
  struct B : IRVisitor {
    std::unordered_set<const VarNode*>* out;
    using IRVisitor::visit;
    void visit_for(const ForNode* n) override {
      out->insert(n->var.get());
      IRVisitor::visit_for(n);
    }
    void visit_let(const LetStmtNode* n) override {
      out->insert(n->var.get());
      IRVisitor::visit_let(n);
    }
  } b;
  b.out = &out;
  b.visit(s);
  return out;
}

std::unordered_set<const BufferNode*> buffers_written(const Stmt& s) {
  struct Writes : IRVisitor {
    std::unordered_set<const BufferNode*> out;
    using IRVisitor::visit;
    void visit_store(const BufferStoreNode* n) override {
      out.insert(n->buffer.get());
      IRVisitor::visit_store(n);
    }
    void visit_tile_op(const TileOpNode* n) override {
      for (size_t i = 0; i < n->regions.size(); ++i) {
        // Operands read only: copy's, reduce's and cumsum's source (cumsum in place has the
        // same buffer as destination too), gemm's A and B, the value of a tile atomic.
        bool input = ((n->op == "copy" || n->op == "reduce" || n->op == "cumsum") && i == 0) ||
                     (n->op == "gemm" && i < 2) || (n->op.rfind("atomic_", 0) == 0 && i == 1) ||
                     n->op == "annotate_layout" || n->op == "print";
        if (!input) out.insert(n->regions[i].buffer.get());
      }
      IRVisitor::visit_tile_op(n);
    }
    void visit_call(const CallNode* n) override {
      // TMA stores and reductions name the tensor they write by its first element too.
      if ((n->op.rfind("atomic_", 0) == 0 || n->op == "cp_async" || n->op == "tma_store" ||
           n->op == "tma_reduce_add") &&
          !n->args.empty())
        if (auto* l = dynamic_cast<const BufferLoadNode*>(n->args[0].get())) out.insert(l->buffer.get());
      IRVisitor::visit_call(n);
    }
  } w;
  w.visit(s);
  return std::move(w.out);
}

std::unordered_set<const VarNode*> storage_written(const Stmt& s) {
  std::unordered_set<const VarNode*> out;
  struct Data : IRVisitor {
    const std::unordered_set<const BufferNode*>* written;
    std::unordered_set<const VarNode*>* out;
    using IRVisitor::visit;
    void visit_buffer(const Buffer& b) override {
      if (b->data && written->count(b.get())) out->insert(b->data.get());
      IRVisitor::visit_buffer(b);
    }
  } d;
  auto written = buffers_written(s);
  d.written = &written;
  d.out = &out;
  d.visit(s);
  return out;
}

}  // namespace tl
