#include "transform/lower_to_threads.h"

#include <algorithm>
#include <map>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "layout/layout.h"
#include "op/op.h"
#include "op/region.h"
#include "op/copy_tma.h"
#include "op/thread_context.h"
#include "op/gemm.h"
#include "transform/apply_swizzles.h"
#include "transform/layout_inference.h"
#include "transform/pass.h"

namespace tl {
namespace {

thread_local const LayoutObserver* layout_observer = nullptr;

// Every element access to a fragment under s: (buffer, indices, span).
struct FragmentAccess {
  Buffer buffer;
  std::vector<Expr> indices;
  Span span;
};
std::vector<FragmentAccess> fragment_accesses(const Stmt& s) {
  struct Collect : IRVisitor {
    std::vector<FragmentAccess> out;
    using IRVisitor::visit;
    void visit_load(const BufferLoadNode* n) override {
      if (n->buffer->is_fragment()) out.push_back({n->buffer, n->indices, n->span});
      IRVisitor::visit_load(n);
    }
    void visit_store(const BufferStoreNode* n) override {
      if (n->buffer->is_fragment()) out.push_back({n->buffer, n->indices, n->span});
      IRVisitor::visit_store(n);
    }
  } c;
  c.visit(s);
  return c.out;
}

// The variables e reads.
std::unordered_map<const VarNode*, Expr> vars_in(const Expr& e) {
  struct Collect : IRMutator {
    std::unordered_map<const VarNode*, Expr> out;
    Expr mutate_var(const Expr& x) override {
      out.emplace(as<VarNode>(x), x);
      return x;
    }
  } c;
  c.mutate(e);
  return c.out;
}

// Fragments become per-thread arrays: F[i, j] -> F_local[layout.local_index(i, j)].
class FragmentToLocal : public IRMutator {
 public:
  explicit FragmentToLocal(const LayoutMap& layouts) : layouts_(layouts) {}

 protected:
  // By storage: a T.reshape of a fragment reaches the same registers (its layout has the
  // same slots, see layout_inference's view_source).
  Buffer local_of(const Buffer& b) {
    const void* key = b->data ? static_cast<const void*>(b->data.get()) : static_cast<const void*>(b.get());
    auto it = locals_.find(key);
    if (it != locals_.end()) return it->second;
    const TilePartition& p = layouts_.at(b.get());
    Buffer local = make_buffer(b->name, b->dtype, {make_int(p.local_size())}, scope::kLocal, b->span);
    locals_.emplace(key, local);
    return local;
  }
  // One index into a fragment of rank >= 2 is a register slot already (fragment_slot).
  Expr slot_of(const Buffer& b, const std::vector<Expr>& indices) {
    if (indices.size() == 1 && b->shape.size() >= 2) return indices[0];
    return layouts_.at(b.get()).local_index(indices);
  }
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    Expr m = IRMutator::mutate_load(e, n);
    auto* l = as<BufferLoadNode>(m);
    if (!l->buffer->is_fragment()) return m;
    Expr index = slot_of(l->buffer, l->indices);
    return std::make_shared<BufferLoadNode>(l->dtype, local_of(l->buffer), std::vector<Expr>{index}, l->span);
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    Stmt m = IRMutator::mutate_store(s, n);
    auto* st = as<BufferStoreNode>(m);
    if (!st->buffer->is_fragment()) return m;
    Expr index = slot_of(st->buffer, st->indices);
    return std::make_shared<BufferStoreNode>(local_of(st->buffer), st->value, std::vector<Expr>{index}, st->span);
  }
  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    Stmt m = IRMutator::mutate_allocate(s, n);
    auto* a = as<AllocateNode>(m);
    if (!a->buffer->is_fragment()) return m;
    return std::make_shared<AllocateNode>(local_of(a->buffer), a->body, a->attrs, a->span);
  }

 private:
  const LayoutMap& layouts_;
  std::unordered_map<const void*, Buffer> locals_;
};

class ThreadLowering : public IRMutator {
 public:
  explicit ThreadLowering(const Target& target) : target_(target) {}

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    if (layouts_) fail(ErrorKind::Syntax, n->span, "T.Kernel blocks cannot be nested");
    KernelLayouts layouts = infer_layouts(*n, target_);
    report_decisions(layouts);
    if (layout_observer) (*layout_observer)(*n, layouts);
    layouts_ = &layouts;
    kernel_ = n;
    threads_ = n->num_threads();
    // The flat thread index: tx + ty * X + tz * X * Y.
    thread_ = n->thread_vars.empty() ? make_int(0) : Expr(n->thread_vars[0]);
    int64_t stride = n->threads.empty() ? 1 : n->threads[0];
    for (size_t d = 1; d < n->thread_vars.size(); ++d) {
      thread_ = add(thread_, mul(n->thread_vars[d], make_int(stride)));
      stride *= n->threads[d];
    }
    for (size_t d = 0; d < n->block_vars.size(); ++d) bind_loop_var(az_, n->block_vars[d].get(), make_int(0), n->grid[d]);
    for (size_t d = 0; d < n->thread_vars.size(); ++d) az_.bind(n->thread_vars[d].get(), 0, n->threads[d]);
    Stmt body = mutate(n->body);
    body = FragmentToLocal(layouts.fragments).mutate(body);
    body = apply_swizzles(body, layouts.swizzled);
    for (auto& v : n->block_vars) az_.unbind(v.get());
    for (auto& v : n->thread_vars) az_.unbind(v.get());
    layouts_ = nullptr;
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, n->threads, body, n->span, n->cluster);
  }

  // Threads along y or z (WebGPU's compilers take subgroup builtins in x-only blocks).
  bool multi_axis_block() const {
    for (size_t d = 1; d < kernel_->threads.size(); ++d)
      if (kernel_->threads[d] > 1) return true;
    return false;
  }

  // Threads exist only inside a kernel: host code (allowed on the CPU) has none to spread
  // a tile over.
  void require_kernel(Span span, const std::string& what) const {
    if (!layouts_)
      fail(ErrorKind::Unsupported, span, what + " outside T.Kernel, which target " + target_.kind + " does not support",
           "move the work inside a `with T.Kernel(...)` block");
  }

  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    // A reducer's contribution, its T.Parallel iteration placed (and guarded) by now.
    Stmt store = reducer_update_as_store(n);
    return store ? mutate(store) : IRMutator::mutate_evaluate(s, n);
  }
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override {
    require_kernel(n->span, "T." + n->op);
    const TileOpDef* def = find_tile_op(n->op);
    if (!def) fail(ErrorKind::Name, n->span, "unknown tile operator '" + n->op + "'");
    if (!def->lower_threads)
      fail(ErrorKind::Unsupported, n->span, "T." + n->op + " is not supported on target " + target_.kind + " yet",
           "run this kernel on target=\"cpu\" for now");
    ThreadContext ctx{target_, az_, thread_, threads_, *layouts_, {}, &report, multi_axis_block()};
    Stmt lowered = def->lower_threads(*n, ctx);
    for (auto it = ctx.scratch.rbegin(); it != ctx.scratch.rend(); ++it)
      lowered = std::make_shared<AllocateNode>(*it, lowered, Attrs{}, n->span);
    return lowered;
  }

  Expr mutate_call(const Expr& e, const CallNode* n) override {
    if (n->op == "thread_index" && kernel_) {
      const int64_t* d = const_int(n->args.at(0));
      if (!d || *d < 0 || size_t(*d) >= kernel_->thread_vars.size())
        fail(ErrorKind::Type, n->span, "T.get_thread_binding: no thread dimension " + to_str(n->args.at(0)));
      return kernel_->thread_vars[*d];
    }
    if (n->op == "shuffle_width" && kernel_) {
      // How many consecutive threads exchange values by shuffles on this target (the thread
      // all-reduce's levels are chosen by it); 1: they meet in shared memory.
      // A block of several warps with a partial last one: its missing lanes would be named
      // by the shuffles' full mask.
      int64_t w = ThreadContext::shuffle_width_of(target_, threads_, multi_axis_block());
      bool partial_warp = threads_ > w && threads_ % w != 0;
      if (partial_warp) w = 1;
      if (w == 1 && !shuffle_report_) {
        std::string why = partial_warp             ? "the block's " + std::to_string(threads_) +
                                                         " threads are not whole warps"
                          : target_.warp_size() > 1 ? "WebGPU's subgroup operations need a block of one thread axis "
                                                      "of whole subgroups"
                                                    : "no shuffles on target " + target_.kind;
        report.push_back(n->span.str() + ": T.tvm_thread_allreduce through shared memory [slower path: " + why + "]");
        shuffle_report_ = true;
      }
      return make_int(w);
    }
    return IRMutator::mutate_call(e, n);
  }

  // Outside T.Parallel every thread runs the statement: a fragment every thread holds whole
  // (layout inference gives that to fragments used so) is read and written in each copy.
  bool held_whole(const Buffer& b) const {
    if (!layouts_) return false;
    auto it = layouts_->fragments.find(b.get());
    if (it == layouts_->fragments.end()) return false;
    int64_t n = 1;
    for (int64_t e : it->second.shape()) n *= e;
    return it->second.local_size() == n && it->second.replicas() == threads_;
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    if (n->buffer->is_fragment() && !in_thread_code_ && !held_whole(n->buffer))
      fail(ErrorKind::Layout, n->span,
           "element of fragment '" + n->buffer->name + "' written outside a T.Parallel loop: on target " +
               target_.kind + " each thread holds only part of a fragment",
           "write fragments inside `for ... in T.Parallel(...)` or with tile operators");
    return IRMutator::mutate_store(s, n);
  }
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    if (n->buffer->is_fragment() && !in_thread_code_ && !held_whole(n->buffer))
      fail(ErrorKind::Layout, n->span,
           "element of fragment '" + n->buffer->name + "' read outside a T.Parallel loop: on target " +
               target_.kind + " each thread holds only part of a fragment",
           "read fragments inside `for ... in T.Parallel(...)`, or reduce them into a shared buffer");
    return IRMutator::mutate_load(e, n);
  }

  // The bounds of a let-bound value hold for its variable (a loop extent computed once).
  Stmt mutate_let(const Stmt& s, const LetStmtNode* n) override {
    if (!n->var->dtype.is_integer()) return IRMutator::mutate_let(s, n);
    az_.bind(n->var.get(), az_.const_int_bound(n->value));
    Stmt out = IRMutator::mutate_let(s, n);
    az_.unbind(n->var.get());
    return out;
  }

  // Inside `if x + c < e` (or <=, and conjunctions of them) x is known to be smaller, so
  // the lowerings below can drop bounds guards the condition already implies.
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* n) override {
    if (auto* c = as<CallNode>(n->cond); c && c->op == "thread_range") return region(n, c);
    std::vector<std::pair<const VarNode*, arith::ConstIntBound>> saved;
    std::function<void(const Expr&)> learn = [&](const Expr& cond) {
      auto* b = as<BinaryNode>(cond);
      if (!b) return;
      if (b->op == BinaryOp::And) {
        learn(b->a);
        learn(b->b);
        return;
      }
      if (b->op != BinaryOp::LT && b->op != BinaryOp::LE) return;
      Expr lhs = b->a;
      int64_t offset = 0;
      if (auto* add_node = as<BinaryNode>(lhs); add_node && add_node->op == BinaryOp::Add)
        if (const int64_t* k = const_int(add_node->b)) {
          offset = *k;
          lhs = add_node->a;
        }
      auto* v = as<VarNode>(lhs);
      if (!v || !v->dtype.is_integer()) return;
      arith::ConstIntBound old = az_.const_int_bound(lhs), rhs = az_.const_int_bound(b->b);
      if (rhs.max == arith::ConstIntBound::kPosInf) return;
      int64_t limit = rhs.max - offset - (b->op == BinaryOp::LT ? 1 : 0);
      if (limit >= old.max) return;
      saved.push_back({v, old});
      az_.bind(v, arith::ConstIntBound{old.min, limit});
    };
    learn(az_.simplify(n->cond));
    Stmt then_case = mutate(n->then_case);
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) az_.bind(it->first, it->second);
    Stmt else_case = n->else_case ? mutate(n->else_case) : nullptr;
    return std::make_shared<IfThenElseNode>(mutate(n->cond), then_case, else_case, n->span);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind == ForKind::Parallel) {
      require_kernel(n->span, "a T.Parallel loop");
      if (in_thread_code_)
        fail(ErrorKind::Unsupported, n->span, "a T.Parallel loop inside another T.Parallel loop",
             "write the nest as one `for i, j in T.Parallel(M, N)`");
      // T.im2col arrives as a T.Parallel gather; Hopper could have its TMA im2col mode.
      if (n->attrs.count("im2col") && target_.kind == "cuda" && target_.arch_number() >= 90)
        report.push_back(n->span.str() + ": T.im2col gathered into the tile by the threads [slower path: TMA's "
                         "im2col mode is not used; each element is loaded by a thread, out-of-image ones set to 0]");
      if (const BufferNode* own = per_thread_array_of(n)) {
        // A nest over a thread's own array (T.alloc_local) and no fragment: every thread
        // runs all of its iterations on its array, as upstream does.
        report.push_back(n->span.str() + ": T.Parallel over the per-thread array '" + own->name +
                         "': every thread runs all its iterations");
        return mutate(serial_nest(n));
      }
      return partition(n);
    }
    bind_loop_var(az_, n->var.get(), n->min, n->extent);
    Stmt body = mutate(n->body);
    az_.unbind(n->var.get());
    ForKind kind = n->for_kind == ForKind::Pipelined ? ForKind::Serial : n->for_kind;
    // A short loop whose variable picks fragment elements (acc[i + s * 16, j]) is unrolled:
    // a register array indexed at run time would live in local memory.
    if (n->for_kind == ForKind::Serial && in_thread_code_ == 0) {
      const int64_t* count = const_int(n->extent);
      if (const BufferNode* f = fragment_indexed_by(body, n->var.get()); f && count && *count <= 16) {
        kind = ForKind::Unrolled;
        report.push_back(n->span.str() + ": loop over '" + n->var->name + "' unrolled: it picks elements of "
                         "fragment '" + f->name + "', which live in registers");
      }
    }
    Attrs attrs = n->for_kind == ForKind::Pipelined ? Attrs{} : n->attrs;
    return std::make_shared<ForNode>(n->var, mutate(n->min), mutate(n->extent), kind, body, attrs, n->span);
  }

 public:
  std::vector<std::string> report;

 private:
  int64_t region_threads_ = 0;  // the threads of the T.ws region being lowered
  void report_decisions(const KernelLayouts& layouts) {
    std::vector<std::pair<const TileOpNode*, GemmInstruction>> gemms(layouts.gemms.begin(), layouts.gemms.end());
    std::sort(gemms.begin(), gemms.end(), [](auto& a, auto& b) { return a.first->span.line < b.first->span.line; });
    for (auto& [op, ins] : gemms) {
      std::string line = op->span.str() + ": T.gemm ";
      const Buffer &A = op->regions[0].buffer, &B = op->regions[1].buffer, &C = op->regions[2].buffer;
      line += "(" + A->dtype.str() + " x " + B->dtype.str() + " -> " + C->dtype.str() + ") on ";
      auto swizzles = [&]() {
        std::string out;
        for (const Buffer& b : {A, B}) {
          auto it = layouts.swizzled.find(b.get());
          if (it == layouts.swizzled.end()) continue;
          out += "; " + b->name + " swizzled " + swizzle_mode_name(it->second.mode);
          if (it->second.panelled(*const_int(b->shape.back())))
            out += " in panels of " + std::to_string(it->second.panel_cols);
        }
        return out;
      };
      if (ins.kind == GemmInstruction::Kind::Wgmma) {
        line += "wgmma m64n" + std::to_string(ins.inst_n) + "k" + std::to_string(ins.k) + ", " +
                std::to_string(ins.warps_m) + " x " + std::to_string(ins.warps_n) + " warpgroups; A from " +
                (A->is_fragment() ? "registers" : "shared memory (descriptor)") + swizzles();
      } else if (ins.kind == GemmInstruction::Kind::Mfma || ins.kind == GemmInstruction::Kind::Wmma) {
        line += describe_matrix_core(*op, ins) + swizzles();
      } else if (ins.kind == GemmInstruction::Kind::MmaSync) {
        line += "mma.sync m16n8k" + std::to_string(ins.k) + ", " + std::to_string(ins.warps_m) + " x " + std::to_string(ins.warps_n) +
                " warps; A from " + (A->is_fragment() ? "registers" : "shared memory (ldmatrix)") + swizzles();
      } else {
        line += "SIMT multiply-adds (" + ins.why_simt + ")";
      }
      // A slower instruction than the program could have had: said here and warned about.
      if (!ins.why_not_faster.empty()) line += " [slower path: " + ins.why_not_faster + "]";
      report.push_back(line);
    }
    std::vector<const TileOpNode*> stores(layouts.tma_stores.begin(), layouts.tma_stores.end());
    std::sort(stores.begin(), stores.end(), [](auto* a, auto* b) { return a->span.line < b->span.line; });
    for (auto* op : stores) {
      auto [shared, global] = tma_store_regions(*op);
      const Buffer& S = shared->buffer;
      auto it = layouts.swizzled.find(S.get());
      bool reduce = op->op == "atomic_add";
      report.push_back(op->span.str() + ": T." + op->op + " " + S->name + " -> " + global->buffer->name +
                       (reduce ? " by TMA reduction (cp.reduce.async.bulk.tensor .add, boxes of "
                               : " by TMA store (cp.async.bulk.tensor, boxes of ") + to_str(S->shape[0]) + " x " +
                       std::to_string(it->second.panelled(*const_int(S->shape[1])) ? it->second.panel_cols
                                                                                    : *const_int(S->shape[1])) +
                       ", " + swizzle_mode_name(it->second.mode) + " swizzle)");
    }
  }

  // `with T.ws(...)`: the body's tile operators are lowered for the region's threads (the
  // region's first thread is thread 0 to them), and barriers their lowerings use become
  // named barriers of those threads.
  Stmt region(const IfThenElseNode* n, const CallNode* range) {
    require_kernel(n->span, "T.ws");
    if (region_threads_)
      fail(ErrorKind::Syntax, n->span, "T.ws blocks cannot be nested");
    int64_t lo = *const_int(range->args[0]), hi = *const_int(range->args[1]);
    Expr saved_thread = thread_;
    int64_t saved_threads = threads_;
    auto* tx = kernel_->thread_vars.empty() ? nullptr : kernel_->thread_vars[0].get();
    arith::ConstIntBound saved_bound = tx ? az_.const_int_bound(kernel_->thread_vars[0]) : arith::ConstIntBound{};
    if (tx) az_.bind(tx, lo, hi - lo);
    thread_ = sub(saved_thread, make_int(lo), n->span);
    threads_ = hi - lo;
    region_threads_ = threads_;
    Stmt body = mutate(n->then_case);
    thread_ = saved_thread;
    threads_ = saved_threads;
    region_threads_ = 0;
    if (tx) az_.bind(tx, saved_bound);
    // Without named barriers (webgpu, hip) a region is lowered only if it needs no barrier.
    if (target_.kind != "cuda") {
      bool synced = false;
      for_each_expr(body, [&](const ExprNode* e) {
        auto* call = dynamic_cast<const CallNode*>(e);
        synced = synced || (call && call->op == "sync_threads");
      });
      if (synced)
        fail(ErrorKind::Unsupported, n->span,
             "a barrier among the threads [" + std::to_string(lo) + ", " + std::to_string(hi) + ") of this region "
             "(T.ws, or an `if` on the thread index over whole warpgroups) is not supported on target " + target_.kind,
             "it needs a named barrier of those threads (CUDA); keep the region's exchanges through shared memory "
             "outside it, or compile for cuda");
    }
    struct Named : IRMutator {
      Expr id, count;
      Stmt mutate_evaluate(const Stmt& st, const EvaluateNode* e) override {
        auto* call = as<CallNode>(e->value);
        if (!call || call->op != "sync_threads") return st;
        return std::make_shared<EvaluateNode>(
            std::make_shared<CallNode>(DataType::Void(), "named_barrier_sync", std::vector<Expr>{id, count}, e->span),
            e->span);
      }
    } named;
    named.id = make_int(1 + lo / 128);  // as the barrier planner's (transform/insert_barriers.cc)
    named.count = make_int(hi - lo);
    Expr flat = saved_thread;
    Expr cond = binary(BinaryOp::And, binary(BinaryOp::GE, flat, make_int(lo), n->span), lt(flat, make_int(hi), n->span),
                       n->span);
    return std::make_shared<IfThenElseNode>(cond, named.mutate(body), nullptr, n->span);
  }

  static bool has_atomic(const Stmt& s) {
    bool found = false;
    for_each_expr(s, [&](const ExprNode* e) {
      if (auto* c = dynamic_cast<const CallNode*>(e))
        found = found || c->op.rfind("atomic_", 0) == 0 || c->op == "reducer_update";
    });
    return found;
  }

  static std::string to_str(const Expr& e) {
    const int64_t* v = const_int(e);
    return v ? std::to_string(*v) : "?";
  }

  // The per-thread array (T.alloc_local, not a fragment) a T.Parallel nest indexes with its
  // loop variables, when the nest touches no fragment; null otherwise.
  const BufferNode* per_thread_array_of(const ForNode* n) const {
    std::unordered_set<const VarNode*> vars{n->var.get()};
    Stmt body = n->body;
    while (auto* f = as<ForNode>(body)) {
      if (f->for_kind != ForKind::Parallel) break;
      vars.insert(f->var.get());
      body = f->body;
    }
    const BufferNode* own = nullptr;
    bool fragment = false;
    auto look = [&](const Buffer& b, const std::vector<Expr>& indices) {
      if (b->is_fragment()) fragment = true;
      if (!b->is_local() || b->is_fragment() || own) return;
      for (auto& i : indices)
        for_each_expr(std::make_shared<EvaluateNode>(i, n->span), [&](const ExprNode* e) {
          auto* v = dynamic_cast<const VarNode*>(e);
          if (v && vars.count(v)) own = b.get();
        });
    };
    struct Accesses : IRVisitor {
      std::function<void(const Buffer&, const std::vector<Expr>&)> look;
      using IRVisitor::visit;
      void visit_load(const BufferLoadNode* x) override {
        look(x->buffer, x->indices);
        IRVisitor::visit_load(x);
      }
      void visit_store(const BufferStoreNode* x) override {
        look(x->buffer, x->indices);
        IRVisitor::visit_store(x);
      }
      void visit_tile_op(const TileOpNode*) override {}
    } accesses;
    accesses.look = look;
    accesses.visit(body);
    return fragment ? nullptr : own;
  }

  // A fragment access the analyzer cannot keep inside the fragment (acc[i + s * 16, j], which
  // a guard `if i < 16` keeps inside; check_buffer_bounds has made sure of that) gets its
  // register slot clamped into the thread's array, so that the slot computed for an
  // iteration the guard skips is still one of the thread's (WGSL rejects a constant index
  // past an array's end). The slot is clamped, not the index, so that unrolled it folds
  // away (an index clamp would keep the lane's part of the row).
  Stmt clamp_fragment_indices(const Stmt& body, const std::vector<Var>& vars, const std::vector<int64_t>& extents) {
    for (size_t k = 0; k < vars.size(); ++k) az_.bind(vars[k].get(), 0, extents[k]);
    struct Clamp : IRMutator {
      arith::Analyzer* az;
      const KernelLayouts* layouts;
      bool inside(const Buffer& b, const std::vector<Expr>& indices) {
        for (size_t d = 0; d < indices.size() && d < b->shape.size(); ++d) {
          const int64_t* extent = const_int(b->shape[d]);
          arith::ConstIntBound r = az->const_int_bound(indices[d]);
          if (!extent || r.min < 0 || r.max >= *extent) return false;
        }
        return true;
      }
      static Expr clamp(const Expr& x, int64_t hi) {
        return max(min(x, make_int(hi, x->dtype)), make_int(0, x->dtype));
      }
      // The single index of the access: a register slot for a fragment of rank >= 2
      // (fragment_slot's convention), the clamped index for a 1-D one.
      std::vector<Expr> clamped(const Buffer& b, const std::vector<Expr>& indices) {
        if (indices.size() != b->shape.size() || inside(b, indices)) return indices;
        const TilePartition& l = layouts->fragments.at(b.get());
        if (indices.size() == 1) return {clamp(indices[0], *const_int(b->shape[0]) - 1)};
        return {clamp(l.local_index(indices), l.local_size() - 1)};
      }
      Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
        Expr m = IRMutator::mutate_load(e, n);
        auto* l = as<BufferLoadNode>(m);
        if (!l->buffer->is_fragment()) return m;
        return std::make_shared<BufferLoadNode>(l->dtype, l->buffer, clamped(l->buffer, l->indices), l->span);
      }
      Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
        Stmt m = IRMutator::mutate_store(s, n);
        auto* st = as<BufferStoreNode>(m);
        if (!st->buffer->is_fragment()) return m;
        return std::make_shared<BufferStoreNode>(st->buffer, st->value, clamped(st->buffer, st->indices), st->span);
      }
    } clamp;
    clamp.az = &az_;
    clamp.layouts = layouts_;
    Stmt out = clamp.mutate(body);
    for (auto& v : vars) az_.unbind(v.get());
    return out;
  }

  // The element size of the narrowest memory buffer a T.Parallel body stores to (2 for a
  // float16 output), 4 when it stores to none: the default spread gives each thread vectors
  // of 16 bytes of it (8 float16 elements, 4 float32 ones).
  static int narrowest_store(const Stmt& body) {
    int bytes = 4;
    for (const BufferNode* b : buffers_written(body))
      if (!b->is_local() && !b->dtype.is_sub_byte() && b->dtype.lanes == 1) bytes = std::min(bytes, b->dtype.bytes());
    return std::max(1, bytes);
  }

  // A fragment whose indices in s read v (null if none).
  static const BufferNode* fragment_indexed_by(const Stmt& s, const VarNode* v) {
    for (auto& a : fragment_accesses(s))
      for (auto& i : a.indices)
        if (vars_in(i).count(v)) return a.buffer.get();
    return nullptr;
  }

  // The same nest as serial loops.
  static Stmt serial_nest(const ForNode* n) {
    Stmt body = n->body;
    if (auto* inner = as<ForNode>(body); inner && inner->for_kind == ForKind::Parallel) body = serial_nest(inner);
    return std::make_shared<ForNode>(n->var, n->min, n->extent, ForKind::Serial, body, Attrs{}, n->span);
  }

  // A T.Parallel nest: its iterations spread over the threads.
  Stmt partition(const ForNode* n) {
    std::vector<Var> vars;
    std::vector<int64_t> extents;
    const ForNode* f = n;
    Stmt body;
    while (true) {
      const int64_t* mn = const_int(f->min);
      const int64_t* ext = const_int(f->extent);
      if (!mn || *mn != 0 || !ext)
        fail(ErrorKind::Unsupported, f->span,
             "T.Parallel with a symbolic or shifted range is not supported on target " + target_.kind,
             "use constant tile extents starting at 0");
      vars.push_back(f->var);
      extents.push_back(*ext);
      auto* inner = as<ForNode>(f->body);
      if (!inner || inner->for_kind != ForKind::Parallel) {
        body = f->body;
        break;
      }
      f = inner;
    }
    auto accesses = fragment_accesses(body);
    // The driver: a fragment indexed by exactly the loop variables, shaped like the nest.
    const TilePartition* driver = nullptr;
    std::string driver_name;
    for (auto& a : accesses) {
      if (a.indices.size() != vars.size()) continue;
      bool identity = true;
      for (size_t k = 0; k < vars.size(); ++k) identity = identity && a.indices[k] == Expr(vars[k]);
      const TilePartition& l = layouts_->fragments.at(a.buffer.get());
      if (identity && l.shape() == extents) {
        driver = &l;
        driver_name = a.buffer->name;
        if (l.replicas() == 1) break;  // prefer a layout without copies over a replicated one
      }
    }
    // A fragment indexed by the loop variables in another order (temp[i, kl, f] in a
    // T.Parallel(N, F, KL)), or with a 0 along dimensions of extent 1 (lse[k, 0] of a
    // [splits, 1] fragment in a T.Parallel(splits)), drives the loop too: the iterations of
    // a T.Parallel nest are independent, so the nest is taken in the fragment's order, with
    // a loop of one iteration for each unit dimension.
    for (auto& a : accesses) {
      if (driver || a.indices.size() < vars.size()) break;
      const TilePartition& l = layouts_->fragments.at(a.buffer.get());
      if (l.shape().size() != a.indices.size()) continue;
      std::vector<Var> v2;
      std::vector<int64_t> e2;
      std::vector<bool> used(vars.size(), false);
      bool fits = true;
      for (size_t d = 0; fits && d < a.indices.size(); ++d) {
        size_t k = 0;
        while (k < vars.size() && !(a.indices[d] == Expr(vars[k]))) ++k;
        if (k < vars.size() && !used[k]) {
          used[k] = true;
          v2.push_back(vars[k]);
          e2.push_back(extents[k]);
        } else if (const int64_t* c = const_int(a.indices[d]); c && *c == 0 && l.shape()[d] == 1) {
          v2.push_back(make_var(vars[0]->name + "_unit", DataType::Int(32), a.span));
          e2.push_back(1);
        } else {
          fits = false;
        }
      }
      if (!fits || std::count(used.begin(), used.end(), true) != int64_t(vars.size()) || l.shape() != e2) continue;
      vars = v2;
      extents = e2;
      driver = &l;
      driver_name = a.buffer->name;
    }
    // A fragment indexed by the loop variables plus offsets the loop does not change
    // (acc[i + s * 16, j] inside `for s in range(2)`) drives the loop too when shaped like the
    // nest: each iteration runs where its element at offset 0 is held, which is right when
    // the offsets move elements only between a thread's own slots; check_owners checks that
    // for every value of the offsets' variables.
    for (auto& a : accesses) {
      if (driver) break;
      const TilePartition& l = layouts_->fragments.at(a.buffer.get());
      if (a.indices.size() != vars.size() || l.shape() != extents) continue;
      bool shifted = true;
      for (size_t k = 0; shifted && k < vars.size(); ++k) {
        std::unordered_map<const VarNode*, Expr> used = vars_in(az_.simplify(sub(a.indices[k], vars[k])));
        for (auto& v : vars) shifted = shifted && !used.count(v.get());
      }
      if (!shifted) continue;
      driver = &l;
      driver_name = a.buffer->name;
    }
    // Without a driver the iterations get a default share; check_owners then tells whether
    // the fragments the loop touches are where those iterations run.
    TilePartition fallback = TilePartition::grid(extents, threads_, narrowest_store(body));
    const TilePartition& layout = driver ? *driver : fallback;
    std::vector<Buffer> exchange =
        check_owners(layout, driver_name, vars, extents, accesses, buffers_written(body), n->span);
    // A fragment the loop reads but whose elements other threads hold: every thread puts
    // what it holds (one copy each) into a shared buffer, and the loop reads that.
    std::vector<std::pair<Buffer, Buffer>> through_shared;
    for (const Buffer& frag : exchange) {
      Buffer shared = make_buffer(frag->name + "_exchange", frag->dtype, frag->shape, "shared", n->span);
      through_shared.push_back({frag, shared});
      report.push_back(n->span.str() + ": fragment '" + frag->name + "' reaches this T.Parallel loop through "
                       "shared memory [slower path: it is laid out as " + layouts_->fragments.at(frag.get()).str() +
                       ", the loop is spread over the threads " +
                       (driver_name.empty() ? "by default" : "like '" + driver_name + "'") + "]");
    }
    if (!through_shared.empty()) {
      std::unordered_map<const BufferNode*, Buffer> swap;
      for (auto& [frag, shared] : through_shared) swap[frag.get()] = shared;
      struct Swap : IRMutator {
        const std::unordered_map<const BufferNode*, Buffer>* swap;
        Expr mutate_load(const Expr& e, const BufferLoadNode* l) override {
          Expr m = IRMutator::mutate_load(e, l);
          auto* x = as<BufferLoadNode>(m);
          auto it = swap->find(x->buffer.get());
          return it == swap->end() ? m : std::make_shared<BufferLoadNode>(x->dtype, it->second, x->indices, x->span);
        }
      } swapper;
      swapper.swap = &swap;
      body = swapper.mutate(body);
    }
    body = clamp_fragment_indices(body, vars, extents);
    // Under a replicated layout every copy's thread runs the iteration: right for the
    // fragment updates (each copy must change), wrong for atomics and a reducer's
    // contributions (T.reducer_update), which count once.
    Expr once = has_atomic(body) ? layout.first_replica(thread_, n->span) : nullptr;

    ThreadContext ctx{target_, az_, thread_, threads_, *layouts_, {}, nullptr, multi_axis_block()};
    ++in_thread_code_;
    Stmt out = ctx.over_owned(layout, [&](const std::vector<Expr>& index) {
      std::unordered_map<const VarNode*, Expr> sub;
      for (size_t k = 0; k < vars.size(); ++k) sub[vars[k].get()] = index[k];
      Stmt b = mutate(substitute(body, sub));
      return once ? Stmt(std::make_shared<IfThenElseNode>(once, b, nullptr, n->span)) : b;
    }, n->span, vars[0]->name);
    // A thread's consecutive elements in memory: one vector store (and vector loads) each.
    out = vectorize_stores(out, az_);
    if (!through_shared.empty()) {
      // Earlier reads of the shared buffers end, the holders' stores land, then the loop.
      std::vector<Stmt> seq = {sync_threads(n->span)};
      for (auto& [frag, shared] : through_shared)
        seq.push_back(mutate(ctx.put_in_shared(frag, layouts_->fragments.at(frag.get()), shared, n->span)));
      seq.push_back(sync_threads(n->span));
      seq.push_back(out);
      out = make_seq(seq, n->span);
      for (auto& [frag, shared] : through_shared) out = std::make_shared<AllocateNode>(shared, out, Attrs{}, n->span);
    }
    --in_thread_code_;
    return out;
  }

  // Every fragment element an iteration touches must be held by every thread that runs it.
  // A fragment the loop only reads that fails this is returned (it reaches the loop through
  // shared memory); one it writes is an error.
  std::vector<Buffer> check_owners(const TilePartition& layout, const std::string& driver,
                                   const std::vector<Var>& vars, const std::vector<int64_t>& extents,
                                   const std::vector<FragmentAccess>& accesses,
                                   const std::unordered_set<const BufferNode*>& written, Span span) {
    std::vector<Buffer> exchange;
    int64_t points = 1;
    for (auto e : extents) points *= e;
    // Accesses that hold by construction need no enumeration: the driver's own layout at
    // the loop's own indices, or its row (column) results at the row (column) variable.
    std::vector<FragmentAccess> open;
    for (auto& a : accesses) {
      const TilePartition& held = layouts_->fragments.at(a.buffer.get());
      bool identity = a.indices.size() == vars.size();
      for (size_t k = 0; identity && k < vars.size(); ++k) identity = a.indices[k] == Expr(vars[k]);
      if (identity && held == layout) continue;
      if (a.indices.size() == 1 && layout.is_2d() && vars.size() == 2 && held.shape().size() == 1) {
        if (a.indices[0] == Expr(vars[0]) && held == layout.row_replicated(held.shape())) continue;
        if (a.indices[0] == Expr(vars[1]) && held == layout.col_replicated(held.shape())) continue;
      }
      open.push_back(a);
    }
    std::vector<FragmentAccess> accesses_left = open;
    if (accesses_left.empty() || points > (int64_t(1) << 18)) return exchange;
    std::vector<int64_t> point(vars.size(), 0);
    IndexEnv env;
    std::map<std::pair<const BufferNode*, size_t>, bool> free_dims;  // thread_free_dim, once each
    // Variables of enclosing loops in the indices (acc[i + s * 16, j] in `for s in range(2)`)
    // take each of their values in turn when they have few; others are handled below.
    std::vector<std::pair<const VarNode*, arith::ConstIntBound>> outer;
    int64_t combos = 1;
    {
      std::unordered_set<const VarNode*> loop_vars, seen;
      for (auto& v : vars) loop_vars.insert(v.get());
      for (auto& a : open)
        for (auto& i : a.indices)
          for (auto& [v, var] : vars_in(i)) {
            if (loop_vars.count(v) || !seen.insert(v).second) continue;
            arith::ConstIntBound b = az_.const_int_bound(var);
            int64_t values = b.max - b.min + 1;
            if (b.min == arith::ConstIntBound::kNegInf || b.max == arith::ConstIntBound::kPosInf || values > 64 ||
                combos * values * points > (int64_t(1) << 20))
              continue;
            outer.push_back({v, b});
            combos *= values;
          }
    }
    for (int64_t combo = 0; combo < combos; ++combo) {
    int64_t rest_combo = combo;
    for (auto& [v, b] : outer) {
      int64_t values = b.max - b.min + 1;
      env[v] = b.min + rest_combo % values;
      rest_combo /= values;
    }
    for (int64_t flat = 0; flat < points; ++flat) {
      int64_t rest = flat;
      for (size_t k = vars.size(); k-- > 0;) {
        point[k] = rest % extents[k];
        rest /= extents[k];
        env[vars[k].get()] = point[k];
      }
      for (int64_t rep = 0; rep < layout.replicas(); ++rep) {
        int64_t t = layout.thread_of(point, rep);
        for (size_t ai = 0; ai < accesses_left.size(); ++ai) {
          const FragmentAccess& a = accesses_left[ai];
          std::vector<int64_t> idx;
          bool inside = true, unknown_owner = false;
          const TilePartition& held = layouts_->fragments.at(a.buffer.get());
          for (size_t d = 0; d < a.indices.size(); ++d) {
            try {
              idx.push_back(evaluate_index(a.indices[d], env));
            } catch (const CompileError&) {
              // An index the loop variables do not give (an outer serial loop's variable:
              // upstream's split-KV combine reads lse[k, j]) is fine along a dimension that
              // only moves the slot: the thread holding the element is the same whatever
              // its value, so any value checks the ownership. Along a thread dimension a
              // fragment the loop only reads goes through shared memory (below).
              auto key = std::make_pair(a.buffer.get(), d);
              auto found = free_dims.find(key);
              if (found == free_dims.end()) found = free_dims.emplace(key, thread_free_dim(held, d)).first;
              if (!found->second && !written.count(a.buffer.get())) unknown_owner = true;
              else if (!found->second)
                fail(ErrorKind::Layout, a.span,
                     "the index of fragment '" + a.buffer->name + "' along dimension " + std::to_string(d) +
                         " depends on values other than the loop variables of its T.Parallel loop, and that "
                         "dimension is spread over the threads (" + held.str() + ")",
                     "index fragments by the loop variables (and constants) only, or keep that dimension "
                     "in each thread's slots (T.Fragment(..., forward_fn=lambda k, j: (j, k)))");
              idx.push_back(0);
              continue;
            }
            inside = inside && idx.back() >= 0 && idx.back() < *const_int(a.buffer->shape[d]);
          }
          if (!inside) continue;
          bool ok = false;
          for (int64_t r = 0; r < held.replicas() && !ok && !unknown_owner; ++r) ok = held.thread_of(idx, r) == t;
          if (!ok && !written.count(a.buffer.get())) {
            // Read only: every access of this fragment goes through shared memory instead.
            const Buffer b = a.buffer;
            exchange.push_back(b);
            accesses_left.erase(std::remove_if(accesses_left.begin(), accesses_left.end(),
                                               [&](const FragmentAccess& x) { return x.buffer == b; }),
                                accesses_left.end());
            ai = size_t(-1);  // the list changed: start over with what is left
            if (accesses_left.empty()) return exchange;
            continue;
          }
          if (!ok) {
            std::string at;  // the values of enclosing loops' variables in the index
            for (auto& [v, b] : outer) {
              bool in_index = false;
              for (auto& i : a.indices) in_index = in_index || vars_in(i).count(v);
              if (in_index) at += (at.empty() ? " (at " : ", ") + v->name + " = " + std::to_string(env[v]);
            }
            if (!at.empty()) at += ")";
            fail(ErrorKind::Layout, a.span,
                 "fragment '" + a.buffer->name + "' is laid out as " + held.str() + ", but this T.Parallel "
                 "loop is spread over the threads " + (driver.empty() ? "by default" : "like '" + driver + "'") +
                 " (" + layout.str() + "): a thread would need an element another thread holds" + at,
                 "index the fragments of one loop the same way, or go through shared memory");
          }
        }
      }
    }
    }
    (void)span;
    return exchange;
  }

  // Whether moving an element of `held` along dimension d never changes its threads.
  bool thread_free_dim(const TilePartition& held, size_t d) {
    const std::vector<int64_t>& shape = held.shape();
    int64_t points = 1;
    for (auto e : shape) points *= e;
    if (points > (int64_t(1) << 18)) return false;
    std::vector<int64_t> idx(shape.size(), 0), base;
    for (int64_t flat = 0; flat < points; ++flat) {
      int64_t rest = flat;
      for (size_t k = shape.size(); k-- > 0;) {
        idx[k] = rest % shape[k];
        rest /= shape[k];
      }
      base = idx;
      base[d] = 0;
      for (int64_t r = 0; r < held.replicas(); ++r)
        if (held.thread_of(idx, r) != held.thread_of(base, r)) return false;
    }
    return true;
  }

  const Target& target_;
  arith::Analyzer az_;
  const KernelLayouts* layouts_ = nullptr;
  const KernelNode* kernel_ = nullptr;
  Expr thread_;
  int64_t threads_ = 1;
  bool shuffle_report_ = false;  // the report says once that the all-reduce has no shuffles
  int in_thread_code_ = 0;
};

}  // namespace

ObserveLayouts::ObserveLayouts(LayoutObserver fn) : fn_(std::move(fn)), previous_(layout_observer) {
  layout_observer = &fn_;
}
ObserveLayouts::~ObserveLayouts() { layout_observer = previous_; }

PrimFunc lower_to_threads(const PrimFunc& f, const Target& target) {
  ThreadLowering pass(target);
  return with_report(with_body(f, pass.mutate(f->body)), pass.report);
}

}  // namespace tl
