#include "transform/defer_tma_store_waits.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

// A sequence's statements with nested sequences opened (the same order).
std::vector<Stmt> flattened(const std::vector<Stmt>& stmts) {
  std::vector<Stmt> out;
  for (auto& s : stmts) {
    if (auto* seq = as<SeqStmtNode>(s)) {
      auto inner = flattened(seq->seq);
      out.insert(out.end(), inner.begin(), inner.end());
    } else if (s) {
      out.push_back(s);
    }
  }
  return out;
}

const CallNode* call_of(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  return ev ? as<CallNode>(ev->value) : nullptr;
}

bool is_barrier(const Stmt& s) {
  auto* call = call_of(s);
  return call && (call->op == "sync_threads" || call->op == "named_barrier_sync");
}

bool is_wait_read(const Stmt& s) {
  auto* call = call_of(s);
  const int64_t* n = call && call->op == "tma_store_wait_read" && call->args.size() == 1 ? const_int(call->args[0])
                                                                                        : nullptr;
  return n && *n == 0;
}

// Byte ranges of the shared buffers the shared-memory plan placed; a buffer without one is
// its own storage.
using Ranges = std::unordered_map<const BufferNode*, std::pair<int64_t, int64_t>>;

bool same_storage(const BufferNode* a, const BufferNode* b, const Ranges& ranges) {
  if (a == b) return true;
  auto ia = ranges.find(a), ib = ranges.find(b);
  if (ia == ranges.end() || ib == ranges.end()) return false;
  return ia->second.first < ib->second.second && ib->second.first < ia->second.second;
}

// The shared buffers that the TMA stores in s read (their address_of arguments).
std::vector<const BufferNode*> tma_sources(const Stmt& s) {
  std::vector<const BufferNode*> out;
  bool stores = false;
  for_each_expr(s, [&](const ExprNode* e) {
    auto* c = dynamic_cast<const CallNode*>(e);
    if (!c || (c->op != "tma_store" && c->op != "tma_reduce_add")) return;
    stores = true;
    for (auto& a : c->args)
      for_each_expr(std::make_shared<EvaluateNode>(a, a->span), [&](const ExprNode* x) {
        auto* l = dynamic_cast<const BufferLoadNode*>(x);
        if (l && l->buffer->is_shared()) out.push_back(l->buffer.get());
      });
  });
  return stores ? out : std::vector<const BufferNode*>{};
}

// Whether s may write one of `sources` (an ordinary store, or any call that names it other
// than to read it for a TMA store), or (any_async) issues asynchronous copies of its own (a
// wait for all groups would then wait for those too: harmless, but the move is kept simple).
bool touches(const Stmt& s, const std::vector<const BufferNode*>& sources, const Ranges& ranges,
             bool any_async = true) {
  bool found = false;
  struct V : IRVisitor {
    const std::vector<const BufferNode*>* sources;
    const Ranges* ranges;
    bool* found;
    bool any_async;
    using IRVisitor::visit;
    bool hits(const BufferNode* b) const {
      for (auto* src : *sources)
        if (same_storage(b, src, *ranges)) return true;
      return false;
    }
    void visit_store(const BufferStoreNode* n) override {
      *found = *found || hits(n->buffer.get());
      IRVisitor::visit_store(n);
    }
    void visit_tile_op(const TileOpNode* n) override {  // not lowered yet: any region counts
      for (auto& r : n->regions) *found = *found || hits(r.buffer.get());
      IRVisitor::visit_tile_op(n);
    }
    void visit_call(const CallNode* n) override {
      static const char* const async[] = {"tma_store", "tma_reduce_add", "tma_store_commit", "tma_store_wait_read",
                                          "tma_store_wait", "cp_async", "tma_load", "tma_load_multicast"};
      for (const char* op : async) *found = *found || (any_async && n->op == op);
      if (n->op == "address_of" || n->op == "wgmma_desc" || n->op == "ldmatrix")  // reads only
        return IRVisitor::visit_call(n);
      for (auto& a : n->args)
        for_each_expr(std::make_shared<EvaluateNode>(a, a->span), [&](const ExprNode* x) {
          auto* l = dynamic_cast<const BufferLoadNode*>(x);
          if (l && l->buffer->is_shared() && hits(l->buffer.get())) *found = true;
        });
      IRVisitor::visit_call(n);
    }
  } v;
  v.sources = &sources;
  v.ranges = &ranges;
  v.found = &found;
  v.any_async = any_async;
  v.visit(s);
  return found;
}

class Defer : public IRMutator {
 public:
  explicit Defer(Ranges ranges) : ranges_(std::move(ranges)) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    Stmt inner = IRMutator::mutate_for(s, n);
    auto* loop = as<ForNode>(inner);
    if (!loop || loop->for_kind != ForKind::Serial) return inner;
    // Names the loop binds (its counter, lets and loops inside): a test of one of them may
    // change between iterations.
    bound_in_loop_ = vars_bound_in(loop->body);
    bound_in_loop_.insert(loop->var.get());
    // The statements every iteration runs: the body's sequence, or a warp-specialised
    // role's (`if ws_role(r)`, no else) at its top level.
    std::vector<Stmt> after_loop;
    Stmt body = loop->body;
    if (auto* seq = as<SeqStmtNode>(body)) {
      if (auto moved = defer_in(flattened(seq->seq), after_loop, [](const auto&) { return false; })) {
        body = make_seq(std::move(*moved), seq->span);
      } else {
        std::vector<Stmt> children = seq->seq;
        bool changed = false;
        for (auto& c : children) {
          auto* role = as<IfThenElseNode>(c);
          auto* cond = role ? as<CallNode>(role->cond) : nullptr;
          auto* then = cond && cond->op == "ws_role" && !role->else_case ? as<SeqStmtNode>(role->then_case) : nullptr;
          if (!then) continue;
          // The other roles run beside it without its barriers: they must not write the
          // tiles its stores read (a producer's TMA loads into bytes they share).
          auto others_touch = [&](const std::vector<const BufferNode*>& sources) {
            for (auto& o : children)
              if (o != c && touches(o, sources, ranges_, false)) return true;
            return false;
          };
          if (auto moved = defer_in(flattened(then->seq), after_loop, others_touch)) {
            c = std::make_shared<IfThenElseNode>(role->cond, make_seq(std::move(*moved), then->span), nullptr,
                                                 role->span);
            changed = true;
          }
        }
        if (changed) body = make_seq(std::move(children), seq->span);
      }
    }
    if (body == loop->body) return inner;
    Stmt out = std::make_shared<ForNode>(loop->var, loop->min, loop->extent, loop->for_kind, body, loop->attrs,
                                         loop->span);
    after_loop.insert(after_loop.begin(), out);
    return make_seq(std::move(after_loop), loop->span);
  }

 private:
  // The sequence with each deferrable wait moved before the first barrier that follows
  // its issue (around the loop's back edge); the waits the loop's exit still owes go to
  // after_loop. Nothing when no wait moves.
  std::optional<std::vector<Stmt>> defer_in(
      const std::vector<Stmt>& stmts, std::vector<Stmt>& after_loop,
      const std::function<bool(const std::vector<const BufferNode*>&)>& elsewhere) {
    std::vector<Stmt> out = stmts;
    std::vector<std::pair<size_t, Stmt>> inserts;  // (before index, wait)
    for (size_t k = 0; k < stmts.size(); ++k) {
      auto* issue = as<IfThenElseNode>(stmts[k]);
      auto* block = issue && !issue->else_case ? as<SeqStmtNode>(issue->then_case) : nullptr;
      if (!block || block->seq.size() < 2 || !is_wait_read(block->seq.back())) continue;
      // The issuing thread, the same in every iteration (`tx == 0`): the moved wait runs
      // under the same test.
      auto* eq = as<BinaryNode>(issue->cond);
      const int64_t* zero = eq && eq->op == BinaryOp::EQ ? const_int(eq->b) : nullptr;
      if (!zero || *zero != 0 || !as<VarNode>(eq->a) || bound_in_loop_.count(as<VarNode>(eq->a))) continue;
      std::vector<const BufferNode*> sources = tma_sources(issue->then_case);
      if (sources.empty() || elsewhere(sources)) continue;
      // The first barrier after the issue, provided nothing before it writes the tile.
      std::optional<size_t> barrier;
      for (size_t step = 1; step < stmts.size() && !barrier; ++step) {
        size_t j = (k + step) % stmts.size();
        if (is_barrier(stmts[j])) barrier = j;
        else if (touches(stmts[j], sources, ranges_)) break;
      }
      if (!barrier) continue;
      std::vector<Stmt> kept(block->seq.begin(), block->seq.end() - 1);
      out[k] = std::make_shared<IfThenElseNode>(issue->cond, make_seq(std::move(kept), block->span), nullptr,
                                                issue->span);
      Stmt wait = std::make_shared<IfThenElseNode>(issue->cond, block->seq.back(), nullptr, issue->span);
      inserts.push_back({*barrier, wait});
      after_loop.push_back(wait);
    }
    if (inserts.empty()) return std::nullopt;
    std::sort(inserts.begin(), inserts.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (auto& [at, wait] : inserts) out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), wait);
    return out;
  }

  Ranges ranges_;
  std::unordered_set<const VarNode*> bound_in_loop_;
};

}  // namespace

PrimFunc defer_tma_store_waits(const PrimFunc& f) {
  bool any = false;
  for_each_expr(f->body, [&](const ExprNode* e) {
    auto* c = dynamic_cast<const CallNode*>(e);
    any = any || (c && (c->op == "tma_store" || c->op == "tma_reduce_add"));
  });
  if (!any) return f;
  struct Allocations : IRVisitor {
    Ranges ranges;
    using IRVisitor::visit;
    void visit_allocate(const AllocateNode* n) override {
      auto it = n->attrs.find("offset");
      int64_t size = n->buffer->const_size();
      if (it != n->attrs.end() && std::holds_alternative<int64_t>(it->second) && size >= 0) {
        int64_t lo = std::get<int64_t>(it->second);
        ranges[n->buffer.get()] = {lo, lo + size * n->buffer->dtype.bytes()};
      }
      IRVisitor::visit_allocate(n);
    }
  } a;
  a.visit(f->body);
  return with_body(f, Defer(std::move(a.ranges)).mutate(f->body));
}

}  // namespace tl
