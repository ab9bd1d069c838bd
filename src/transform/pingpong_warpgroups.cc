#include "transform/pingpong_warpgroups.h"

#include <set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "transform/pass.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

const CallNode* call_of(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  return ev ? as<CallNode>(ev->value) : nullptr;
}

bool is_call(const Stmt& s, const char* op) {
  const CallNode* call = call_of(s);
  return call && call->op == op;
}

// Whether s holds a call of op anywhere.
bool contains_call(const Stmt& s, const std::string& op) {
  bool found = false;
  for_each_expr(s, [&](const ExprNode* n) {
    if (auto* call = dynamic_cast<const CallNode*>(n)) found = found || call->op == op;
  });
  return found;
}

class Pingpong : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    threads_ = n->num_threads();
    // The ids of the kernel's own named barriers (warp specialisation took one for the
    // consumers' block-wide barriers).
    used_.clear();
    for_each_expr(n->body, [&](const ExprNode* e) {
      auto* call = dynamic_cast<const CallNode*>(e);
      if (call && (call->op == "named_barrier_sync" || call->op == "named_barrier_arrive") && !call->args.empty())
        if (const int64_t* id = const_int(call->args[0])) used_.insert(*id);
    });
    kernel_ = n;
    Stmt out = IRMutator::mutate_kernel(s, n);
    kernel_ = nullptr;
    return out;
  }

  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    // The consumers' branch of a warp-specialised kernel: `if tx < 256` with 128 producer
    // threads after them.
    auto* lt_cond = as<BinaryNode>(n->cond);
    const int64_t* bound = lt_cond && lt_cond->op == BinaryOp::LT ? const_int(lt_cond->b) : nullptr;
    if (!kernel_ || !bound || *bound != 256 || threads_ != 256 + 128 || !n->else_case)
      return IRMutator::mutate_if(s, n);
    consumers_ = true;
    Stmt then_case = mutate(n->then_case);
    consumers_ = false;
    if (then_case == n->then_case) return s;
    return std::make_shared<IfThenElseNode>(n->cond, then_case, n->else_case, n->span);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (!consumers_ || !n->attrs.count("ws_pipeline")) return IRMutator::mutate_for(s, n);
    auto* seq = as<SeqStmtNode>(n->body);
    std::string where = n->span.str() + ": ";
    if (!seq) return s;
    // Independent warpgroups: no barrier of the consumers inside the loop.
    if (contains_call(n->body, "named_barrier_sync") || contains_call(n->body, "sync_threads")) {
      report.push_back(where + "the two consumer warpgroups do not take turns on the tensor cores (a barrier "
                               "among the consumers inside the loop ties them together)");
      return s;
    }
    // The wgmma groups at the body's top level: fence ... commit (the wait follows).
    std::vector<size_t> fences, commits;
    for (size_t i = 0; i < seq->seq.size(); ++i) {
      if (is_call(seq->seq[i], "wgmma_fence")) fences.push_back(i);
      if (is_call(seq->seq[i], "wgmma_commit")) commits.push_back(i);
    }
    int64_t nested_wgmma = 0, cuda_core_work = 0;
    for (auto& st : seq->seq) {
      if (!call_of(st) && !as<ForNode>(st) && contains_call(st, "wgmma")) ++nested_wgmma;
      if (as<ForNode>(st) && !contains_call(st, "wgmma")) ++cuda_core_work;
    }
    // The last product one iteration behind (inject_software_pipeline's overlap): one group
    // at the top level (S = Q K^T), then a branch `if k >= 1` that issues the previous
    // iteration's P V, and no wait between them.
    size_t behind = seq->seq.size();
    for (size_t i = 0; i < seq->seq.size(); ++i)
      if (as<IfThenElseNode>(seq->seq[i]) && contains_call(seq->seq[i], "wgmma_commit")) behind = i;
    const bool overlapped = fences.size() == 1 && commits.size() == 1 && nested_wgmma == 1 &&
                            behind < seq->seq.size() && behind > commits[0];
    if (fences.empty() || fences.size() != commits.size() || (nested_wgmma && !overlapped)) return s;
    // Only work on the CUDA cores between the matrix multiplies gains from the turns (a
    // GEMM's loop, wgmma alone, keeps both warpgroups' groups in flight instead).
    if (!cuda_core_work) return s;
    int64_t first = 1;
    while (used_.count(first) || used_.count(first + 1)) ++first;
    if (first + 1 > 15) {
      report.push_back(where + "the consumer warpgroups do not take turns (no two named barrier ids left)");
      return s;
    }
    Span sp = n->span;
    if (overlapped) {
      // FlashAttention-3's schedule: a turn covers issuing only, this iteration's S = Q K^T
      // and the previous one's P V; the turn is passed before any wait, so this
      // warpgroup's softmax runs while its own P V and the other warpgroup's two groups
      // occupy the tensor cores.
      // The pass goes into both branches of the wait that follows (`if k >= 1: wait(1)
      // else: wait(0)`): a statement between the branch that issues P V and that test
      // keeps ptxas from joining the two branches, and the join's copies of O's registers
      // while P V is in flight make it serialise every wgmma (C7514).
      Stmt pass = call_stmt("warpgroup_turn_pass", {c(first)}, sp);
      auto* wait_branch = behind + 1 < seq->seq.size() ? as<IfThenElseNode>(seq->seq[behind + 1]) : nullptr;
      const bool into_wait = wait_branch && wait_branch->else_case && is_call(wait_branch->then_case, "wait_wgmma") &&
                             is_call(wait_branch->else_case, "wait_wgmma");
      std::vector<Stmt> body;
      for (size_t i = 0; i < seq->seq.size(); ++i) {
        if (i == fences.front()) body.push_back(call_stmt("warpgroup_turn_wait", {c(first)}, sp));
        if (into_wait && i == behind + 1) {
          body.push_back(std::make_shared<IfThenElseNode>(wait_branch->cond, make_seq({pass, wait_branch->then_case}, sp),
                                                          make_seq({pass, wait_branch->else_case}, sp), sp));
          continue;
        }
        body.push_back(seq->seq[i]);
        if (i == behind && !into_wait) body.push_back(pass);
      }
      Stmt loop = std::make_shared<ForNode>(n->var, n->min, n->extent, n->for_kind, make_seq(body, sp), n->attrs, sp);
      report.push_back(where + "the two consumer warpgroups take turns on the tensor cores (each turn issues one "
                               "iteration's first wgmma group and the previous iteration's last, and passes before "
                               "waiting; named barriers " + std::to_string(first) + " and " +
                       std::to_string(first + 1) + ")");
      return make_seq({call_stmt("warpgroup_turn_open", {c(first)}, sp), loop,
                       call_stmt("warpgroup_turn_close", {c(first)}, sp)},
                      sp);
    }
    if (fences.size() < 2) return s;  // one group: nothing to pair across iterations
    // A warpgroup's turn runs from its last group of one iteration to its first group of
    // the next (FlashAttention-3's pairing): the turn is taken before the last group and
    // passed on after the next iteration's first group is committed, so the softmax that
    // follows runs while the other warpgroup's two groups occupy the tensor cores.
    std::vector<Stmt> body;
    for (size_t i = 0; i < seq->seq.size(); ++i) {
      if (i == fences.back()) body.push_back(call_stmt("warpgroup_turn_wait", {c(first)}, sp));
      body.push_back(seq->seq[i]);
      if (i == commits.front()) body.push_back(call_stmt("warpgroup_turn_pass", {c(first)}, sp));
    }
    Stmt loop = std::make_shared<ForNode>(n->var, n->min, n->extent, n->for_kind, make_seq(body, sp), n->attrs, sp);
    report.push_back(where + "the two consumer warpgroups take turns on the tensor cores (each turn the last "
                             "wgmma group of one iteration and the first of the next, of " +
                     std::to_string(fences.size()) + " per iteration; named barriers " + std::to_string(first) +
                     " and " + std::to_string(first + 1) + ")");
    return make_seq({call_stmt("warpgroup_turn_first", {c(first)}, sp), loop,
                     call_stmt("warpgroup_turn_last", {c(first)}, sp)},
                    sp);
  }

 private:
  const KernelNode* kernel_ = nullptr;
  int64_t threads_ = 0;
  bool consumers_ = false;
  std::set<int64_t> used_;
};

}  // namespace

PrimFunc pingpong_warpgroups(const PrimFunc& f, const Target& target) {
  if (!target.enable_pingpong) return f;
  Pingpong pass;
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
