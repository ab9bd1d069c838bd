#include "transform/warp_specialize.h"

#include <set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "transform/pass.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

Stmt call_stmt(const std::string& op, std::vector<Expr> args, Span sp) {
  return std::make_shared<EvaluateNode>(std::make_shared<CallNode>(DataType::Void(), op, std::move(args), sp), sp);
}

bool is_ws_loop(const Stmt& s) {
  auto* f = as<ForNode>(s);
  return f && f->attrs.count("ws_pipeline");
}

// The work of one role in a WS loop body: the branch `if ws_role(r): body`; the consumers
// also keep any barrier the loop body has outside the branches, in its place.
Stmt role_body(const ForNode* loop, int64_t role) {
  auto* seq = as<SeqStmtNode>(loop->body);
  std::vector<Stmt> out;
  bool found = false;
  for (auto& s : seq ? seq->seq : std::vector<Stmt>{}) {
    auto* branch = as<IfThenElseNode>(s);
    auto* cond = branch ? as<CallNode>(branch->cond) : nullptr;
    if (cond && cond->op == "ws_role") {
      if (*const_int(cond->args.at(0)) == role) {
        out.push_back(branch->then_case);
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
std::pair<Stmt, Stmt> overlap_wgmma(const ForNode* loop, const Stmt& body, int64_t stages) {
  auto* seq = as<SeqStmtNode>(body);
  if (!seq || seq->seq.size() < 3) return {};
  const CallNode* wait = call_of(seq->seq[seq->seq.size() - 2]);
  const CallNode* release = call_of(seq->seq.back());
  if (!wait || wait->op != "wgmma_wait" || *const_int(wait->args[0]) != 0 || !release ||
      release->op != "mbarrier_arrive")
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
  Expr i = sub(loop->var, loop->min, sp);
  auto* bar = as<BufferLoadNode>(release->args[0]);
  // The stage of iteration i - 1: (i - 1) % S, plus the S offset of the empty barriers.
  Expr previous = add(floormod(add(i, c(stages - 1), sp), c(stages), sp), c(stages), sp);
  Stmt release_previous = std::make_shared<IfThenElseNode>(
      binary(BinaryOp::GT, i, c(0), sp),
      call_stmt("mbarrier_arrive", {std::make_shared<BufferLoadNode>(bar->dtype, bar->buffer, std::vector<Expr>{previous}, sp)}, sp),
      nullptr, sp);
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
    if (n->op == "named_barrier_sync" && !n->args.empty())
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

class Specialize : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    if (!contains_ws_loop(n->body)) return s;
    threads_ = n->num_threads();
    tx_ = n->thread_vars.at(0);
    // Registers: the producer keeps 40, the consumers share the rest (at most 240 each).
    consumer_regs_ = std::min<int64_t>(240, ((65536 - 128 * 40) / threads_) / 8 * 8);
    done_ = false;
    // The consumers' block-wide barriers become a named barrier with an id the kernel's
    // own code leaves free.
    UsedBarrierIds used;
    used.visit(n->body);
    barrier_id_ = 1;
    while (used.ids.count(barrier_id_)) ++barrier_id_;
    if (barrier_id_ > 15)
      fail(ErrorKind::Unsupported, n->span, "warp specialisation needs a named barrier, and the kernel uses all 15",
           "leave one barrier id free, or pass_configs={'tl.disable_warp_specialized': True}");
    Stmt body = split(n->body);
    if (!done_) fail(ErrorKind::Internal, n->span, "internal: the warp-specialised loop is not at the kernel's top level");
    report.push_back(n->span.str() + ": warp specialised: " + std::to_string(threads_) + " consumer threads (" +
                     std::to_string(consumer_regs_) + " registers each) and a producer warpgroup of 128 (40)");
    std::vector<int64_t> threads = {threads_ + 128};
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, threads, body, n->span);
  }

 private:
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

  // Walks down allocations and lets to the sequence that holds the pipeline's barrier
  // allocation (its body: init, barrier, loop) and splits the roles there.
  Stmt split(const Stmt& s) {
    if (auto* a = as<AllocateNode>(s)) {
      if (auto* inner = as<SeqStmtNode>(a->body); inner && !inner->seq.empty() && is_ws_loop(inner->seq.back())) {
        return std::make_shared<AllocateNode>(a->buffer, specialised({}, a, {}), a->attrs, a->span);
      }
      return std::make_shared<AllocateNode>(a->buffer, split(a->body), a->attrs, a->span);
    }
    if (auto* l = as<LetStmtNode>(s)) return std::make_shared<LetStmtNode>(l->var, l->value, split(l->body), l->span);
    if (auto* seq = as<SeqStmtNode>(s)) {
      for (size_t i = 0; i < seq->seq.size(); ++i) {
        auto* a = as<AllocateNode>(seq->seq[i]);
        auto* inner = a ? as<SeqStmtNode>(a->body) : nullptr;
        if (inner && !inner->seq.empty() && is_ws_loop(inner->seq.back())) {
          std::vector<Stmt> before(seq->seq.begin(), seq->seq.begin() + i), after(seq->seq.begin() + i + 1, seq->seq.end());
          return std::make_shared<AllocateNode>(a->buffer, specialised(before, a, after), a->attrs, a->span);
        }
        if (!contains_ws_loop(seq->seq[i])) continue;
        // The statements around the scope that holds the loop were lowered for the
        // consumers' threads: only they run them (the producer warpgroup is extra).
        std::vector<Stmt> out;
        for (size_t j = 0; j < seq->seq.size(); ++j)
          out.push_back(j == i ? split(seq->seq[i]) : consumers_only(seq->seq[j]));
        return std::make_shared<SeqStmtNode>(out, seq->span);
      }
    }
    return s;  // not reached for the kernel that holds the loop (done_ stays false)
  }

  Stmt consumers_only(const Stmt& st) {
    NamedBarriers named(threads_, barrier_id_);
    return std::make_shared<IfThenElseNode>(lt(tx_, c(threads_), st->span), named.mutate(st), nullptr, st->span);
  }

  // [if tx < T: what comes before the loop]; init; barrier; if tx < T: consumers else: producer.
  Stmt specialised(const std::vector<Stmt>& before, const AllocateNode* bars, const std::vector<Stmt>& after) {
    done_ = true;
    auto* inner = as<SeqStmtNode>(bars->body);
    Span sp = bars->span;
    const ForNode* loop = as<ForNode>(inner->seq.back());
    std::vector<Stmt> prologue(inner->seq.begin(), inner->seq.end() - 1);  // barrier, init, barrier
    NamedBarriers named(threads_, barrier_id_);
    std::vector<Stmt> consumer = {call_stmt("set_max_nreg", {c(consumer_regs_), c(1)}, sp)};
    Stmt consumer_body = role_body(loop, 0);
    int64_t stages = std::get<int64_t>(loop->attrs.at("num_stages"));
    auto [overlapped, drain] = overlap_wgmma(loop, consumer_body, stages);
    if (overlapped) {
      consumer.push_back(named.mutate(overlapped));
      consumer.push_back(drain);
    } else {
      consumer.push_back(named.mutate(loop_with_body(loop, consumer_body)));
    }
    for (auto& st : after) consumer.push_back(named.mutate(st));
    Stmt leader = std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, tx_, c(threads_), sp),
                                                   loop_with_body(loop, role_body(loop, 1)), nullptr, sp);
    Stmt producer = make_seq({call_stmt("set_max_nreg", {c(40), c(0)}, sp), leader}, sp);
    Stmt roles = std::make_shared<IfThenElseNode>(lt(tx_, c(threads_), sp), make_seq(consumer, sp), producer, sp);
    prologue.push_back(roles);
    // What comes before the loop stays before the barrier initialisation, whose fence and
    // block-wide barrier publish its shared-memory writes (a query tile the wgmma reads)
    // to every consumer: moved after it, the writes would race with the first reads.
    if (!before.empty()) prologue.insert(prologue.begin(), consumers_only(make_seq(before, sp)));
    return make_seq(prologue, sp);
  }

  int64_t threads_ = 0;
  int64_t barrier_id_ = 1;
  int64_t consumer_regs_ = 232;
  Expr tx_;
  bool done_ = false;
};

}  // namespace

PrimFunc warp_specialize(const PrimFunc& f) {
  Specialize pass;
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
