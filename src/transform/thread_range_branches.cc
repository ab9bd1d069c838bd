#include "transform/thread_range_branches.h"

#include <optional>
#include <unordered_set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"

namespace tl {
namespace {

constexpr int64_t kWarpgroup = 128;

struct Range {
  int64_t lo, hi;  // [lo, hi)
  bool empty() const { return lo >= hi; }
  bool operator==(const Range&) const = default;
};

class ThreadRangeBranches : public IRMutator {
 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    auto saved_threads = threads_;
    auto saved_index = index_vars_;
    auto saved_any = any_index_vars_;
    threads_ = n->threads.size() == 1 ? n->threads[0] : 0;  // T.ws regions need a 1-D block
    index_vars_.clear();
    any_index_vars_.clear();
    if (!n->thread_vars.empty()) index_vars_.insert(n->thread_vars[0].get());
    for (auto& v : n->thread_vars) any_index_vars_.insert(v.get());
    Stmt out = IRMutator::mutate_kernel(s, n);
    threads_ = saved_threads;
    index_vars_ = saved_index;
    any_index_vars_ = saved_any;
    return out;
  }
  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    // `tx = T.get_thread_binding()` names the thread index.
    bool names_index = is_thread_index(n->value);
    bool names_any = names_index || mentions_thread_index(n->value);
    if (names_index) index_vars_.insert(n->var.get());
    if (names_any) any_index_vars_.insert(n->var.get());
    Stmt out = IRMutator::mutate_let(s, n);
    if (names_index) index_vars_.erase(n->var.get());
    if (names_any) any_index_vars_.erase(n->var.get());
    return out;
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    if (threads_ > 0 && !in_region_) {
      std::vector<std::pair<Range, Stmt>> parts;
      if (split(s, Range{0, threads_}, parts) && needs_region(parts)) {
        std::vector<Stmt> out;
        in_region_ = true;
        for (auto& [r, body] : parts) {
          if (!body) continue;
          Expr region = std::make_shared<CallNode>(DataType::Bool(), "thread_range",
                                                   std::vector<Expr>{make_int(r.lo), make_int(r.hi)}, n->span);
          out.push_back(std::make_shared<IfThenElseNode>(region, mutate(body), nullptr, body->span));
        }
        in_region_ = false;
        return make_seq(out, n->span);
      }
    }
    if (auto* c = as<CallNode>(n->cond); c && c->op == "thread_range") {  // a T.ws region
      bool saved = in_region_;
      in_region_ = true;
      Stmt out = IRMutator::mutate_if(s, n);
      in_region_ = saved;
      return out;
    }
    if (mentions_thread_index(n->cond)) refuse_tile_work(n);
    return IRMutator::mutate_if(s, n);
  }

 private:
  bool is_thread_index(const Expr& e) const {
    if (auto* v = as<VarNode>(e)) return index_vars_.count(v) > 0;
    auto* c = as<CallNode>(e);
    const int64_t* dim = c && c->op == "thread_index" && c->args.size() == 1 ? const_int(c->args[0]) : nullptr;
    return dim && *dim == 0;
  }

  // The threads for which cond holds, within `within`, if cond compares the thread index
  // with constants only (and conjunctions of such comparisons). With `others`, conjuncts
  // that do not depend on the thread index are allowed and collected there
  // (`if tx < 128 and k > 0:`).
  std::optional<Range> range_of(const Expr& cond, Range within, std::vector<Expr>* others = nullptr) const {
    auto* b = as<BinaryNode>(cond);
    if (b && b->op == BinaryOp::And) {
      auto l = range_of(b->a, within, others);
      if (!l) return std::nullopt;
      return range_of(b->b, *l, others);
    }
    if (others && !mentions_thread_index(cond)) {
      others->push_back(cond);
      return within;
    }
    if (!b) return std::nullopt;
    const int64_t* k = nullptr;
    BinaryOp op = b->op;
    if (is_thread_index(b->a) && (k = const_int(b->b))) {
    } else if (is_thread_index(b->b) && (k = const_int(b->a))) {
      // c < tx is tx > c, and so on.
      switch (op) {
        case BinaryOp::LT: op = BinaryOp::GT; break;
        case BinaryOp::LE: op = BinaryOp::GE; break;
        case BinaryOp::GT: op = BinaryOp::LT; break;
        case BinaryOp::GE: op = BinaryOp::LE; break;
        default: break;
      }
    } else {
      return std::nullopt;
    }
    Range r = within;
    switch (op) {
      case BinaryOp::LT: r.hi = std::min(r.hi, *k); break;
      case BinaryOp::LE: r.hi = std::min(r.hi, *k + 1); break;
      case BinaryOp::GT: r.lo = std::max(r.lo, *k + 1); break;
      case BinaryOp::GE: r.lo = std::max(r.lo, *k); break;
      default: return std::nullopt;
    }
    return r;
  }

  // Only branches holding what is spread over the threads (tile operators, T.Parallel
  // loops, fragments) change meaning as regions; others stay plain branches.
  static bool needs_region(const std::vector<std::pair<Range, Stmt>>& parts) {
    struct Finder : IRVisitor {
      bool found = false;
      using IRVisitor::visit;
      void visit_tile_op(const TileOpNode* n) override { found = true; }
      void visit_for(const ForNode* n) override {
        found = found || n->for_kind == ForKind::Parallel;
        IRVisitor::visit_for(n);
      }
      void visit_store(const BufferStoreNode* n) override {
        found = found || n->buffer->is_fragment();
        IRVisitor::visit_store(n);
      }
      void visit_load(const BufferLoadNode* n) override {
        found = found || n->buffer->is_fragment();
        IRVisitor::visit_load(n);
      }
    } finder;
    for (auto& [r, body] : parts)
      if (body) finder.visit(body);
    return finder.found;
  }

  bool mentions_thread_index(const Expr& e) const {
    bool found = false;
    for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* x) {
      if (auto* v = dynamic_cast<const VarNode*>(x)) found = found || any_index_vars_.count(v) > 0;
      if (auto* c = dynamic_cast<const CallNode*>(x))
        found = found || c->op == "thread_index" || c->op == "thread_range";  // T.ws's test too
    });
    return found;
  }

  // A tile operator or T.Parallel loop is lowered for all the threads of its region; under a
  // branch that only some of them take, the others' share would never be done.
  static void refuse_tile_work(const IfThenElseNode* n) {
    struct Finder : IRVisitor {
      Span found;
      bool any = false;
      using IRVisitor::visit;
      void visit_tile_op(const TileOpNode* t) override {
        if (!any && t->op != "annotate_layout") any = true, found = t->span;
      }
      void visit_for(const ForNode* f) override {
        if (!any && f->for_kind == ForKind::Parallel) any = true, found = f->span;
        IRVisitor::visit_for(f);
      }
    } finder;
    finder.visit(n->then_case);
    if (n->else_case) finder.visit(n->else_case);
    if (!finder.any) return;
    fail(ErrorKind::Unsupported, finder.found,
         "this tile operation is under a branch on the thread index (line " + std::to_string(n->span.line) +
             ") that only some of the block's threads take, and its work is spread over all of them",
         "branch over whole warpgroups (`if tx < 128:` ... `else:`, the bounds multiples of 128, which makes each "
         "branch a region of its own threads, as T.ws does), or move the tile operation out of the branch");
  }

  static bool whole_warpgroups(Range r) { return r.lo % kWarpgroup == 0 && r.hi % kWarpgroup == 0; }

  // Splits `if c: a else: b` (b possibly another such branch: elif) over the threads in
  // `within` into (range, body) parts, each a run of whole warpgroups. False when some
  // condition is not of that form: the branch is kept as written.
  bool split(const Stmt& s, Range within, std::vector<std::pair<Range, Stmt>>& parts) const {
    auto* n = as<IfThenElseNode>(s);
    if (!n) {
      if (!whole_warpgroups(within)) return false;
      parts.push_back({within, s});
      return true;
    }
    std::vector<Expr> others;
    auto taken = range_of(n->cond, within, &others);
    if (!taken) return false;
    if (taken->empty()) {  // no thread takes the branch: the else branch is everyone's
      if (!n->else_case) return true;
      return split(n->else_case, within, parts);
    }
    if (!whole_warpgroups(*taken)) return false;
    if (!others.empty()) {
      // The region's threads test the rest; the threads that skip the branch are then no
      // longer one range, so there is no else branch to give a region.
      if (n->else_case) return false;
      Expr rest = others[0];
      for (size_t i = 1; i < others.size(); ++i) rest = land(rest, others[i], n->span);
      parts.push_back({*taken, std::make_shared<IfThenElseNode>(rest, n->then_case, nullptr, n->span)});
      return true;
    }
    // The threads that skip the branch: what remains of `within`, in one run.
    Range rest;
    if (taken->lo == within.lo) rest = Range{taken->hi, within.hi};
    else if (taken->hi == within.hi) rest = Range{within.lo, taken->lo};
    else return false;
    parts.push_back({*taken, n->then_case});
    if (!n->else_case) return true;
    if (rest.empty()) return true;  // no thread takes the else branch
    return split(n->else_case, rest, parts);
  }

  int64_t threads_ = 0;
  bool in_region_ = false;  // T.ws regions do not nest
  std::unordered_set<const VarNode*> index_vars_;      // the thread index along x, by its names
  std::unordered_set<const VarNode*> any_index_vars_;  // values that depend on any thread index
};

}  // namespace

PrimFunc thread_range_branches(const PrimFunc& f) { return with_body(f, ThreadRangeBranches().mutate(f->body)); }

}  // namespace tl
