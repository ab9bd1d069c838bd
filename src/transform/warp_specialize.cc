#include "transform/warp_specialize.h"

#include <set>
#include <unordered_set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/region.h"
#include "transform/pass.h"
#include "transform/ws_roles.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

// The work of one role in a WS loop body: the branch `if ws_role(r): body`; the consumers
// also keep any barrier the loop body has outside the branches, in its place.
Stmt role_body(const ForNode* loop, int64_t role) {
  auto* seq = as<SeqStmtNode>(loop->body);
  std::vector<Stmt> out;
  bool found = false;
  for (auto& s : seq ? seq->seq : std::vector<Stmt>{}) {
    if (int64_t r = role_of(s); r >= 0) {
      if (r == role) {
        out.push_back(as<IfThenElseNode>(s)->then_case);
        found = true;
      }
    } else if (role == 0) {
      out.push_back(s);
    }
  }
  if (!found)
    fail(ErrorKind::Internal, loop->span, "internal: a warp-specialised loop without its role " + std::to_string(role));
  return make_seq(out, loop->span);
}

Stmt loop_with_body(const ForNode* loop, Stmt body) {
  return std::make_shared<ForNode>(loop->var, loop->min, loop->extent, loop->for_kind, std::move(body), loop->attrs,
                                   loop->span);
}

const CallNode* call_of(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  return ev ? as<CallNode>(ev->value) : nullptr;
}

// A consumer loop that only runs wgmma on its stage (no store, nothing after the wait but
// the release) keeps one group of instructions in flight across iterations: it waits until
// at most one group is pending, so the group of the iteration before has finished reading
// its stage, and releases that stage. The last group is waited for after the loop.
// Returns the loop and what follows it, or nothing when the body is not of that form.
// `iteration` counts the pipeline's iterations across the loop's runs (a loop inside another
// loop releases the last stage of one run in the first iteration of the next).
std::pair<Stmt, Stmt> overlap_wgmma(const ForNode* loop, const Stmt& body, int64_t stages, const Expr& iteration) {
  auto* seq = as<SeqStmtNode>(body);
  if (!seq || seq->seq.size() < 3) return {};
  const CallNode* wait = call_of(seq->seq[seq->seq.size() - 2]);
  const CallNode* release = call_of(seq->seq.back());
  if (!wait || wait->op != "wgmma_wait" || *const_int(wait->args[0]) != 0 || !release ||
      (release->op != "mbarrier_arrive" && release->op != "mbarrier_arrive_cluster"))
    return {};
  bool plain = true;
  struct Stores : IRVisitor {
    bool* plain;
    using IRVisitor::visit;
    void visit_store(const BufferStoreNode*) override { *plain = false; }
  } stores;
  stores.plain = &plain;
  stores.visit(body);
  if (!plain) return {};
  Span sp = loop->span;
  const Expr& i = iteration;
  auto* bar = as<BufferLoadNode>(release->args[0]);
  // The stage of iteration i - 1: (i - 1) % S, plus the S offset of the empty barriers.
  Expr previous = add(floormod(add(i, c(stages - 1), sp), c(stages), sp), c(stages), sp);
  std::vector<Expr> release_args = release->args;  // the same release (a cluster's too), one stage back
  release_args[0] = std::make_shared<BufferLoadNode>(bar->dtype, bar->buffer, std::vector<Expr>{previous}, sp);
  Stmt release_previous = std::make_shared<IfThenElseNode>(binary(BinaryOp::GT, i, c(0), sp),
                                                           call_stmt(release->op, release_args, sp), nullptr, sp);
  std::vector<Stmt> out(seq->seq.begin(), seq->seq.end() - 2);
  out.push_back(call_stmt("wgmma_wait", {c(1), wait->args[1], wait->args[2]}, sp));
  out.push_back(release_previous);
  Stmt drain = call_stmt("wgmma_wait", {c(0), wait->args[1], wait->args[2]}, sp);
  return {loop_with_body(loop, make_seq(out, sp)), drain};
}

// The named-barrier ids the kernel's own code uses (T.sync_threads(barrier_id)).
class UsedBarrierIds : public IRVisitor {
 public:
  std::set<int64_t> ids;
  using IRVisitor::visit;

 protected:
  void visit_call(const CallNode* n) override {
    if ((n->op == "named_barrier_sync" || n->op == "named_barrier_arrive") && !n->args.empty())
      if (const int64_t* id = const_int(n->args[0])) ids.insert(*id);
    IRVisitor::visit_call(n);
  }
};

// Block-wide barriers of the consumers' code: only the consumers take part now, on a
// named barrier the kernel's own code does not use.
class NamedBarriers : public IRMutator {
 public:
  NamedBarriers(int64_t threads, int64_t id) : threads_(threads), id_(id) {}

 protected:
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    auto* call = as<CallNode>(n->value);
    if (!call || call->op != "sync_threads") return s;
    return call_stmt("named_barrier_sync", {c(id_), c(threads_)}, n->span);
  }

 private:
  int64_t threads_, id_;
};

// 32-bit words of the per-thread arrays (fragments' shares, local arrays) allocated in s.
int64_t register_array_words(const Stmt& s) {
  struct V : IRVisitor {
    int64_t bytes = 0;
    using IRVisitor::visit;
    void visit_allocate(const AllocateNode* n) override {
      if (n->buffer->is_local() && n->buffer->const_size() > 0) bytes += n->buffer->const_size() * n->buffer->dtype.bytes();
      IRVisitor::visit_allocate(n);
    }
  } v;
  v.visit(s);
  return v.bytes / 4;
}

class Specialize : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    if (!contains_ws_loop(n->body)) return without_roles(s);
    threads_ = n->num_threads();
    tx_ = n->thread_vars.at(0);
    // Registers: the producer keeps 40, the consumers share the rest (at most 240 each). Where
    // that leaves the consumers fewer registers than their register arrays take plus about 32
    // for addresses, indices and loop state, the producer (TMA issues, barrier waits and its
    // loop) keeps 24: below that ptxas serialises the consumers' wgmma groups (attention's
    // backward, about 240 words a thread with two consumer warpgroups; the forward's 192-row
    // tiles, 140-172 words with three), while the forward's 128-row tiles (172 words at 232
    // registers) measured slower with 240.
    int64_t array_words = register_array_words(n->body);
    auto consumer_budget = [&](int64_t producer) {
      return std::min<int64_t>(240, ((65536 - 128 * producer) / threads_) / 8 * 8);
    };
    producer_regs_ = 40;
    consumer_regs_ = consumer_budget(producer_regs_);
    if (consumer_regs_ < 240 && array_words + 32 > consumer_regs_) {
      producer_regs_ = 24;
      consumer_regs_ = consumer_budget(producer_regs_);
    }
    done_ = false;
    counter_ = nullptr;
    counters_.clear();
    keep_registers_ = false;
    for_each_expr(n->body, [&](const ExprNode* e) {
      if (auto* call = dynamic_cast<const CallNode*>(e)) keep_registers_ = keep_registers_ || call->op == "no_set_max_nreg";
    });
    // The consumers' block-wide barriers become a named barrier with an id the kernel's
    // own code leaves free.
    UsedBarrierIds used;
    used.visit(n->body);
    barrier_id_ = 1;
    while (used.ids.count(barrier_id_)) ++barrier_id_;
    if (barrier_id_ > 15)
      fail(ErrorKind::Unsupported, n->span, "warp specialisation needs a named barrier, and the kernel uses all 15",
           "leave one barrier id free, or pass_configs={'tl.disable_warp_specialized': True}");
    Stmt body = split(n->body, {}, {});
    if (!done_) fail(ErrorKind::Internal, n->span, "internal: the warp-specialised loop is not at the kernel's top level");
    report.push_back(n->span.str() + ": warp specialised: " + std::to_string(threads_) + " consumer threads (" +
                     (keep_registers_ ? std::string("registers as launched, T.no_set_max_nreg")
                                      : std::to_string(consumer_regs_) + " registers each") +
                     ") and a producer warpgroup of 128" +
                         (keep_registers_ ? "" : " (" + std::to_string(producer_regs_) + ")"));
    std::vector<int64_t> threads = {threads_ + 128};
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, threads, body, n->span, n->cluster);
  }

 private:
  // A pipelined loop that never runs (simplified away) leaves the role branches of its
  // tiles' loads (producer_tile_loads): nothing reads those tiles, so they go.
  static Stmt without_roles(const Stmt& s) {
    struct Strip : IRMutator {
      Stmt mutate_if(const Stmt& st, const IfThenElseNode* n) override {
        return role_of(st) >= 0 ? make_seq({}, n->span) : IRMutator::mutate_if(st, n);
      }
    } strip;
    return strip.mutate(s);
  }

  static bool contains_ws_loop(const Stmt& s) {
    bool found = false;
    struct V : IRVisitor {
      bool* found;
      using IRVisitor::visit;
      void visit_for(const ForNode* f) override {
        *found = *found || f->attrs.count("ws_pipeline");
        IRVisitor::visit_for(f);
      }
    } v;
    v.found = &found;
    v.visit(s);
    return found;
  }

  // Walks down allocations and lets to the sequence that holds the pipeline's set-up (its
  // barrier, the mbarriers' initialisation, a barrier) and splits the roles after it.
  // Statements of enclosing sequences before that path run on the consumers only; those
  // after it (`after`, innermost first) move into the consumers' branch, which keeps the
  // accumulators of the loop in the registers the consumers were given for the epilogue.
  // `early` gathers statements before the path that only write the consumers' registers:
  // they run first in the consumers' branch (split_before says why).
  Stmt split(const Stmt& s, const std::vector<Stmt>& after, const std::vector<Stmt>& early) {
    if (auto* a = as<AllocateNode>(s)) {
      if (a->attrs.count("pipeline_counter")) counter_ = a->buffer;
      if (a->attrs.count("pipeline_counter") || a->attrs.count("tile_counter")) counters_.insert(a->buffer.get());
      return std::make_shared<AllocateNode>(a->buffer, split(a->body, after, early), a->attrs, a->span);
    }
    if (auto* l = as<LetStmtNode>(s))
      return std::make_shared<LetStmtNode>(l->var, l->value, split(l->body, after, early), l->span);
    if (auto* seq = as<SeqStmtNode>(s)) {
      for (size_t i = 0; i < seq->seq.size(); ++i) {
        if (!contains_call(seq->seq[i], "mbarrier_init")) continue;
        if (as<IfThenElseNode>(seq->seq[i]) && i > 0 && i + 1 < seq->seq.size())
          return specialised(seq, i, after, early);
        std::vector<Stmt> out, later(seq->seq.begin() + i + 1, seq->seq.end()), stay, first = early;
        later.insert(later.end(), after.begin(), after.end());
        split_before(std::vector<Stmt>(seq->seq.begin(), seq->seq.begin() + i), stay, first);
        for (auto& st : stay) out.push_back(consumers_only(st));
        out.push_back(split(seq->seq[i], later, first));
        return make_seq(out, seq->span);
      }
    }
    return s;  // not reached for the kernel that holds the loop (done_ stays false)
  }

  static bool contains_call(const Stmt& s, const std::string& op) {
    bool found = false;
    for_each_expr(s, [&](const ExprNode* n) {
      if (auto* c = dynamic_cast<const CallNode*>(n)) found = found || c->op == op;
    });
    return found;
  }

  Stmt consumers_only(const Stmt& st) {
    NamedBarriers named(threads_, barrier_id_);
    return std::make_shared<IfThenElseNode>(lt(tx_, c(threads_), st->span), named.mutate(st), nullptr, st->span);
  }

  // [if tx < T: what comes before]; barrier; init; barrier;
  // if tx < T: the rest, with the consumers' loop; else: the producer's skeleton of the rest.
  // What comes before the set-up stays before its fence and block-wide barrier, which
  // publish its shared-memory writes (a query tile the wgmma reads) to every consumer.
  Stmt specialised(const SeqStmtNode* seq, size_t init, const std::vector<Stmt>& after,
                   const std::vector<Stmt>& early) {
    done_ = true;
    Span sp = seq->seq[init]->span;
    std::vector<Stmt> before, registers_only = early;
    split_before(std::vector<Stmt>(seq->seq.begin(), seq->seq.begin() + init - 1), before, registers_only);
    std::vector<Stmt> out;
    if (!before.empty()) out.push_back(consumers_only(make_seq(before, sp)));
    out.insert(out.end(), seq->seq.begin() + init - 1, seq->seq.begin() + init + 2);  // barrier, init, barrier
    registers_only.insert(registers_only.end(), seq->seq.begin() + init + 2, seq->seq.end());
    Stmt rest = make_seq(registers_only, sp);
    // T.no_set_max_nreg: the register budgets stay as the launch gives them.
    auto budget = [&](int64_t regs, int64_t increase) {
      return keep_registers_ ? nullptr : call_stmt("set_max_nreg", {c(regs), c(increase)}, sp);
    };
    Stmt consumer = make_seq({budget(consumer_regs_, 1), consumers(rest), consumers(make_seq(after, sp))}, sp);
    Stmt leader = std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, tx_, c(threads_), sp), producer(rest), nullptr, sp);
    Stmt producer_part = make_seq({budget(producer_regs_, 0), leader}, sp);
    out.push_back(std::make_shared<IfThenElseNode>(lt(tx_, c(threads_), sp), consumer, producer_part, sp));
    return make_seq(out, sp);
  }

  // Of the statements before the set-up, those that only write the consumers' registers
  // (clearing an accumulator) move after it, into the consumers' branch, when nothing that
  // stays reads or writes what they touch: registers live across the set-up's barrier and
  // setmaxnreg would have to fit the launch's smaller register budget.
  static void split_before(const std::vector<Stmt>& stmts, std::vector<Stmt>& stay, std::vector<Stmt>& move) {
    std::unordered_set<const BufferNode*> touched_by_stayers;  // by statements that stay, later in order
    std::vector<bool> moves(stmts.size(), false);
    for (size_t k = stmts.size(); k-- > 0;) {
      Touches t = touches(stmts[k]);
      bool ok = t.registers_only;
      for (auto* b : t.all) ok = ok && !touched_by_stayers.count(b);
      moves[k] = ok;
      if (!ok) touched_by_stayers.insert(t.all.begin(), t.all.end());
    }
    for (size_t k = 0; k < stmts.size(); ++k) (moves[k] ? move : stay).push_back(stmts[k]);
  }

  struct Touches {
    std::unordered_set<const BufferNode*> all;
    bool registers_only = true;  // stores to local buffers only, and no calls with effects
  };

  static Touches touches(const Stmt& s) {
    struct V : IRVisitor {
      Touches t;
      using IRVisitor::visit;
      void visit_store(const BufferStoreNode* n) override {
        t.all.insert(n->buffer.get());
        t.registers_only = t.registers_only && n->buffer->is_local();
        IRVisitor::visit_store(n);
      }
      void visit_load(const BufferLoadNode* n) override {
        t.all.insert(n->buffer.get());
        IRVisitor::visit_load(n);
      }
      void visit_evaluate(const EvaluateNode* n) override {
        t.registers_only = false;
        IRVisitor::visit_evaluate(n);
      }
      void visit_tile_op(const TileOpNode* n) override {
        t.registers_only = false;
        IRVisitor::visit_tile_op(n);
      }
      void visit_allocate(const AllocateNode* n) override {
        t.registers_only = false;
        IRVisitor::visit_allocate(n);
      }
    } v;
    v.visit(s);
    return v.t;
  }

  // The pipeline's iterations before iteration `loop->var` of this run, from the first run on.
  Expr iteration(const ForNode* loop) const {
    Expr i = sub(loop->var, loop->min, loop->span);
    return counter_ ? add(make_load(counter_, {c(0)}, loop->span), i, loop->span) : i;
  }

  // The consumers' code: everything, with the loop's consumer part and named barriers.
  Stmt consumers(const Stmt& rest) {
    struct Consumers : IRMutator {
      Specialize* self;
      using IRMutator::mutate;
      Stmt mutate_for(const Stmt& s, const ForNode* n) override {
        if (!n->attrs.count("ws_pipeline")) return IRMutator::mutate_for(s, n);
        Stmt body = role_body(n, 0);
        int64_t stages = std::get<int64_t>(n->attrs.at("num_stages"));
        auto [overlapped, drain] = overlap_wgmma(n, body, stages, self->iteration(n));
        if (overlapped) return make_seq({overlapped, drain}, n->span);
        return loop_with_body(n, body);
      }
      Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
        int64_t r = role_of(s);
        if (r < 0) return IRMutator::mutate_if(s, n);
        return r == 0 ? mutate(n->then_case) : make_seq({}, n->span);
      }
    } m;
    m.self = this;
    NamedBarriers named(threads_, barrier_id_);
    return named.mutate(m.mutate(rest));
  }

  // The producer's code: the loops, lets and branches that lead to the pipelined loop (the
  // pipeline pass made sure they depend on indices and global memory only), its producer
  // part, and the count of the pipeline's iterations; nothing else of the block's work.
  Stmt producer(const Stmt& s) {
    if (auto* seq = as<SeqStmtNode>(s)) {
      std::vector<Stmt> out;
      for (auto& x : seq->seq)
        if (Stmt p = producer(x)) out.push_back(p);
      return out.empty() ? nullptr : make_seq(out, s->span);
    }
    if (auto* st = as<BufferStoreNode>(s)) return counters_.count(st->buffer.get()) ? s : nullptr;
    // A role's work outside the loop (transform/producer_tile_loads.h): the producer's own.
    if (int64_t r = role_of(s); r >= 0) return r == 1 ? as<IfThenElseNode>(s)->then_case : nullptr;
    if (!contains_ws_loop(s)) return nullptr;
    if (auto* f = as<ForNode>(s)) {
      if (f->attrs.count("ws_pipeline")) return loop_with_body(f, role_body(f, 1));
      return loop_with_body(f, producer(f->body));
    }
    if (auto* l = as<LetStmtNode>(s)) return std::make_shared<LetStmtNode>(l->var, l->value, producer(l->body), l->span);
    if (auto* a = as<AllocateNode>(s)) {  // shared tiles the copies fill stay; registers go
      Stmt body = producer(a->body);
      return a->buffer->is_shared() ? std::make_shared<AllocateNode>(a->buffer, body, a->attrs, a->span) : body;
    }
    if (auto* i = as<IfThenElseNode>(s)) {
      Stmt then_case = producer(i->then_case), else_case = i->else_case ? producer(i->else_case) : nullptr;
      return std::make_shared<IfThenElseNode>(i->cond, then_case ? then_case : make_seq({}, s->span), else_case, i->span);
    }
    fail(ErrorKind::Internal, s->span, "internal: warp specialisation: the pipelined loop sits in an unexpected statement");
  }

  int64_t threads_ = 0;
  int64_t barrier_id_ = 1;
  int64_t consumer_regs_ = 232, producer_regs_ = 40;
  Expr tx_;
  Buffer counter_;  // the pipeline's iteration count when its loop runs more than once
  std::unordered_set<const BufferNode*> counters_;  // it and the other counts every role keeps
  bool keep_registers_ = false;  // T.no_set_max_nreg in the kernel
  bool done_ = false;
};

}  // namespace

PrimFunc warp_specialize(const PrimFunc& f) {
  Specialize pass;
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
