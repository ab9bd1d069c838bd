#include "transform/inject_software_pipeline.h"

#include "transform/add_stage.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/alias.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "ir/structural.h"
#include "op/copy_tma.h"
#include "op/region.h"
#include "transform/pass.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

std::vector<Stmt> flatten_seq(const Stmt& s) {
  if (auto* seq = as<SeqStmtNode>(s)) return seq->seq;
  return {s};
}

// For every buffer: the innermost T.Pipelined loop around each of its accesses (null
// outside any), and which buffers statements write.
struct BufferUses {
  std::unordered_map<const BufferNode*, std::unordered_set<const ForNode*>> loops;
};

class UseCollector : public IRVisitor {
 public:
  BufferUses uses;
  using IRVisitor::visit;

 protected:
  void note(const Buffer& b) { uses.loops[b.get()].insert(stack_.empty() ? nullptr : stack_.back()); }
  void visit_for(const ForNode* n) override {
    bool pipelined = n->for_kind == ForKind::Pipelined;
    if (pipelined) stack_.push_back(n);
    IRVisitor::visit_for(n);
    if (pipelined) stack_.pop_back();
  }
  void visit_load(const BufferLoadNode* n) override {
    note(n->buffer);
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    note(n->buffer);
    IRVisitor::visit_store(n);
  }
  void visit_tile_op(const TileOpNode* n) override {
    if (n->op != "annotate_layout")  // a request about storage, not a use
      for (auto& r : n->regions) note(r.buffer);
    IRVisitor::visit_tile_op(n);
  }

 private:
  std::vector<const ForNode*> stack_;
};

// Whether e can be evaluated iterations ahead: it reads no variable bound inside the loop
// body and no memory but global tensors the kernel never writes (a paged cache's block
// table).
bool loop_invariant_but_for(const Expr& e, const std::unordered_set<const VarNode*>& inner_vars,
                            const std::unordered_set<const BufferNode*>& written) {
  bool ok = true;
  for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) {
    if (auto* l = dynamic_cast<const BufferLoadNode*>(n))
      ok = ok && l->buffer->is_global() && !written.count(l->buffer.get());
    if (auto* v = dynamic_cast<const VarNode*>(n)) ok = ok && !inner_vars.count(v);
  });
  return ok;
}

// The statements of a loop body with the names it binds to index arithmetic (`p = k * 64`,
// also `page = table[k]` of a tensor the kernel never writes) replaced by their values, so
// that copies addressed through them can be issued ahead like copies written inline.
std::vector<Stmt> statements_with_lets_inlined(const Stmt& body, const std::unordered_set<const BufferNode*>& written) {
  std::vector<Stmt> out;
  for (const Stmt& s : flatten_seq(body)) {
    auto* l = as<LetStmtNode>(s);
    if (l && loop_invariant_but_for(l->value, {}, written)) {
      for (const Stmt& x : statements_with_lets_inlined(substitute(l->body, {{l->var.get(), l->value}}), written))
        out.push_back(x);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

bool mentions_any(const Expr& e, const std::unordered_set<const VarNode*>& vars) {
  bool found = false;
  for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) {
    if (auto* v = dynamic_cast<const VarNode*>(n)) found = found || vars.count(v);
  });
  return found;
}

// Every buffer a statement reads or writes (loads, stores, tile operators' regions).
std::unordered_set<const BufferNode*> buffers_touched(const Stmt& s) {
  struct V : IRVisitor {
    std::unordered_set<const BufferNode*> out;
    using IRVisitor::visit;
    void visit_load(const BufferLoadNode* n) override {
      out.insert(n->buffer.get());
      IRVisitor::visit_load(n);
    }
    void visit_store(const BufferStoreNode* n) override {
      out.insert(n->buffer.get());
      IRVisitor::visit_store(n);
    }
    void visit_tile_op(const TileOpNode* n) override {
      for (auto& r : n->regions) out.insert(r.buffer.get());
      IRVisitor::visit_tile_op(n);
    }
  } v;
  v.visit(s);
  return v.out;
}

bool contains_gemm(const Stmt& s) {
  struct Find : IRVisitor {
    bool found = false;
    using IRVisitor::visit;
    void visit_tile_op(const TileOpNode* n) override {
      found = found || n->op == "gemm";
      IRVisitor::visit_tile_op(n);
    }
  } f;
  f.visit(s);
  return f.found;
}

// Accesses to the multi-buffered buffers gain the stage slot as a leading index.
// A copy whose region starts at coordinates read from tensors the kernel never writes (a
// paged cache's block table, with its bounds guard): each such coordinate becomes a
// variable (one for each distinct expression), listed with the expression it stands for.
Stmt read_coordinates_early(const Stmt& s, const std::unordered_set<const BufferNode*>& written,
                            std::vector<std::pair<Var, Expr>>& reads) {
  auto* op = as<TileOpNode>(s);
  if (!op) return s;
  // Only expressions whose every load is of such a tensor move: a shared or per-thread value
  // may change before the wait.
  auto reads_tensor = [&](const Expr& e) {
    bool found = false, others = false;
    for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) {
      if (auto* l = dynamic_cast<const BufferLoadNode*>(n)) {
        bool read_only = l->buffer->is_global() && !written.count(l->buffer.get());
        found = found || read_only;
        others = others || !read_only;
      }
    });
    return found && !others;
  };
  std::vector<BufferRegion> regions = op->regions;
  bool changed = false;
  for (auto& r : regions)
    for (auto& rg : r.ranges) {
      if (!reads_tensor(rg.min)) continue;
      Var v;
      for (auto& [var, e] : reads)
        if (structural_equal(e, rg.min)) v = var;
      if (!v) {
        v = make_var("coord" + std::to_string(reads.size()), rg.min->dtype, op->span);
        reads.emplace_back(v, rg.min);
      }
      rg.min = v;
      changed = true;
    }
  return changed ? std::make_shared<TileOpNode>(op->op, regions, op->args, op->attrs, op->span) : s;
}

class SoftwarePipeline : public IRMutator {
 public:
  SoftwarePipeline(const Target& target, BufferUses uses) : target_(target), uses_(std::move(uses)) {}
  std::vector<std::string> report;
  // Every buffer this pass multi-buffered, and its staged copy.
  const std::unordered_map<const BufferNode*, Buffer>& staged() const { return staged_; }

 protected:
  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    Stmt body = mutate(n->body);
    auto it = staged_.find(n->buffer.get());
    if (it == staged_.end()) return body == n->body ? s : std::make_shared<AllocateNode>(n->buffer, body, n->attrs, n->span);
    Attrs attrs = n->attrs;
    attrs["pipelined"] = int64_t(1);
    // How many copies the buffer now holds (its new leading extent), for the budget's report.
    if (const int64_t* stages = const_int(it->second->shape.at(0))) attrs["stages"] = *stages;
    return std::make_shared<AllocateNode>(it->second, body, attrs, n->span);
  }

  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    enclosing_.push_back(n);
    Stmt out = IRMutator::mutate_if(s, n);
    enclosing_.pop_back();
    return out;
  }

  Stmt mutate_while(const Stmt& s, const WhileNode* n) override {
    enclosing_.push_back(n);
    Stmt out = IRMutator::mutate_while(s, n);
    enclosing_.pop_back();
    return out;
  }

  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    enclosing_.push_back(n);
    Stmt out = IRMutator::mutate_let(s, n);
    enclosing_.pop_back();
    return out;
  }

  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    kernel_ = n;
    kernel_writes_ = buffers_written(n->body);
    aliases_ = collect_storage_aliases(n->body);
    for (auto& [data, list] : aliases_.by_storage) {  // a write through a view writes them all
      bool any = false;
      for (auto& b : list) any = any || kernel_writes_.count(b.get());
      if (any)
        for (auto& b : list) kernel_writes_.insert(b.get());
    }
    hoisted_ = {};
    tma_pipelines_ = 0;
    multicasts_ = false;
    Stmt out = IRMutator::mutate_kernel(s, n);
    kernel_ = nullptr;
    if (multicasts_) {
      // Blocks of the cluster arrive on each other's barriers until their last iteration:
      // none leaves (and gives up its shared memory) before all are done.
      auto* k = as<KernelNode>(out);
      out = std::make_shared<KernelNode>(k->block_vars, k->grid, k->thread_vars, k->threads,
                                         make_seq({k->body, call_stmt("cluster_sync", {}, k->span)}, k->span),
                                         k->span, k->cluster);
    }
    if (!hoisted_.bars) return out;
    // A TMA pipeline inside other loops: its mbarriers are set up once, at the kernel's
    // start, and a running count of the pipeline's iterations (every role keeps its own
    // copy) carries the stage and the phase from one run of the loop to the next.
    auto* k = as<KernelNode>(out);
    Span sp = k->span;
    Stmt body = make_seq({call_stmt("sync_threads", {}, sp), hoisted_.init, after_init(sp), k->body}, sp);
    body = std::make_shared<AllocateNode>(hoisted_.bars, body, Attrs{{"pipelined", int64_t(1)}}, sp);
    body = std::make_shared<AllocateNode>(hoisted_.counter, body,
                                          Attrs{{"init", Expr(c(0))}, {"pipeline_counter", int64_t(1)}}, sp);
    return std::make_shared<KernelNode>(k->block_vars, k->grid, k->thread_vars, k->threads, body, sp, k->cluster);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    enclosing_.push_back(n);
    Stmt body = mutate(n->body);
    enclosing_.pop_back();
    if (n->for_kind != ForKind::Pipelined) return body == n->body ? s : with_loop_body(n, body, n->for_kind, n->attrs);
    if (const int64_t* trips = const_int(n->extent); trips && *trips <= 0) {
      report.push_back(n->span.str() + ": T.Pipelined never runs (its trip count is " + std::to_string(*trips) + ")");
      return make_seq({}, n->span);
    }
    int64_t stages = 1;
    auto st = n->attrs.find("num_stages");
    if (st != n->attrs.end() && std::holds_alternative<int64_t>(st->second)) stages = std::get<int64_t>(st->second);
    std::string where = n->span.str() + ": T.Pipelined(num_stages=" + std::to_string(stages) + ") ";
    if (stages < 2) {
      report.push_back(where + "runs in order (one stage)");
    } else if (target_.kind != "hip" && target_.arch_number() < 80) {  // hip: plain loads into LDS
      report.push_back(where + "runs in order (cp.async needs sm_80 or newer)");
    } else if (Stmt out = pipeline(n, body, stages, where)) {
      std::string line = where + (last_tma_ ? "pipelined by a TMA producer warpgroup (warp specialised, "
                                                  "mbarriers full/empty per stage) into " + std::to_string(stages) +
                                                      " buffers of"
                                            : "pipelined: " + std::to_string(stages - 1) + " copies ahead into " +
                                                  std::to_string(stages) + " buffers of");
      for (auto& name : last_staged_) line += " " + name;
      if (!last_multicast_.empty()) {
        line += "; multicast across the cluster of " + std::to_string(kernel_->cluster_size()) + " blocks:";
        for (auto& name : last_multicast_) line += " " + name;
      } else if (!no_multicast_.empty()) {
        line += "; no multicast in the cluster: " + no_multicast_;
      }
      if (last_tma_ && last_overlap_)
        line += "; its last T.gemm runs one iteration behind, asynchronously, overlapping the next iteration's "
                "work until P is written again";
      if (target_.kind == "hip") line += " (plain loads and stores into LDS: no asynchronous copies on hip)";
      if (asked_behind_ && last_overlap_)
        line += " (as its stage list asks; copies by the producer, otherwise the compiler's own order)";
      else if (asked_behind_)
        line += " (its stage list asks for the last T.gemm a stage behind: not done, measured slower where both "
                "products are as wide (H100, head dim 128: 479 vs 568 TFLOP/s) or the body is not attention's two "
                "products with P written between them; the compiler's own order)";
      else if (n->attrs.count("order") || n->attrs.count("stage"))
        line += " (order/stage given: scheduled copies first, the compiler's own order)";
      report.push_back(line);
      return out;
    } else if (not_ahead_.empty()) {
      report.push_back(where + "runs in order (it has no global -> shared T.copy to issue ahead)");
    } else {
      // The program asked for a pipeline and has copies to overlap: a slower schedule.
      std::string line = where + "runs in order [slower path: no copy can be issued ahead: ";
      for (size_t k = 0; k < not_ahead_.size(); ++k) line += (k ? "; " : "") + not_ahead_[k];
      report.push_back(line + "]");
    }
    return with_loop_body(n, body, ForKind::Serial, {});
  }

 private:
  static Stmt with_loop_body(const ForNode* n, Stmt body, ForKind kind, Attrs attrs) {
    return std::make_shared<ForNode>(n->var, n->min, n->extent, kind, std::move(body), std::move(attrs), n->span);
  }

  // Why a loop's producers cannot be TMA copies issued by a producer warpgroup (empty when
  // they can): Hopper with TMA and warp specialisation on, a top-level loop of a 1-D block
  // of whole warpgroups, a T.gemm among the consumers, each producer a 2-D tile whose rows
  // lie along the tensor's contiguous dimension.
  std::string why_not_tma(const ForNode* loop, const std::vector<Stmt>& stmts, const std::vector<bool>& is_producer) const {
    if (target_.kind != "cuda" || target_.arch_number() != 90 || target_.arch.back() != 'a')
      return "TMA and warp specialisation need sm_90a";
    if (target_.disable_tma) return "pass config tl.disable_tma_lower is set";
    if (target_.disable_warp_specialized) return "pass config tl.disable_warp_specialized is set";
    if (!kernel_ || kernel_->threads.size() != 1 || kernel_->num_threads() % 128 != 0)
      return "the block is not a 1-D block of whole warpgroups";
    if (tma_pipelines_ > 0) return "another loop of the kernel has the TMA pipeline (one per kernel)";
    if (std::string why = why_not_nested(); !why.empty()) return why;
    bool gemm = false;
    for (size_t i = 0; i < stmts.size(); ++i) gemm = gemm || (!is_producer[i] && contains_gemm(stmts[i]));
    if (!gemm) return "no T.gemm consumes the copies";
    for (size_t i = 0; i < stmts.size(); ++i) {
      if (!is_producer[i]) continue;
      if (std::string why = why_not_tma_load(*as<TileOpNode>(stmts[i]), target_); !why.empty()) return why;
    }
    return "";
  }

  // The producer warpgroup runs the loops, lets and branches around the pipelined loop
  // (not the rest of the block's work): they must be serial loops, and what they compute
  // must depend only on indices and global memory, not on values the consumers make.
  std::string why_not_nested() const {
    for (const StmtNode* s : enclosing_) {
      if (auto* f = dynamic_cast<const ForNode*>(s)) {
        if (f->for_kind != ForKind::Serial)
          return "the loop is inside a loop that is not serial (T.Parallel, T.Pipelined, unrolled)";
        if (!index_only(f->min) || !index_only(f->extent))
          return "an enclosing loop's range reads memory other than global tensors";
      } else if (dynamic_cast<const WhileNode*>(s)) {
        // (The producer warpgroup would have to run the while loop in step with the consumers.)
        return "the loop is inside a while loop";
      } else if (auto* i = dynamic_cast<const IfThenElseNode*>(s)) {
        if (!index_only(i->cond)) return "an enclosing condition reads memory other than global tensors, or the thread index";
      } else if (auto* l = dynamic_cast<const LetStmtNode*>(s)) {
        if (!index_only(l->value)) return "the value of '" + l->var->name + "' around the loop reads memory other than global tensors";
      }
    }
    return "";
  }

  static bool index_only(const Expr& e) {
    bool ok = true;
    for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) {
      if (auto* l = dynamic_cast<const BufferLoadNode*>(n)) ok = ok && l->buffer->is_global();
      if (auto* c = dynamic_cast<const CallNode*>(n)) ok = ok && c->op != "thread_index";
    });
    return ok;
  }

  // A TMA pipeline in the form the warp specialisation pass splits: one loop whose body is
  //   if ws_role(1):  [wait empty[s] after the first round] arrive_expect_tx(full[s]) T.copy(tma)...
  //   if ws_role(0):  wait full[s]; consumers on slot s; arrive empty[s]
  // with s = i % S; the producer part is the work of one thread of the producer
  // warpgroup, the consumer part the block's own threads (docs/gpu_lowering.md).
  Stmt tma_pipeline(const ForNode* loop, const std::vector<Stmt>& stmts, const std::vector<bool>& is_producer,
                    const std::vector<int64_t>& masks, const std::unordered_map<const BufferNode*, Buffer>& staged,
                    int64_t S) {
    Span sp = loop->span;
    Buffer bars = make_buffer("pipeline_mbar", DataType::UInt(64), {c(2 * S)}, scope::kSharedDyn, sp);
    // Inside another loop or a branch, the set-up moves to the kernel's start and the
    // iterations are counted across the loop's runs (see mutate_kernel).
    bool hoist = hoisted();
    Buffer counter = hoist ? make_buffer("pipeline_iter", DataType::Int(32), {c(1)}, scope::kLocalVar, sp) : nullptr;
    Expr base = hoist ? make_load(counter, {c(0)}, sp) : c(0);
    Expr i = add(base, sub(loop->var, loop->min, sp), sp);
    Expr slot = floormod(i, c(S), sp), round = floordiv(i, c(S), sp);
    auto bar = [&](const Expr& index) { return make_load(bars, {index}, sp); };
    Expr full = bar(slot), empty_bar = bar(add(slot, c(S), sp));
    int64_t bytes = 0;
    std::vector<Stmt> produce;
    for (size_t k = 0; k < stmts.size(); ++k) {
      if (!is_producer[k]) continue;
      auto* op = as<TileOpNode>(stmts[k]);
      bytes += tma_load_bytes(*op);
      Attrs attrs = op->attrs;
      attrs["tma"] = int64_t(1);
      if (masks[k]) attrs["cluster_mask"] = masks[k];
      produce.push_back(AddStage(staged, slot).mutate(
          std::make_shared<TileOpNode>(op->op, op->regions, std::vector<Expr>{full}, attrs, op->span)));
    }
    auto role = [&](int64_t r) {
      return std::make_shared<CallNode>(DataType::Bool(), "ws_role", std::vector<Expr>{c(r)}, sp);
    };
    auto guarded = [&](const Expr& cond, Stmt st) -> Stmt {
      return std::make_shared<IfThenElseNode>(cond, std::move(st), nullptr, sp);
    };
    // A slot is refilled once its consumers of the round before have released it.
    Expr empty_parity = floormod(add(round, c(1), sp), c(2), sp);
    // Coordinates read from tensors the kernel never writes (a paged cache's block table)
    // are read before the wait for the slot, so that their latency overlaps it instead of
    // delaying the copy after the slot frees.
    std::vector<std::pair<Var, Expr>> index_reads;
    for (auto& st : produce) st = read_coordinates_early(st, kernel_writes_, index_reads);
    Stmt producer = make_seq({guarded(binary(BinaryOp::GE, i, c(S), sp), call_stmt("mbarrier_wait", {empty_bar, empty_parity}, sp)),
                              call_stmt("mbarrier_arrive_expect_tx", {full, c(bytes)}, sp), make_seq(produce, sp)},
                             sp);
    for (size_t k = index_reads.size(); k-- > 0;)
      producer = std::make_shared<LetStmtNode>(index_reads[k].first, index_reads[k].second, producer, sp);
    std::vector<Stmt> consumers;
    for (size_t k = 0; k < stmts.size(); ++k)
      if (!is_producer[k] && !is_barrier(stmts[k])) consumers.push_back(stmts[k]);
    // With multicasts, a block writes into the others' stages: a stage is free once the
    // consumers of every block of the cluster have released it (each warp arrives once on
    // every block's empty barrier).
    bool multicast = false;
    for (int64_t m : masks) multicast = multicast || m != 0;
    int64_t blocks = multicast ? kernel_->cluster_size() : 1;
    auto release_of = [&](const Expr& bar) {
      return multicast ? call_stmt("mbarrier_arrive_cluster", {bar, c(blocks)}, sp)
                       : call_stmt("mbarrier_arrive", {bar}, sp);
    };
    Stmt release = release_of(empty_bar);
    Stmt wait_full = call_stmt("mbarrier_wait", {full, floormod(round, c(2), sp)}, sp);
    Stmt consumer = make_seq({wait_full, AddStage(staged, slot).mutate(make_seq(consumers, sp)), release}, sp);
    Stmt epilogue;  // after the loop: what the consumers still owe of the last iteration
    last_overlap_ = false;
    if (Overlap o = find_overlap(consumers, staged, S); o.g1 >= 0 && !hoist) {
      // The last T.gemm of an iteration (O += P V) and the statements before it that only
      // update O (the rescale) run one iteration behind, asynchronously: iteration i issues
      // its first T.gemm (S = Q K^T), then the previous iteration's O update and last
      // T.gemm, waits for the first only, and runs the softmax while the last one still
      // occupies the tensor cores; it waits for that one before it writes P again.
      // With two warpgroups taking turns (tl.enable_warpgroup_pingpong), the O update runs
      // at the end of its own iteration instead, so that a turn only issues: just before
      // the product, with S = Q K^T in flight, ptxas waits for every group (C7517). Measured
      // on the H100 (benchmarks/RESULTS.md, 2026-12-07) that move alone cost 14% at head dim
      // 64 (340 vs 396 TFLOP/s): the wait ptxas adds costs less than the rescale on the
      // critical path after the last wait.
      const bool o_update_at_end = target_.enable_pingpong;
      auto async = [&](const Stmt& st) {
        auto* op = as<TileOpNode>(st);
        Attrs attrs = op->attrs;
        attrs["wg_wait"] = int64_t(-1);
        return Stmt(std::make_shared<TileOpNode>(op->op, op->regions, op->args, attrs, op->span));
      };
      Expr prev = sub(loop->var, c(1), sp);  // the previous iteration's loop index
      Expr i_prev = sub(i, c(1), sp);
      Expr slot_prev = floormod(i_prev, c(S), sp);
      auto stage1 = [&](const Expr& index, const Expr& at_slot) {
        std::vector<Stmt> out;
        for (size_t k = o_update_at_end ? o.g1 : o.p_write + 1; k < consumers.size(); ++k)
          out.push_back(k == size_t(o.g1) ? async(consumers[k]) : consumers[k]);
        return AddStage(staged, at_slot).mutate(substitute(make_seq(out, sp), {{loop->var.get(), index}}));
      };
      std::vector<Stmt> pre(consumers.begin(), consumers.begin() + o.g0);
      pre.push_back(async(consumers[o.g0]));
      std::vector<Stmt> mid(consumers.begin() + o.g0 + 1, consumers.begin() + o.p_write);
      // The P write (then this iteration's O updates, where they run at the end).
      std::vector<Stmt> tail(consumers.begin() + o.p_write, consumers.begin() + o.g1);
      if (!o_update_at_end) tail.erase(tail.begin() + 1, tail.end());
      Expr later = binary(BinaryOp::GE, i, c(1), sp);
      Stmt wait_first = std::make_shared<IfThenElseNode>(later, call_stmt("wait_wgmma", {c(1)}, sp),
                                                         call_stmt("wait_wgmma", {c(0)}, sp), sp);
      consumer = make_seq({wait_full, AddStage(staged, slot).mutate(make_seq(pre, sp)),
                           guarded(later, stage1(prev, slot_prev)), wait_first,
                           AddStage(staged, slot).mutate(make_seq(mid, sp)), call_stmt("wait_wgmma", {c(0)}, sp),
                           guarded(later, release_of(bar(add(slot_prev, c(S), sp)))),
                           AddStage(staged, slot).mutate(make_seq(tail, sp))},
                          sp);
      Expr n = loop->extent;
      Expr last_i = sub(n, c(1), sp);
      epilogue = guarded(binary(BinaryOp::GE, n, c(1), sp),
                         make_seq({stage1(add(loop->min, last_i, sp), floormod(last_i, c(S), sp)),
                                   call_stmt("wait_wgmma", {c(0)}, sp)},
                                  sp));
      last_overlap_ = true;
    }
    Stmt body = make_seq({guarded(role(1), producer), guarded(role(0), consumer)}, sp);
    Attrs attrs = {{"software_pipeline", int64_t(1)}, {"ws_pipeline", int64_t(1)}, {"num_stages", S}};
    Stmt l = with_loop_body(loop, body, ForKind::Serial, attrs);
    // full[s] completes on the producer's arrive plus the bytes; empty[s] on every consumer
    // thread's arrive. One thread initialises them before anyone waits.
    int64_t consumers_n = multicast ? kernel_->num_threads() / 32 * blocks : kernel_->num_threads();
    std::vector<Stmt> init;
    for (int64_t k = 0; k < S; ++k) {
      init.push_back(call_stmt("mbarrier_init", {bar(c(k)), c(1)}, sp));
      init.push_back(call_stmt("mbarrier_init", {bar(c(k + S)), c(consumers_n)}, sp));
    }
    if (multicast) init.push_back(call_stmt("fence_barrier_init", {}, sp));
    multicasts_ = multicasts_ || multicast;
    Expr first_thread = binary(BinaryOp::EQ, std::make_shared<CallNode>(DataType::Int(32), "thread_index",
                                                                        std::vector<Expr>{c(0)}, sp),
                               c(0), sp);
    ++tma_pipelines_;
    if (hoist) {
      hoisted_ = {bars, counter, guarded(first_thread, make_seq(init, sp))};
      Stmt count = std::make_shared<BufferStoreNode>(counter, add(base, loop->extent, sp), std::vector<Expr>{c(0)}, sp);
      return make_seq({l, count}, sp);
    }
    Stmt seq = make_seq({call_stmt("sync_threads", {}, sp), guarded(first_thread, make_seq(init, sp)), after_init(sp), l,
                         epilogue},
                        sp);
    return std::make_shared<AllocateNode>(bars, seq, Attrs{{"pipelined", int64_t(1)}}, sp);
  }

  // The cluster multicast of each producer (a bit mask of the cluster's blocks, 0 for none):
  // the mask given (T.copy_cluster, checked here), or, in a cluster kernel, the whole
  // cluster for a copy whose tile is the same in every block of a cluster (its region does
  // not depend on the block indices along the cluster's dimensions). Either needs the loop
  // to run equally often in every block of a cluster, since the blocks release stages for
  // each other.
  std::vector<int64_t> multicast_masks(const ForNode* loop, const std::vector<Stmt>& stmts,
                                       const std::vector<bool>& is_producer, const std::string& no_tma) {
    std::vector<int64_t> masks(stmts.size(), 0);
    no_multicast_.clear();
    if (!kernel_ || kernel_->cluster.empty()) return masks;
    // Values that may differ between the blocks of one cluster.
    std::unordered_set<const VarNode*> varying;
    for (size_t d = 0; d < kernel_->block_vars.size() && d < 3; ++d)
      if (kernel_->cluster[d] > 1) varying.insert(kernel_->block_vars[d].get());
    std::string uneven;  // why the trip count may differ between the blocks
    for (const StmtNode* e : enclosing_) {
      if (auto* l = dynamic_cast<const LetStmtNode*>(e)) {
        if (mentions_any(l->value, varying)) varying.insert(l->var.get());
      } else if (auto* f = dynamic_cast<const ForNode*>(e)) {
        if (mentions_any(f->min, varying) || mentions_any(f->extent, varying)) {
          varying.insert(f->var.get());
          uneven = "an enclosing loop's range depends on the block index";
        }
      } else if (auto* i = dynamic_cast<const IfThenElseNode*>(e)) {
        if (mentions_any(i->cond, varying)) uneven = "an enclosing condition depends on the block index";
      } else if (auto* w = dynamic_cast<const WhileNode*>(e)) {
        if (mentions_any(w->cond, varying)) uneven = "an enclosing while loop's condition depends on the block index";
      }
    }
    if (mentions_any(loop->min, varying) || mentions_any(loop->extent, varying))
      uneven = "the loop's range depends on the block index";
    // (T.use_swizzle moves whole clusters in a cluster kernel: the reasoning holds there too.)
    no_multicast_ = !no_tma.empty()     ? "no TMA pipeline"
                    : !uneven.empty()   ? uneven
                                        : "no copied tile is the same in all blocks of the cluster (multicast within "
                                          "rows or columns of a 2-D cluster is not supported yet)";
    for (size_t k = 0; k < stmts.size(); ++k) {
      if (!is_producer[k]) continue;
      auto* op = as<TileOpNode>(stmts[k]);
      if (op->attrs.count("cluster_mask")) {
        std::string why = !no_tma.empty() ? no_tma : uneven.empty() ? "" : uneven + " along the cluster";
        if (!why.empty())
          fail(ErrorKind::Unsupported, op->span,
               "T.copy_cluster(cluster_mask=...): the multicast is issued by the TMA pipeline of its T.Pipelined "
               "loop, which this loop cannot have: " + why,
               "copy the tile in each block with T.copy, or make the loop's trip count the same in every block "
               "of a cluster");
        masks[k] = attr_int(*op, "cluster_mask", 0);
        continue;
      }
      if (!no_tma.empty() || !uneven.empty()) continue;
      bool same = true;
      for (auto& rg : op->regions[0].ranges) same = same && !mentions_any(rg.min, varying) && !mentions_any(rg.extent, varying);
      if (same) masks[k] = (int64_t(1) << kernel_->cluster_size()) - 1;
    }
    return masks;
  }

  // The schedule above, or null when the loop has no producer.
  Stmt pipeline(const ForNode* loop, const Stmt& body, int64_t S, const std::string& where) {
    Span sp = loop->span;
    std::vector<Stmt> stmts = statements_with_lets_inlined(body, kernel_writes_);
    asked_behind_ = asks_last_gemm_behind(loop, stmts);
    auto inner_vars = vars_bound_in(make_seq(stmts, sp));
    std::vector<std::unordered_set<const BufferNode*>> writes;
    for (auto& x : stmts) writes.push_back(buffers_written(x));
    std::vector<std::unordered_set<const VarNode*>> storage_writes;  // also through T.reshape / T.view
    for (auto& x : stmts) storage_writes.push_back(storage_written(x));
    std::vector<bool> is_producer(stmts.size(), false);
    std::unordered_map<const BufferNode*, Buffer> staged;
    not_ahead_.clear();
    for (size_t i = 0; i < stmts.size(); ++i) {
      auto* op = as<TileOpNode>(stmts[i]);
      if (!op || op->op != "copy" || op->regions.size() != 2 || op->attrs.count("tma")) continue;
      const Buffer &src = op->regions[0].buffer, &dst = op->regions[1].buffer;
      if (!src->is_global() || !dst->is_shared()) continue;
      // Why a global -> shared copy cannot be issued ahead (empty when it can).
      std::string why;
      auto u = uses_.loops.find(dst.get());
      if (staged.count(dst.get())) why = "another copy of the loop fills " + dst->name;
      // Staging gives the tile new storage; a T.reshape / T.view would still name the old.
      else if (dst->is_view || aliases_.aliased(dst)) why = dst->name + " is reached through T.reshape / T.view";
      else if (u == uses_.loops.end() || u->second.size() != 1 || !u->second.count(loop))
        why = dst->name + " is used outside the loop";
      for (size_t j = 0; j < stmts.size() && why.empty(); ++j)
        if (j != i && writes[j].count(dst.get())) why = "another statement of the loop writes " + dst->name;
        else if (j != i && (writes[j].count(src.get()) || (src->data && storage_writes[j].count(src->data.get()))))
          why = "the loop writes " + src->name;
      for (auto& r : op->regions)
        for (auto& rg : r.ranges)
          if (why.empty() && !(loop_invariant_but_for(rg.min, inner_vars, kernel_writes_) &&
                               loop_invariant_but_for(rg.extent, inner_vars, kernel_writes_)))
            why = "its region depends on a value computed inside the loop or on memory the kernel writes";
      if (!why.empty()) {
        not_ahead_.push_back("T.copy " + src->name + " -> " + dst->name + " (line " + std::to_string(op->span.line) +
                             "): " + why);
        continue;
      }
      std::vector<Expr> shape = {c(S)};
      shape.insert(shape.end(), dst->shape.begin(), dst->shape.end());
      staged[dst.get()] = make_buffer(dst->name, dst->dtype, shape, dst->scope, dst->span);
      is_producer[i] = true;
    }
    if (staged.empty()) return nullptr;
    last_staged_.clear();
    for (size_t i = 0; i < stmts.size(); ++i)
      if (is_producer[i]) last_staged_.push_back(as<TileOpNode>(stmts[i])->regions[1].buffer->name);
    for (auto& [old, fresh] : staged) staged_[old] = fresh;
    std::string no_tma = why_not_tma(loop, stmts, is_producer);
    // A constant trip count below 2 has nothing to overlap; but a multicast the program
    // asked for is issued by the TMA pipeline, which takes a loop of one iteration too.
    bool asked_multicast = false;
    for (size_t i = 0; i < stmts.size(); ++i)
      asked_multicast = asked_multicast || (is_producer[i] && as<TileOpNode>(stmts[i])->attrs.count("cluster_mask"));
    if (const int64_t* trips = const_int(loop->extent); trips && (*trips < 1 || (*trips == 1 && !asked_multicast)))
      no_tma = "the loop runs " + std::to_string(*trips) + " time(s)";
    last_tma_ = no_tma.empty();
    std::vector<int64_t> masks = multicast_masks(loop, stmts, is_producer, no_tma);
    last_multicast_.clear();
    for (size_t k = 0; k < stmts.size(); ++k)
      if (masks[k]) last_multicast_.push_back(as<TileOpNode>(stmts[k])->regions[1].buffer->name);
    if (last_tma_) return tma_pipeline(loop, stmts, is_producer, masks, staged, S);
    // On Hopper, cp.async in place of TMA is the slower path.
    if (target_.kind == "cuda" && target_.arch_number() >= 90)
      report.push_back(where + "copies by cp.async, not TMA [slower path: not TMA: " + no_tma + "]");

    // Producers of iteration j (an expression) into slot `slot`, marked async.
    auto producers = [&](const Expr& j, const Expr& slot) {
      std::vector<Stmt> out;
      Expr k = add(loop->min, j, sp);
      for (size_t i = 0; i < stmts.size(); ++i) {
        if (!is_producer[i]) continue;
        auto* op = as<TileOpNode>(stmts[i]);
        Attrs attrs = op->attrs;
        attrs["async"] = int64_t(1);
        Stmt p = std::make_shared<TileOpNode>(op->op, op->regions, op->args, attrs, op->span);
        p = substitute(p, {{loop->var.get(), k}});
        out.push_back(AddStage(staged, slot).mutate(p));
      }
      return make_seq(out, sp);
    };
    auto guarded = [&](const Expr& cond, Stmt s) -> Stmt {
      return std::make_shared<IfThenElseNode>(cond, std::move(s), nullptr, sp);
    };
    Stmt commit = call_stmt("cp_async_commit", {}, sp);
    const Expr& n = loop->extent;

    // Earlier uses of the buffers (an enclosing loop's last iteration) end first.
    std::vector<Stmt> out = {call_stmt("sync_threads", {}, sp)};
    for (int64_t s = 0; s + 1 < S; ++s) {
      out.push_back(guarded(lt(c(s), n, sp), producers(c(s), c(s))));
      out.push_back(commit);
    }
    Expr i = sub(loop->var, loop->min, sp);
    Expr ahead = add(i, c(S - 1), sp);
    std::vector<Stmt> iter = {call_stmt("cp_async_wait", {c(S - 2)}, sp), call_stmt("sync_threads", {}, sp),
                              guarded(lt(ahead, n, sp), producers(ahead, floormod(ahead, c(S), sp))), commit};
    std::vector<Stmt> consumers;
    for (size_t k = 0; k < stmts.size(); ++k)
      if (!is_producer[k] && !is_barrier(stmts[k])) consumers.push_back(stmts[k]);
    iter.push_back(AddStage(staged, floormod(i, c(S), sp)).mutate(make_seq(consumers, sp)));
    out.push_back(with_loop_body(loop, make_seq(iter, sp), ForKind::Serial, {{"software_pipeline", int64_t(1)}}));
    return make_seq(out, sp);
  }

  // The statements of a consumer body that the overlap of tma_pipeline moves (indices
  // into it; g1 < 0 when it does not apply): exactly two T.gemm, the first (g0) writing
  // S, the last (g1, the body's last statement) reading P from registers and a staged
  // shared tile and accumulating into O; p_write the one statement that writes P (after
  // g0); between p_write and g1 only statements that write O alone; before p_write nothing
  // touches O or P, and nothing up to g0 writes what the moved statements read.
  struct Overlap {
    int g0 = -1, g1 = -1;
    size_t p_write = 0;
  };
  // Whether T.Pipelined's stage list (one entry per statement, groups expanded by the front
  // end) puts the last T.gemm of the body in a later stage than the first: upstream's way of
  // asking for attention's P V one iteration behind (stage=[-1, 0, 0, 1, -1, 1]).
  static bool asks_last_gemm_behind(const ForNode* loop, const std::vector<Stmt>& stmts) {
    auto it = loop->attrs.find("stage");
    auto* stage = it == loop->attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
    if (!stage || stage->size() != stmts.size()) return false;
    std::vector<size_t> gemms;
    for (size_t k = 0; k < stmts.size(); ++k)
      if (auto* op = as<TileOpNode>(stmts[k]); op && op->op == "gemm") gemms.push_back(k);
    return gemms.size() >= 2 && (*stage)[gemms.back()] > (*stage)[gemms.front()];
  }

  Overlap find_overlap(const std::vector<Stmt>& body, const std::unordered_map<const BufferNode*, Buffer>& staged,
                       int64_t S) const {
    Overlap none;
    if (target_.disable_wgmma_overlap || S < 2) return none;
    std::vector<int> gemms;
    for (size_t k = 0; k < body.size(); ++k) {
      auto* op = as<TileOpNode>(body[k]);
      if (op && op->op == "gemm") gemms.push_back(int(k));
      else if (contains_gemm(body[k])) return none;
    }
    if (gemms.size() != 2 || size_t(gemms[1]) + 1 != body.size()) return none;
    auto* g1 = as<TileOpNode>(body[gemms[1]]);
    auto* g0 = as<TileOpNode>(body[gemms[0]]);
    if (g1->regions.size() != 3 || g0->regions.size() != 3) return none;
    const Buffer &P = g1->regions[0].buffer, &O = g1->regions[2].buffer;
    if (!P->is_fragment() || !O->is_fragment() || !staged.count(g1->regions[1].buffer.get())) return none;
    if (attr_int(*g1, "wg_wait", 0) != 0 || attr_int(*g0, "wg_wait", 0) != 0) return none;
    // Only where the last T.gemm is the narrower one (attention with head dim 64 against
    // key tiles of 128): measured on the H200 (benchmarks/RESULTS.md, run 29) the overlap
    // gave +5-9% there and cost 4-9% where both are as wide (head dim 128); on the H100
    // (2026-12-07) 479 vs 568 TFLOP/s at head dim 128 even where the program's stage list
    // asks for it. With two consumer warpgroups taking turns (tl.enable_warpgroup_pingpong)
    // at any width: the turns are built on this schedule (transform/pingpong_warpgroups.h).
    const int64_t *o_cols = const_int(O->shape.back()), *s_cols = const_int(g0->regions[2].buffer->shape.back());
    if (!o_cols || !s_cols || (*o_cols >= *s_cols && !target_.enable_pingpong)) return none;
    int p_write = -1;
    for (int k = 0; k < gemms[1]; ++k)
      if (buffers_written(body[k]).count(P.get())) {
        if (p_write >= 0) return none;
        p_write = k;
      }
    if (p_write <= gemms[0]) return none;
    std::unordered_set<const BufferNode*> moved_reads;
    for (int k = p_write + 1; k < gemms[1]; ++k) {
      auto w = buffers_written(body[k]);
      if (w.size() != 1 || !w.count(O.get())) return none;
      auto t = buffers_touched(body[k]);
      moved_reads.insert(t.begin(), t.end());
    }
    for (int k = 0; k < p_write; ++k) {
      auto t = buffers_touched(body[k]);
      if (t.count(O.get()) || t.count(P.get())) return none;
      if (k <= gemms[0])
        for (auto* b : buffers_written(body[k]))
          if (moved_reads.count(b)) return none;
    }
    return {gemms[0], gemms[1], size_t(p_write)};
  }

  // Whether tma_pipeline sets the loop's barriers up at the kernel's start (it sits in
  // another loop or a branch).
  bool hoisted() const {
    for (const StmtNode* e : enclosing_)
      if (!dynamic_cast<const LetStmtNode*>(e)) return true;
    return false;
  }

  // After the mbarriers' initialisation: the block waits for it; with multicasts the whole
  // cluster does, since the other blocks arrive on these barriers and copy into this block.
  Stmt after_init(Span sp) const {
    return call_stmt(multicasts_ ? "cluster_sync" : "sync_threads", {}, sp);
  }

  static bool is_barrier(const Stmt& s) {
    auto* ev = as<EvaluateNode>(s);
    auto* call = ev ? as<CallNode>(ev->value) : nullptr;
    return call && call->op == "sync_threads";
  }

  const Target& target_;
  const KernelNode* kernel_ = nullptr;
  std::vector<const StmtNode*> enclosing_;  // loops, branches and lets around the statement
  // The kernel's TMA pipeline when it is nested: its barriers, iteration counter and set-up.
  struct Hoisted {
    Buffer bars, counter;
    Stmt init;
  } hoisted_;
  int tma_pipelines_ = 0;
  bool multicasts_ = false;  // the kernel's TMA pipeline multicasts across its cluster
  std::unordered_set<const BufferNode*> kernel_writes_;  // every buffer the kernel writes
  StorageAliases aliases_;                               // buffers sharing storage (T.reshape / T.view)
  bool asked_behind_ = false;  // the loop's stage list puts its last T.gemm a stage behind
  bool last_overlap_ = false;  // the last pipeline's final T.gemm runs one iteration behind
  bool last_tma_ = false;
  BufferUses uses_;
  std::unordered_map<const BufferNode*, Buffer> staged_;
  std::vector<std::string> last_staged_, last_multicast_;
  std::vector<std::string> not_ahead_;  // the loop's copies that cannot be issued ahead, and why
  std::string no_multicast_;  // why a cluster kernel's pipeline multicasts nothing
};

}  // namespace

// Layout annotations of multi-buffered buffers follow them to their staged copies.
class RetargetAnnotations : public IRMutator {
 public:
  explicit RetargetAnnotations(const std::unordered_map<const BufferNode*, Buffer>& staged) : staged_(staged) {}

 protected:
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override {
    if (n->op != "annotate_layout" || n->regions.size() != 1) return s;
    auto it = staged_.find(n->regions[0].buffer.get());
    if (it == staged_.end()) return s;
    return std::make_shared<TileOpNode>(n->op, std::vector<BufferRegion>{full_region(it->second, n->span)}, n->args,
                                        n->attrs, n->span);
  }

 private:
  const std::unordered_map<const BufferNode*, Buffer>& staged_;
};

PrimFunc inject_software_pipeline(const PrimFunc& f, const Target& target) {
  UseCollector uses;
  uses.visit(f->body);
  SoftwarePipeline pass(target, std::move(uses.uses));
  Stmt body = pass.mutate(f->body);
  if (!pass.staged().empty()) body = RetargetAnnotations(pass.staged()).mutate(body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
