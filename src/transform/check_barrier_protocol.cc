#include "transform/check_barrier_protocol.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "layout/layout.h"
#include "transform/pass.h"
#include "transform/ws_roles.h"

namespace tl {
namespace {

// One mbarrier operation of a loop body, with the conditions around it.
struct BarrierOp {
  std::string op;  // mbarrier_wait, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_arrive_cluster
  std::vector<Expr> conds;
  const BufferNode* buffer = nullptr;
  Expr index, parity;
  Span span;
  // mbarrier_arrive_cluster: one arrival per warp on the barrier of each of this many blocks.
  // The blocks of a cluster run the same program, so each barrier receives the arrivals
  // of one block times this count.
  int64_t cluster_blocks = 0;
};

struct Role {
  const ForNode* loop = nullptr;
  std::vector<BarrierOp> ops;
  // Operations on the tiles' barriers of producer_tile_loads before and after the loop, once
  // a run.
  std::vector<BarrierOp> pre, post;
  int64_t threads = 1;  // threads that run each operation
};

void collect(const Stmt& s, std::vector<Expr>& conds, std::vector<BarrierOp>& out) {
  if (!s) return;
  if (auto* seq = as<SeqStmtNode>(s)) {
    for (auto& x : seq->seq) collect(x, conds, out);
  } else if (auto* i = as<IfThenElseNode>(s)) {
    conds.push_back(i->cond);
    collect(i->then_case, conds, out);
    conds.pop_back();
  } else if (auto* a = as<AllocateNode>(s)) {
    collect(a->body, conds, out);
  } else if (auto* l = as<LetStmtNode>(s)) {
    collect(l->body, conds, out);
  } else if (auto* f = as<ForNode>(s)) {
    collect(f->body, conds, out);  // unrolled work inside an iteration holds no barrier ops
  } else if (auto* ev = as<EvaluateNode>(s)) {
    auto* c = as<CallNode>(ev->value);
    // Waits and arrivals; expect_tx alone adds bytes, not an arrival (TMA delivers them).
    if (!c || (c->op != "mbarrier_wait" && c->op != "mbarrier_arrive" && c->op != "mbarrier_arrive_expect_tx" &&
               c->op != "mbarrier_arrive_cluster"))
      return;
    auto* bar = as<BufferLoadNode>(c->args.at(0));
    out.push_back({c->op, conds, bar->buffer.get(), bar->indices.at(0), c->op == "mbarrier_wait" ? c->args.at(1) : Expr(), ev->span,
                   c->op == "mbarrier_arrive_cluster" ? *const_int(c->args.at(1)) : 0});
  }
}

// The pipeline's iteration counter (a loop inside another loop) read as a variable.
class CounterAsVar : public IRMutator {
 public:
  CounterAsVar(Buffer counter, Var var) : counter_(std::move(counter)), var_(std::move(var)) {}
  using IRMutator::mutate;

 protected:
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    return n->buffer == counter_ ? Expr(var_) : IRMutator::mutate_load(e, n);
  }

 private:
  Buffer counter_;
  Var var_;
};

class Checker : public IRVisitor {
 public:
  std::vector<std::string> report;
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* k) override {
    roles_.clear();
    counts_.clear();
    counter_ = nullptr;
    tile_counter_ = nullptr;
    tile_bars_.clear();
    base_ = nullptr;
    run_index_ = nullptr;
    for (size_t d = 0; d < k->block_vars.size(); ++d)
      if (const int64_t* g = const_int(k->grid[d])) analyzer_.bind(k->block_vars[d].get(), 0, *g);
    IRVisitor::visit_kernel(k);
    if (roles_.empty()) return;
    if (roles_.size() != 2)
      fail(ErrorKind::Internal, k->span, "internal: a warp-specialised kernel needs one producer and one consumer loop");
    std::vector<int64_t> trips;
    int64_t stages = std::get<int64_t>(roles_[0].loop->attrs.at("num_stages"));
    // A constant trip count is the only one (the code may have been simplified for it);
    // a run-time one is tried around the stage count.
    int64_t extent = -1;
    try {
      extent = evaluate_index(roles_[0].loop->extent, {});
    } catch (const CompileError&) {  // a run-time trip count
    }
    if (extent >= 0) {
      trips.push_back(extent);
    } else {
      // Up to the extent's bound: the code may have been simplified for it.
      int64_t most = analyzer_.const_int_bound(roles_[0].loop->extent).max;
      for (int64_t n : {int64_t(0), int64_t(1), int64_t(2), stages - 1, stages, stages + 1, 2 * stages,
                        2 * stages + 1, 3 * stages + 2})
        if (n >= 0 && n <= most && std::find(trips.begin(), trips.end(), n) == trips.end()) trips.push_back(n);
    }
    // A loop inside another loop runs several times, its iterations counted across the
    // runs: the same trip count three times, and runs of mixed trip counts.
    std::vector<std::vector<int64_t>> runs;
    for (int64_t n : trips) runs.push_back(counter_ ? std::vector<int64_t>{n, n, n} : std::vector<int64_t>{n});
    if (counter_ && trips.size() > 2) {
      runs.push_back(trips);
      runs.push_back(std::vector<int64_t>(trips.rbegin(), trips.rend()));
    }
    auto counter_as_var = [&](const Buffer& counter, const Var& var) {
      CounterAsVar as_var(counter, var);
      for (auto& r : roles_)
        for (auto* ops : {&r.ops, &r.pre, &r.post})
          for (auto& op : *ops) {
            for (auto& c : op.conds) c = as_var.mutate(c);
            op.index = as_var.mutate(op.index);
            if (op.parity) op.parity = as_var.mutate(op.parity);
          }
    };
    if (counter_) {
      base_ = std::make_shared<VarNode>("pipeline_iter", DataType::Int(32));
      counter_as_var(counter_, base_);
    }
    if (tile_counter_) {
      run_index_ = std::make_shared<VarNode>("tile_iter", DataType::Int(32));
      counter_as_var(tile_counter_, run_index_);
    }
    for (auto& run : runs) simulate(run, k->span);
    std::string list;
    for (int64_t n : trips) list += (list.empty() ? "" : ", ") + std::to_string(n);
    report.push_back(k->span.str() + ": barrier protocol checked (no hang, alternating parities) for trip counts " + list +
                     (counter_ ? " (each three times in a row, and in runs of mixed counts)" : ""));
  }

  void visit_if(const IfThenElseNode* n) override {
    // The role of the threads a branch runs: tx == T is the producer's one thread.
    int64_t saved = threads_;
    if (auto* b = as<BinaryNode>(n->cond); b && b->op == BinaryOp::EQ) threads_ = 1;
    if (auto* b = as<BinaryNode>(n->cond); b && b->op == BinaryOp::LT)
      if (const int64_t* t = const_int(b->b)) threads_ = *t;
    visit(n->then_case);
    if (n->else_case) {
      threads_ = saved;
      visit(n->else_case);
    }
    threads_ = saved;
  }

  void visit_allocate(const AllocateNode* n) override {
    if (n->attrs.count("pipeline_counter")) counter_ = n->buffer;
    if (n->attrs.count("tile_counter")) tile_counter_ = n->buffer;
    if (n->attrs.count("tile_barriers")) tile_bars_.insert(n->buffer.get());
    IRVisitor::visit_allocate(n);
  }

  void visit_let(const LetStmtNode* n) override {
    if (n->var->dtype.is_integer()) analyzer_.bind(n->var.get(), analyzer_.const_int_bound(n->value));
    IRVisitor::visit_let(n);
  }

  void visit_for(const ForNode* n) override {
    if (!n->attrs.count("ws_pipeline")) {
      // An enclosing loop's variable takes the values of its range (the trip counts tried
      // stay within what the code was simplified for: a pipeline of `i` iterations inside
      // `for i in range(2)` runs at most once).
      arith::ConstIntBound lo = analyzer_.const_int_bound(n->min), ext = analyzer_.const_int_bound(n->extent);
      if (ext.max >= 1 && ext.max < arith::ConstIntBound::kPosInf && lo.min > arith::ConstIntBound::kNegInf &&
          lo.max < arith::ConstIntBound::kPosInf)
        analyzer_.bind(n->var.get(), arith::ConstIntBound{lo.min, lo.max + ext.max - 1});
      return IRVisitor::visit_for(n);
    }
    Role r;
    r.loop = n;
    r.threads = threads_;
    std::vector<Expr> conds;
    collect(n->body, conds, r.ops);
    roles_.push_back(r);
  }

  void visit_seq(const SeqStmtNode* n) override {
    // A role's operations on the tiles' barriers around its loop, in the loop's sequence.
    size_t at = n->seq.size();
    for (size_t i = 0; i < n->seq.size(); ++i)
      if (is_ws_loop(n->seq[i])) at = i;
    std::vector<BarrierOp> pre, post;
    if (at < n->seq.size()) {
      for (size_t i = 0; i < n->seq.size(); ++i) {
        std::vector<Expr> conds;
        if (i != at) collect(n->seq[i], conds, i < at ? pre : post);
      }
      auto tiles_only = [&](std::vector<BarrierOp>& ops) {
        ops.erase(std::remove_if(ops.begin(), ops.end(), [&](const BarrierOp& op) { return !tile_bars_.count(op.buffer); }),
                  ops.end());
      };
      tiles_only(pre);
      tiles_only(post);
    }
    size_t before = roles_.size();
    IRVisitor::visit_seq(n);
    if (at < n->seq.size() && roles_.size() == before + 1) {
      roles_.back().pre = std::move(pre);
      roles_.back().post = std::move(post);
    }
  }

  void visit_evaluate(const EvaluateNode* n) override {
    auto* c = as<CallNode>(n->value);
    if (c && c->op == "mbarrier_init") {
      auto* bar = as<BufferLoadNode>(c->args.at(0));
      counts_[{bar->buffer.get(), evaluate_index(bar->indices.at(0), {})}] = evaluate_index(c->args.at(1), {});
    }
  }

 private:
  struct Barrier {
    int64_t pending = 0, completed = 0;
  };

  void simulate(const std::vector<int64_t>& run, Span span) {
    std::map<std::pair<const BufferNode*, int64_t>, Barrier> bars;
    for (auto& [index, count] : counts_) bars[index].pending = count;
    // Each role's operations for iterations 0..n-1, conditions applied.
    struct Event {
      const BarrierOp* op;
      std::pair<const BufferNode*, int64_t> bar;
      int64_t parity;
    };
    std::vector<std::vector<Event>> programs(roles_.size());
    for (size_t r = 0; r < roles_.size(); ++r) {
      // A loop that starts at a run-time value (the first query tile below a causal
      // diagonal) addresses its stages from there: its variables take 0 here.
      IndexEnv start;
      struct FreeVars : IRVisitor {
        IndexEnv* env;
        void visit_var(const VarNode* v) override { (*env)[v] = 0; }
      } free_vars;
      free_vars.env = &start;
      free_vars.visit(roles_[r].loop->min);
      const int64_t first = evaluate_index(roles_[r].loop->min, start);
      int64_t base = 0, run_index = 0;
      auto emit = [&](const std::vector<BarrierOp>& ops, const IndexEnv& env) {
        for (auto& op : ops) {
          bool on = true;
          for (auto& c : op.conds) on = on && evaluate_index(c, env) != 0;
          if (on)
            programs[r].push_back({&op, {op.buffer, evaluate_index(op.index, env)},
                                   op.parity ? evaluate_index(op.parity, env) : 0});
        }
      };
      for (int64_t n : run) {
        IndexEnv around = start;
        if (base_) around[base_.get()] = base;
        if (run_index_) around[run_index_.get()] = run_index;
        emit(roles_[r].pre, around);
        for (int64_t i = 0; i < n; ++i) {
          IndexEnv env = around;
          env[roles_[r].loop->var.get()] = i + first;
          emit(roles_[r].ops, env);
        }
        base += n;
        emit(roles_[r].post, around);
        ++run_index;
      }
    }
    std::string n;
    for (int64_t x : run) n += (n.empty() ? "" : " then ") + std::to_string(x);
    std::vector<size_t> pc(roles_.size(), 0);
    std::vector<std::map<std::pair<const BufferNode*, int64_t>, int64_t>> waits(roles_.size());  // waits done per barrier
    auto name = [](const std::pair<const BufferNode*, int64_t>& bar) {
      return bar.first->name + "[" + std::to_string(bar.second) + "]";
    };
    auto where = [&](const Event& e) { return "trip count " + n + ", " + e.op->op + " on barrier " + name(e.bar); };
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t r = 0; r < roles_.size(); ++r) {
        while (pc[r] < programs[r].size()) {
          const Event& e = programs[r][pc[r]];
          auto it = counts_.find(e.bar);
          if (it == counts_.end())
            fail(ErrorKind::Internal, e.op->span, "internal: barrier protocol: " + where(e) + " is never initialised");
          Barrier& b = bars[e.bar];
          if (e.op->op == "mbarrier_wait") {
            int64_t k = waits[r][e.bar];
            if ((k & 1) != e.parity)
              fail(ErrorKind::Internal, e.op->span, "internal: barrier protocol: " + where(e) + " waits for parity " +
                                                        std::to_string(e.parity) + " where phase " + std::to_string(k) + " is next");
            if (b.completed <= k) break;  // blocked
            if (b.completed > k + 1)
              fail(ErrorKind::Internal, e.op->span, "internal: barrier protocol: " + where(e) +
                                                        ": the barrier ran two phases ahead of its waiter");
            waits[r][e.bar] = k + 1;
          } else {
            b.pending -= e.op->cluster_blocks ? roles_[r].threads / 32 * e.op->cluster_blocks : roles_[r].threads;
            if (b.pending < 0)
              fail(ErrorKind::Internal, e.op->span, "internal: barrier protocol: " + where(e) + ": more arrivals than the phase takes");
            if (b.pending == 0) {
              ++b.completed;
              b.pending = it->second;
            }
          }
          ++pc[r];
          moved = true;
        }
      }
    }
    for (size_t r = 0; r < roles_.size(); ++r)
      if (pc[r] < programs[r].size())
        fail(ErrorKind::Internal, span, "internal: barrier protocol: the pipeline would hang: " + where(programs[r][pc[r]]) +
                                            " is never satisfied");
    for (auto& [index, b] : bars)
      if (b.pending != counts_[index])
        fail(ErrorKind::Internal, span, "internal: barrier protocol: trip count " + n + ": barrier " + name(index) +
                                            " is left with a partial phase");
  }

  std::vector<Role> roles_;
  std::map<std::pair<const BufferNode*, int64_t>, int64_t> counts_;
  Buffer counter_;  // the iteration counter of a pipeline inside another loop
  Buffer tile_counter_;  // the count of the loop's runs (producer_tile_loads)
  std::unordered_set<const BufferNode*> tile_bars_;  // the tiles' mbarriers (producer_tile_loads)
  Var base_, run_index_;
  arith::Analyzer analyzer_;
  int64_t threads_ = 1;
};

}  // namespace

PrimFunc check_barrier_protocol(const PrimFunc& f) {
  Checker c;
  c.visit(f->body);
  return with_report(f, c.report);
}

}  // namespace tl
