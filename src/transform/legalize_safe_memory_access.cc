// Guards the element accesses a user wrote by hand (in T.Parallel and other loops) to
// buffers whose extent the tile may run past: global tensors, typically in the last,
// partial tile. A store that may fall outside is skipped, a load that may gives 0.
// Accesses the analyzer proves in bounds (the common case for full tiles) stay unguarded.
#include "transform/legalize_safe_memory_access.h"

#include <unordered_set>
#include <vector>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"

namespace tl {
namespace {

class SafeAccess : public IRMutator {
 public:
  explicit SafeAccess(const PrimFunc& f) {
    for (auto& v : shape_vars(*f)) analyzer_.bind(v.get(), {1, arith::ConstIntBound::kPosInf});
  }

 protected:
  // An index that lies outside its dimension for every value of the variables is the
  // user's mistake, whatever the buffer: reported, never guarded.
  void check_not_always_outside(const Buffer& b, const std::vector<Expr>& idx, Span span) {
    for (size_t d = 0; d < idx.size() && d < b->shape.size(); ++d) {
      arith::ConstIntBound bound = analyzer_.const_int_bound(idx[d]);
      const int64_t* extent = const_int(b->shape[d]);
      bool below = bound.max < 0;
      bool above = extent && bound.min >= *extent;
      if (!below && !above) continue;
      std::string where = bound.is_const() ? "index " + std::to_string(bound.min)
                                           : "index range [" + std::to_string(bound.min) + ", " +
                                                 std::to_string(bound.max) + "]";
      fail(ErrorKind::Bounds, span,
           where + " is outside dimension " + std::to_string(d) + " of buffer '" + b->name + "'" +
               (extent ? " (extent " + std::to_string(*extent) + ")" : ""),
           "indices of a buffer run from 0 to its extent - 1");
    }
  }

  // The condition that idx lies inside b, or null when it provably does.
  Expr in_bounds(const Buffer& b, const std::vector<Expr>& idx, Span span) {
    check_not_always_outside(b, idx, span);
    if (!b->is_global()) return nullptr;  // tile-local buffers: the checks of the tile ops apply
    Expr cond;
    for (size_t d = 0; d < idx.size() && d < b->shape.size(); ++d) {
      Expr i = idx[d];
      Expr lo = binary(BinaryOp::GE, i, make_int(0, i->dtype), span);
      Expr hi = binary(BinaryOp::LT, i, cast(i->dtype, b->shape[d], span), span);
      for (Expr c : {lo, hi}) {
        if (analyzer_.can_prove(c)) continue;
        cond = cond ? land(cond, c, span) : c;
      }
    }
    return cond;
  }

  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    Expr loaded = IRMutator::mutate_load(e, n);
    auto* l = as<BufferLoadNode>(loaded);
    Expr cond = in_bounds(l->buffer, l->indices, l->span);
    if (!cond) return loaded;
    return select(cond, loaded, cast(l->dtype, make_int(0), l->span), l->span);
  }

  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    Stmt stored = IRMutator::mutate_store(s, n);
    auto* st = as<BufferStoreNode>(stored);
    Expr cond = in_bounds(st->buffer, st->indices, st->span);
    if (!cond) return stored;
    return std::make_shared<IfThenElseNode>(cond, stored, nullptr, st->span);
  }

  Expr mutate_call(const Expr& e, const CallNode* n) override {
    // An atomic's first argument names an address, not a value: guard the whole call
    // at the statement level instead (see mutate_evaluate).
    if (n->op.rfind("atomic_", 0) == 0 || n->op == "cp_async") return e;
    return IRMutator::mutate_call(e, n);
  }

  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    auto* c = as<CallNode>(n->value);
    if (c && c->op.rfind("atomic_", 0) == 0 && !c->args.empty()) {
      auto* target = as<BufferLoadNode>(c->args[0]);
      std::vector<Expr> args = c->args;
      for (size_t i = 1; i < args.size(); ++i) args[i] = mutate(args[i]);
      Stmt out = std::make_shared<EvaluateNode>(
          std::make_shared<CallNode>(c->dtype, c->op, std::move(args), c->span), n->span);
      Expr cond = target ? in_bounds(target->buffer, target->indices, c->span) : nullptr;
      if (!cond) return out;
      return std::make_shared<IfThenElseNode>(cond, out, nullptr, n->span);
    }
    if (c && c->op == "cp_async" && c->args.size() == 3) return guard_cp_async(c, n->span);
    return IRMutator::mutate_evaluate(s, n);
  }

  // cp_async(&shared[..], &global[..], bytes) of a hand-written async copy: a source run
  // that may fall outside the tensor is read as zeros (cp.async's zero fill), as a guarded
  // load gives 0.
  Stmt guard_cp_async(const CallNode* c, Span span) {
    auto mutate_indices = [&](const Expr& e) -> Expr {
      auto* l = as<BufferLoadNode>(e);
      if (!l) return e;
      std::vector<Expr> idx;
      for (auto& i : l->indices) idx.push_back(mutate(i));
      return std::make_shared<BufferLoadNode>(l->dtype, l->buffer, std::move(idx), l->span);
    };
    Expr dst = mutate_indices(c->args[0]), src = mutate_indices(c->args[1]);
    std::vector<Expr> args = {dst, src, c->args[2]};
    auto* l = as<BufferLoadNode>(src);
    const int64_t* bytes = const_int(c->args[2]);
    if (l && bytes && !l->indices.empty()) {
      std::vector<Expr> last = l->indices;
      int64_t lanes = *bytes / l->buffer->dtype.bytes();
      last.back() = binary(BinaryOp::Add, last.back(), make_int(lanes - 1, last.back()->dtype), span);
      Expr first_in = in_bounds(l->buffer, l->indices, l->span), last_in = in_bounds(l->buffer, last, l->span);
      Expr cond = first_in && last_in ? land(first_in, last_in, span) : (first_in ? first_in : last_in);
      if (cond) args.push_back(cond);
    }
    return std::make_shared<EvaluateNode>(std::make_shared<CallNode>(c->dtype, c->op, std::move(args), c->span),
                                          span);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    const int64_t* mn = const_int(n->min);
    arith::ConstIntBound ext = analyzer_.const_int_bound(n->extent);
    if (mn && ext.max != arith::ConstIntBound::kPosInf && ext.max >= 1) {
      analyzer_.bind(n->var.get(), *mn, ext.max);
    } else if (mn) {
      analyzer_.bind(n->var.get(), {*mn, arith::ConstIntBound::kPosInf});
    }
    Stmt out = IRMutator::mutate_for(s, n);
    analyzer_.unbind(n->var.get());
    return n->for_kind == ForKind::Vectorized ? hoist_guard(out) : out;
  }

  // `for lane in vectorized(L): if c: x` with c the same for every lane (a gathered row's
  // bounds: T.atomic_addx4(dKV[idx[i], 4 * j], ...)) becomes `if c: for lane ...: x`, so that
  // the lanes stay one vector access.
  static Stmt hoist_guard(const Stmt& s) {
    auto* f = as<ForNode>(s);
    auto* g = f ? as<IfThenElseNode>(f->body) : nullptr;
    if (!g || g->else_case) return s;
    bool reads_lane = false;
    for_each_expr(std::make_shared<EvaluateNode>(g->cond, g->span), [&](const ExprNode* e) {
      reads_lane = reads_lane || e == f->var.get();
    });
    if (reads_lane) return s;
    Stmt loop = std::make_shared<ForNode>(f->var, f->min, f->extent, f->for_kind, g->then_case, f->attrs, f->span);
    return std::make_shared<IfThenElseNode>(g->cond, loop, nullptr, g->span);
  }

  // The thread index (and names given to it, `tx = T.get_thread_binding()`) lies in the
  // block, or in the threads of the T.ws region around the access.
  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    auto* c = as<CallNode>(n->value);
    const int64_t* dim = c && c->op == "thread_index" && c->args.size() == 1 ? const_int(c->args[0]) : nullptr;
    auto* alias = as<VarNode>(n->value);
    bool names_x = (dim && *dim == 0) || (alias && thread_x_.count(alias));
    if (names_x) thread_x_.insert(n->var.get());
    analyzer_.bind(n->var.get(), names_x ? thread_bound_ : analyzer_.const_int_bound(n->value));
    if (dim && *dim > 0 && size_t(*dim) < threads_.size()) analyzer_.bind(n->var.get(), 0, threads_[*dim]);
    Stmt out = IRMutator::mutate_let(s, n);
    analyzer_.unbind(n->var.get());
    if (names_x) thread_x_.erase(n->var.get());
    return out;
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    auto* c = as<CallNode>(n->cond);
    const int64_t *lo = c && c->op == "thread_range" ? const_int(c->args[0]) : nullptr,
                  *hi = lo ? const_int(c->args[1]) : nullptr;
    if (!lo || !hi) return IRMutator::mutate_if(s, n);
    arith::ConstIntBound saved = thread_bound_;
    thread_bound_ = arith::ConstIntBound{*lo, *hi - 1};
    for (auto* v : thread_x_) analyzer_.bind(v, thread_bound_);
    Stmt out = IRMutator::mutate_if(s, n);
    thread_bound_ = saved;
    for (auto* v : thread_x_) analyzer_.bind(v, thread_bound_);
    return out;
  }

  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    threads_ = n->threads;
    thread_x_.clear();
    thread_bound_ = arith::ConstIntBound{0, n->threads.empty() ? 0 : n->threads[0] - 1};
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d) {
      analyzer_.bind(n->thread_vars[d].get(), 0, n->threads[d]);
      if (d == 0) thread_x_.insert(n->thread_vars[0].get());
    }
    for (size_t d = 0; d < n->block_vars.size(); ++d) {
      arith::ConstIntBound g = analyzer_.const_int_bound(n->grid[d]);
      if (g.max != arith::ConstIntBound::kPosInf && g.max >= 1) {
        analyzer_.bind(n->block_vars[d].get(), 0, g.max);
      } else {
        analyzer_.bind(n->block_vars[d].get(), {0, arith::ConstIntBound::kPosInf});
      }
    }
    Stmt out = IRMutator::mutate_kernel(s, n);
    for (auto& v : n->block_vars) analyzer_.unbind(v.get());
    for (auto& v : n->thread_vars) analyzer_.unbind(v.get());
    return out;
  }

 private:
  arith::Analyzer analyzer_;
  std::vector<int64_t> threads_;
  std::unordered_set<const VarNode*> thread_x_;
  arith::ConstIntBound thread_bound_{0, 0};
};

}  // namespace

PrimFunc legalize_safe_memory_access(const PrimFunc& f) {
  SafeAccess pass(f);
  return with_body(f, pass.mutate(f->body));
}

}  // namespace tl
