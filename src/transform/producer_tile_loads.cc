#include "transform/producer_tile_loads.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/alias.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/copy_tma.h"
#include "op/region.h"
#include "transform/add_stage.h"
#include "transform/ws_roles.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

// The statements from `s` down to the warp-specialised loop, both included (empty when s
// holds none).
bool path_to_ws_loop(const Stmt& s, std::vector<Stmt>& path) {
  if (!s) return false;
  path.push_back(s);
  if (is_ws_loop(s)) return true;
  std::vector<Stmt> children;
  if (auto* seq = as<SeqStmtNode>(s)) children = seq->seq;
  else if (auto* f = as<ForNode>(s)) children = {f->body};
  else if (auto* w = as<WhileNode>(s)) children = {w->body};
  else if (auto* i = as<IfThenElseNode>(s)) children = {i->then_case, i->else_case};
  else if (auto* l = as<LetStmtNode>(s)) children = {l->body};
  else if (auto* a = as<AllocateNode>(s)) children = {a->body};
  for (auto& ch : children)
    if (path_to_ws_loop(ch, path)) return true;
  path.pop_back();
  return false;
}

bool passes_through(const Stmt& s) { return as<SeqStmtNode>(s) || as<LetStmtNode>(s) || as<AllocateNode>(s); }

class TileLoads : public IRMutator {
 public:
  explicit TileLoads(const Target& target) : target_(target) {}
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    std::vector<Stmt> path;
    if (!path_to_ws_loop(n->body, path)) return s;
    // Nothing carries over from another kernel of the function.
    copies_.clear();
    staged_.clear();
    init_done_ = false;
    counter_ = nullptr;
    pipeline_bars_ = nullptr;
    loop_ = path.back();
    // The pipeline's own mbarriers (whose initialisation gains these tiles' pair).
    for_each_expr(loop_, [&](const ExprNode* e) {
      auto* call = dynamic_cast<const CallNode*>(e);
      auto* b = call && call->op == "mbarrier_wait" ? as<BufferLoadNode>(call->args.at(0)) : nullptr;
      if (b && !pipeline_bars_) pipeline_bars_ = b->buffer.get();
    });
    // The copies run once for each run of the loop: they sit in a sequence that leads to the
    // loop through lets and allocations only, before the loop's statement.
    size_t k = path.size() - 1;
    while (k > 0 && passes_through(path[k - 1])) --k;
    repeated_ = k > 0;  // the loop runs inside another loop or a branch
    std::unordered_set<const BufferNode*> written = buffers_written(n->body);
    StorageAliases aliases = collect_storage_aliases(n->body);
    for (size_t p = k; p + 1 < path.size(); ++p) {
      auto* seq = as<SeqStmtNode>(path[p]);
      if (!seq) continue;
      for (auto& st : seq->seq) {
        if (st == path[p + 1]) break;
        if (eligible(st, n->body, written, aliases)) copies_.push_back(st);
      }
    }
    if (copies_.empty()) return s;
    Span sp = n->span;
    // Where the loop runs again and the shared memory allows, the tiles get two buffers: the
    // producer loads the next run's while the consumers still read this run's, and the next
    // run's first stages of the pipeline need not wait for this run's release.
    int64_t bytes = 0, extra = 0;
    struct Shared : IRVisitor {
      int64_t* bytes;
      using IRVisitor::visit;
      void visit_allocate(const AllocateNode* a) override {
        if (a->buffer->is_shared() && a->buffer->const_size() > 0)
          *bytes += a->buffer->const_size() * a->buffer->dtype.bytes();
        IRVisitor::visit_allocate(a);
      }
    } shared;
    shared.bytes = &bytes;
    shared.visit(n->body);
    for (auto& st : copies_) extra += tma_load_bytes(*as<TileOpNode>(st));
    const int64_t slack = 2048;  // mbarriers, alignment
    stages_ = repeated_ && bytes + extra + slack <= target_.max_shared_bytes ? 2 : 1;
    if (stages_ == 2)
      for (auto& st : copies_) {
        const Buffer& dst = as<TileOpNode>(st)->regions[1].buffer;
        std::vector<Expr> shape = {c(2)};
        shape.insert(shape.end(), dst->shape.begin(), dst->shape.end());
        staged_[dst.get()] = make_buffer(dst->name, dst->dtype, shape, dst->scope, dst->span);
      }
    bars_ = make_buffer("tile_mbar", DataType::UInt(64), {c(2 * stages_)}, scope::kSharedDyn, sp);
    if (repeated_) counter_ = make_buffer("tile_iter", DataType::Int(32), {c(1)}, scope::kLocalVar, sp);
    consumers_ = n->num_threads();
    Stmt body = mutate(n->body);
    if (!init_done_)
      fail(ErrorKind::Internal, n->span, "internal: producer tile loads: the pipeline's mbarrier set-up is missing");
    body = std::make_shared<AllocateNode>(bars_, body, Attrs{{"pipelined", int64_t(1)}, {"tile_barriers", int64_t(1)}}, sp);
    if (counter_)
      body = std::make_shared<AllocateNode>(counter_, body, Attrs{{"init", Expr(c(0))}, {"tile_counter", int64_t(1)}}, sp);
    for (auto& st : copies_) {
      auto* op = as<TileOpNode>(st);
      report.push_back(st->span.str() + ": T.copy into " + op->regions[1].buffer->name +
                       " by TMA from the pipeline's producer, on mbarriers of its own" +
                       (!repeated_     ? " (overlapping the pipeline's first loads)"
                        : stages_ == 2 ? ", in 2 buffers (the next run's tile loads while the loop reads this run's)"
                                       : " (the next run's tile loads once this run's loop has finished: no room "
                                         "for a second buffer)"));
    }
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, n->threads, body, n->span, n->cluster);
  }

  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (auto& st : n->seq) {
      if (std::find(copies_.begin(), copies_.end(), st) != copies_.end()) {
        changed = true;  // issued by the producer before the loop now
        continue;
      }
      if (st == loop_) {
        changed = true;
        out.push_back(before_loop(st->span));
        out.push_back(stages_ == 2 ? AddStage(staged_, slot(st->span)).mutate(st) : st);
        if (repeated_) out.push_back(after_loop(st->span));
        continue;
      }
      Stmt m = mutate(st);
      changed = changed || m != st;
      out.push_back(m);
    }
    return changed ? make_seq(out, n->span) : s;
  }

  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    Stmt body = mutate(n->body);
    auto it = staged_.find(n->buffer.get());
    if (it != staged_.end()) return std::make_shared<AllocateNode>(it->second, body, n->attrs, n->span);
    return body == n->body ? s : std::make_shared<AllocateNode>(n->buffer, body, n->attrs, n->span);
  }

  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    // The one thread that initialises the pipeline's mbarriers initialises these too.
    if (!init_done_ && !n->else_case && initialises_barriers(n->then_case)) {
      init_done_ = true;
      Span sp = n->span;
      std::vector<Stmt> init = {n->then_case};
      for (int64_t k = 0; k < stages_; ++k) {
        init.push_back(call_stmt("mbarrier_init", {bar(k, sp), c(1)}, sp));
        init.push_back(call_stmt("mbarrier_init", {bar(stages_ + k, sp), c(consumers_)}, sp));
      }
      return std::make_shared<IfThenElseNode>(n->cond, make_seq(init, sp), nullptr, sp);
    }
    return IRMutator::mutate_if(s, n);
  }

 private:
  // A global -> shared T.copy the producer can issue: a TMA tile whose destination nothing
  // else writes or reads outside the pipelined loop, at coordinates made of indices and
  // global tensors the kernel never writes (the producer computes them too).
  bool eligible(const Stmt& st, const Stmt& body, const std::unordered_set<const BufferNode*>& written,
                const StorageAliases& aliases) const {
    auto* op = as<TileOpNode>(st);
    if (!op || op->op != "copy" || op->attrs.count("tma") || op->regions.size() != 2) return false;
    const Buffer &src = op->regions[0].buffer, &dst = op->regions[1].buffer;
    if (!src->is_global() || !dst->is_shared() || aliases.aliased(dst)) return false;
    if (!why_not_tma_load(*op, target_).empty()) return false;
    bool index_only = true;
    for (auto& r : op->regions[0].ranges)
      for (const Expr& e : {r.min, r.extent})
        for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* x) {
          if (auto* l = dynamic_cast<const BufferLoadNode*>(x))
            index_only = index_only && l->buffer->is_global() && !written.count(l->buffer.get());
          if (auto* call = dynamic_cast<const CallNode*>(x)) index_only = index_only && call->op != "thread_index";
        });
    if (!index_only) return false;
    // Every other access to the destination lies in the pipelined loop, and only reads it.
    struct Accesses : IRVisitor {
      const BufferNode* dst;
      const StmtNode *copy, *loop;
      int inside = 0;
      bool ok = true;
      using IRVisitor::visit;
      void visit_for(const ForNode* f) override {
        inside += f == loop;
        IRVisitor::visit_for(f);
        inside -= f == loop;
      }
      void visit_tile_op(const TileOpNode* t) override {
        if (t == copy) return;
        for (auto& r : t->regions)
          if (r.buffer.get() == dst && !inside) ok = false;
        if (inside && buffers_written(std::make_shared<TileOpNode>(*t)).count(dst)) ok = false;
        IRVisitor::visit_tile_op(t);
      }
      void visit_load(const BufferLoadNode* l) override {
        if (l->buffer.get() == dst && !inside) ok = false;
        IRVisitor::visit_load(l);
      }
      void visit_store(const BufferStoreNode* s) override {
        if (s->buffer.get() == dst) ok = false;
        IRVisitor::visit_store(s);
      }
    } accesses;
    accesses.dst = dst.get();
    accesses.copy = op;
    accesses.loop = loop_.get();
    accesses.visit(body);
    return accesses.ok;
  }

  bool initialises_barriers(const Stmt& s) const {
    bool found = false;
    for_each_expr(s, [&](const ExprNode* e) {
      auto* call = dynamic_cast<const CallNode*>(e);
      auto* b = call && call->op == "mbarrier_init" ? as<BufferLoadNode>(call->args.at(0)) : nullptr;
      found = found || (b && b->buffer.get() == pipeline_bars_);
    });
    return found;
  }

  Expr bar(int64_t k, Span sp) const { return make_load(bars_, {c(k)}, sp); }
  Expr count(Span sp) const { return make_load(counter_, {c(0)}, sp); }
  // The run's buffer and the phase of its barriers: run i uses slot i % stages, round i / stages.
  // A single run (no count) uses buffer 0 and phase 0.
  Expr slot(Span sp) const { return stages_ == 1 ? c(0) : floormod(count(sp), c(stages_), sp); }
  Expr round(Span sp) const { return repeated_ ? floordiv(count(sp), c(stages_), sp) : c(0); }
  Expr full(Span sp) const { return make_load(bars_, {slot(sp)}, sp); }
  Expr empty(Span sp) const { return make_load(bars_, {add(slot(sp), c(stages_), sp)}, sp); }

  // The producer: once the consumers have released the buffer's last tiles, the bytes of
  // every copy on the full barrier and the copies; the consumers: wait for them.
  Stmt before_loop(Span sp) const {
    std::vector<Stmt> produce;
    if (repeated_)
      produce.push_back(std::make_shared<IfThenElseNode>(
          binary(BinaryOp::GE, count(sp), c(stages_), sp),
          call_stmt("mbarrier_wait", {empty(sp), floormod(add(round(sp), c(1), sp), c(2), sp)}, sp), nullptr, sp));
    int64_t bytes = 0;
    for (auto& st : copies_) bytes += tma_load_bytes(*as<TileOpNode>(st));
    Expr full_bar = full(sp);
    produce.push_back(call_stmt("mbarrier_arrive_expect_tx", {full_bar, c(bytes)}, sp));
    for (auto& st : copies_) {
      auto* op = as<TileOpNode>(st);
      Attrs attrs = op->attrs;
      attrs["tma"] = int64_t(1);
      Stmt copy = std::make_shared<TileOpNode>(op->op, op->regions, std::vector<Expr>{full_bar}, attrs, op->span);
      produce.push_back(stages_ == 2 ? AddStage(staged_, slot(sp)).mutate(copy) : copy);
    }
    Expr parity = floormod(round(sp), c(2), sp);
    return make_seq({role_branch(1, make_seq(produce, sp), sp), role_branch(0, call_stmt("mbarrier_wait", {full_bar, parity}, sp), sp)},
                    sp);
  }

  // After the loop (whose products have all completed) the consumers release the tiles.
  Stmt after_loop(Span sp) const {
    Stmt next = std::make_shared<BufferStoreNode>(counter_, add(count(sp), c(1), sp), std::vector<Expr>{c(0)}, sp);
    return make_seq({role_branch(0, call_stmt("mbarrier_arrive", {empty(sp)}, sp), sp), next}, sp);
  }

  const Target& target_;
  Stmt loop_;
  std::vector<Stmt> copies_;
  bool repeated_ = false, init_done_ = false;
  Buffer bars_, counter_;
  int64_t stages_ = 1;
  std::unordered_map<const BufferNode*, Buffer> staged_;  // the tiles' buffers with two stages
  const BufferNode* pipeline_bars_ = nullptr;
  int64_t consumers_ = 0;
};

}  // namespace

PrimFunc producer_tile_loads(const PrimFunc& f, const Target& target) {
  if (target.disable_producer_tile_loads) return f;
  TileLoads pass(target);
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
