#include "transform/insert_barriers.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "arith/analyzer.h"
#include "arith/int_math.h"
#include "arith/linear_form.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "ir/structural.h"
#include "transform/pass.h"
#include "transform/simplify.h"

namespace tl {
namespace {

using arith::ConstIntBound;

const char* const kBarrierOp = "sync_threads";

// A named barrier the kernel's code places itself (T.sync_threads(barrier_id)) counts as
// one: the threads that synchronise by hand have chosen which of them wait.
bool is_barrier_call(const CallNode* call) {
  return call && (call->op == kBarrierOp || call->op == "named_barrier_sync");
}

bool is_barrier(const Stmt& s) {
  auto* ev = as<EvaluateNode>(s);
  return is_barrier_call(ev ? as<CallNode>(ev->value) : nullptr);
}

// The threads [lo, hi) of a `with T.ws(...)` region; hi < 0 for the whole block.
struct ThreadRange {
  int64_t lo = 0, hi = -1;
  bool whole() const { return hi < 0; }
  bool operator==(const ThreadRange&) const = default;
};

// The region `cond` opens (`if thread_range(lo, hi)`), if it is one.
std::optional<ThreadRange> thread_range_of(const Expr& cond) {
  auto* c = as<CallNode>(cond);
  if (!c || c->op != "thread_range" || c->args.size() != 2) return std::nullopt;
  const int64_t *lo = const_int(c->args[0]), *hi = const_int(c->args[1]);
  if (!lo || !hi) return std::nullopt;
  return ThreadRange{*lo, *hi};
}

// A barrier of the block, or inside a T.ws region one of its threads only (named barrier
// 1 + its first warpgroup: the other threads never reach it).
Stmt make_barrier(Span span, ThreadRange range = {}) {
  auto call = range.whole() ? std::make_shared<CallNode>(DataType::Void(), kBarrierOp, std::vector<Expr>{}, span)
                            : std::make_shared<CallNode>(DataType::Void(), "named_barrier_sync",
                                                         std::vector<Expr>{make_int(1 + range.lo / 128),
                                                                           make_int(range.hi - range.lo)},
                                                         span);
  return std::make_shared<EvaluateNode>(call, span);
}

// Buffers whose accesses by different threads must be ordered by a barrier.
bool is_tracked(const Buffer& b) { return !b->is_fragment() && !b->is_local(); }

// Saturating addition on the bounds of the analyzer (infinities stay infinite).
int64_t add_bound(int64_t a, int64_t b) {
  if (a == ConstIntBound::kNegInf || b == ConstIntBound::kNegInf) return ConstIntBound::kNegInf;
  if (a == ConstIntBound::kPosInf || b == ConstIntBound::kPosInf) return ConstIntBound::kPosInf;
  if (b > 0 && a > ConstIntBound::kPosInf - b) return ConstIntBound::kPosInf;
  if (b < 0 && a < ConstIntBound::kNegInf - b) return ConstIntBound::kNegInf;
  return a + b;
}

// The values a loop variable takes over all iterations of [min, min + extent).
ConstIntBound loop_var_bound(arith::Analyzer& analyzer, const Expr& min, const Expr& extent) {
  ConstIntBound lo = analyzer.const_int_bound(min);
  ConstIntBound ext = analyzer.const_int_bound(extent);
  int64_t last = ext.max <= 1 ? lo.max : add_bound(lo.max, add_bound(ext.max, -1));
  return {lo.min, last};
}

// Binds a variable for the lifetime of the object and restores what was known before
// (the same variable node may be bound again in a nested scope).
class ScopedBind {
 public:
  ScopedBind(arith::Analyzer& analyzer, const Var& v, ConstIntBound bound)
      : analyzer_(analyzer), var_(v), old_(analyzer.const_int_bound(v)) {
    analyzer_.bind(var_.get(), bound);
  }
  ~ScopedBind() { analyzer_.bind(var_.get(), old_); }
  ScopedBind(const ScopedBind&) = delete;
  ScopedBind& operator=(const ScopedBind&) = delete;

 private:
  arith::Analyzer& analyzer_;
  Var var_;
  ConstIntBound old_;
};

// ---------------------------------------------------------------- accesses

// Inclusive bounds of the elements touched in one dimension.
struct Interval {
  int64_t lo, hi;
  bool operator==(const Interval&) const = default;
};

struct Access {
  const void* storage;        // identity of the memory: the data variable, else the buffer
  const BufferNode* buffer;   // regions compare only within one buffer (same shape)
  bool write;
  std::vector<Interval> region;  // one interval per dimension; empty: the whole buffer
  ThreadRange threads = {};      // the T.ws region that made it
  bool operator==(const Access&) const = default;
};
using AccessSet = std::vector<Access>;

bool disjoint(const Access& a, const Access& b) {
  if (a.buffer != b.buffer || a.region.empty() || a.region.size() != b.region.size()) return false;
  for (size_t d = 0; d < a.region.size(); ++d) {
    if (a.region[d].hi < b.region[d].lo || b.region[d].hi < a.region[d].lo) return true;
  }
  return false;
}

bool conflicts(const Access& a, const Access& b) {
  // Two T.ws regions order what they share by hand (mbarriers): no barrier between them.
  if (!a.threads.whole() && !b.threads.whole() && !(a.threads == b.threads)) return false;
  return a.storage == b.storage && (a.write || b.write) && !disjoint(a, b);
}

bool conflicts(const AccessSet& unit, const AccessSet& pending) {
  for (auto& a : unit)
    for (auto& p : pending)
      if (conflicts(a, p)) return true;
  return false;
}

void merge(AccessSet& into, const AccessSet& from) {
  for (auto& a : from) {
    bool known = false;
    for (auto& b : into) known = known || a == b;
    if (!known) into.push_back(a);
  }
}

// How each region of a tile operator is used (docs/tile_ops.md).
struct RegionUse {
  bool read, write;
};
std::vector<RegionUse> region_uses(const TileOpNode* n) {
  const RegionUse r{true, false}, w{false, true}, rw{true, true};
  const std::string& op = n->op;
  std::vector<RegionUse> uses;
  if (op == "copy" || op == "cumsum") uses = {r, w};
  else if (op == "fill") uses = {w};
  else if (op == "gemm") uses = {r, r, rw};
  else if (op == "reduce") uses = {r, rw};
  else if (op.rfind("atomic_", 0) == 0) uses = {rw, r};
  else if (op == "print") uses = {r};
  else if (op == "annotate_layout") uses = {{false, false}};  // runs no code
  // An operator this table does not know may do anything to its operands.
  uses.resize(n->regions.size(), rw);
  return uses;
}

// The accesses of one unit: every load read, every store written, tile operator regions as
// their operator uses them. Indices are bounded with the loops inside the unit bound too.
class AccessCollector : public IRVisitor {
 public:
  using IRVisitor::visit;
  AccessCollector(arith::Analyzer& analyzer, const std::unordered_set<const BufferNode*>& self_synchronised,
                  const std::unordered_map<const BufferNode*, const void*>& shared_bytes, ThreadRange threads = {})
      : analyzer_(analyzer), self_synchronised_(self_synchronised), shared_bytes_(shared_bytes), threads_(threads) {}
  AccessSet accesses;

 protected:
  void record(const Buffer& b, bool write, std::vector<Interval> region) {
    if (!is_tracked(b) || self_synchronised_.count(b.get())) return;
    const void* storage = b->data ? static_cast<const void*>(b->data.get()) : b.get();
    // Buffers planned into overlapping bytes of shared memory are one storage.
    if (auto it = shared_bytes_.find(b.get()); it != shared_bytes_.end()) storage = it->second;
    // A T.reshape / T.view is its allocation's storage.
    else if (b->data)
      for (auto& [alloc, root] : shared_bytes_)
        if (alloc->data == b->data) storage = root;
    Access a{storage, b.get(), write, std::move(region), threads_};
    merge(accesses, {a});
  }
  std::vector<Interval> point_region(const std::vector<Expr>& indices) {
    std::vector<Interval> region;
    for (auto& i : indices) {
      ConstIntBound b = analyzer_.const_int_bound(i);
      region.push_back({b.min, b.max});
    }
    return region;
  }
  std::vector<Interval> range_region(const BufferRegion& r) {
    std::vector<Interval> region;
    for (auto& rg : r.ranges) {
      ConstIntBound lo = analyzer_.const_int_bound(rg.min);
      ConstIntBound ext = analyzer_.const_int_bound(rg.extent);
      region.push_back({lo.min, add_bound(lo.max, add_bound(ext.max, -1))});
    }
    return region;
  }

  void visit_load(const BufferLoadNode* n) override {
    record(n->buffer, false, point_region(n->indices));
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    record(n->buffer, true, point_region(n->indices));
    IRVisitor::visit_store(n);
  }
  void visit_call(const CallNode* n) override {
    // A scalar atomic's first argument is a load naming the address it updates.
    auto* target = n->args.empty() ? nullptr : as<BufferLoadNode>(n->args[0]);
    if (target && n->op.rfind("atomic_", 0) == 0) record(target->buffer, true, point_region(target->indices));
    IRVisitor::visit_call(n);
  }
  void visit_tile_op(const TileOpNode* n) override {
    // A TMA copy is ordered by its mbarrier (the pipeline's, or one by hand): no barrier.
    if (n->op == "copy" && n->attrs.count("tma")) return;
    std::vector<RegionUse> uses = region_uses(n);
    for (size_t i = 0; i < n->regions.size(); ++i) {
      const BufferRegion& r = n->regions[i];
      if (uses[i].read) record(r.buffer, false, range_region(r));
      if (uses[i].write) record(r.buffer, true, range_region(r));
      for (auto& rg : r.ranges) {
        visit(rg.min);
        visit(rg.extent);
      }
    }
    for (auto& a : n->args) visit(a);
  }
  void visit_for(const ForNode* n) override {
    visit(n->min);
    visit(n->extent);
    ScopedBind bind(analyzer_, n->var, loop_var_bound(analyzer_, n->min, n->extent));
    visit(n->body);
  }
  void visit_let(const LetStmtNode* n) override {
    visit(n->value);
    ScopedBind bind(analyzer_, n->var, analyzer_.const_int_bound(n->value));
    visit(n->body);
  }

 private:
  arith::Analyzer& analyzer_;
  const std::unordered_set<const BufferNode*>& self_synchronised_;
  const std::unordered_map<const BufferNode*, const void*>& shared_bytes_;
  ThreadRange threads_;
};

// ---------------------------------------------------------------- uniformity

// Which variables and per-thread buffers may hold different values in different threads of
// a block: thread indices, T.Parallel loop variables, and whatever is computed from them.
// A local buffer is varying when it is written from varying values or under varying
// control. The sets grow monotonically, so the walk repeats until they stop growing.
class VaryingAnalysis : public IRVisitor {
 public:
  using IRVisitor::visit;

  void run(const KernelNode* k) {
    for (auto& v : k->thread_vars) vars_.insert(v.get());
    do {
      grew_ = false;
      visit(k->body);
    } while (grew_);
  }

  bool varying(const Expr& e) const {
    if (!e) return false;
    switch (e->kind) {
      case ExprKind::Var: return vars_.count(static_cast<const VarNode*>(e.get())) > 0;
      case ExprKind::Binary: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        return varying(n->a) || varying(n->b);
      }
      case ExprKind::Not: return varying(static_cast<const NotNode*>(e.get())->a);
      case ExprKind::Select: {
        auto* n = static_cast<const SelectNode*>(e.get());
        return varying(n->cond) || varying(n->true_value) || varying(n->false_value);
      }
      case ExprKind::Cast: return varying(static_cast<const CastNode*>(e.get())->value);
      case ExprKind::BufferLoad: {
        // A fragment element lives in one thread; other buffers read at a uniform index
        // give every thread the same value.
        auto* n = static_cast<const BufferLoadNode*>(e.get());
        if (n->buffer->is_fragment() || buffers_.count(n->buffer.get())) return true;
        return any_varying(n->indices);
      }
      case ExprKind::Call: {
        auto* n = static_cast<const CallNode*>(e.get());
        return n->op == "thread_index" || n->op == "thread_range" || any_varying(n->args);
      }
      default: return false;
    }
  }

 protected:
  bool any_varying(const std::vector<Expr>& v) const {
    for (auto& e : v)
      if (varying(e)) return true;
    return false;
  }
  void mark(const VarNode* v) { grew_ = vars_.insert(v).second || grew_; }
  void mark(const BufferNode* b) { grew_ = buffers_.insert(b).second || grew_; }

  void visit_for(const ForNode* n) override {
    bool spread = n->for_kind == ForKind::Parallel || varying(n->min) || varying(n->extent);
    if (spread) mark(n->var.get());
    varying_control_ += spread;
    visit(n->body);
    varying_control_ -= spread;
  }
  void visit_if(const IfThenElseNode* n) override {
    bool spread = varying(n->cond);
    varying_control_ += spread;
    visit(n->then_case);
    visit(n->else_case);
    varying_control_ -= spread;
  }
  void visit_while(const WhileNode* n) override {
    bool spread = varying(n->cond);
    varying_control_ += spread;
    visit(n->body);
    varying_control_ -= spread;
  }
  void visit_let(const LetStmtNode* n) override {
    if (varying(n->value)) mark(n->var.get());
    visit(n->body);
  }
  void visit_store(const BufferStoreNode* n) override {
    if (n->buffer->is_local() && (varying_control_ || varying(n->value) || any_varying(n->indices)))
      mark(n->buffer.get());
  }
  void visit_allocate(const AllocateNode* n) override {
    auto it = n->attrs.find("init");
    if (it != n->attrs.end() && std::holds_alternative<Expr>(it->second) &&
        varying(std::get<Expr>(it->second)))
      mark(n->buffer.get());
    visit(n->body);
  }
  void visit_tile_op(const TileOpNode* n) override {
    // Tile operators spread their work over the threads; only a fill of a uniform value
    // leaves a per-thread buffer equal in every thread.
    bool uniform_fill = n->op == "fill" && !varying_control_ && !any_varying(n->args);
    std::vector<RegionUse> uses = region_uses(n);
    for (size_t i = 0; i < n->regions.size(); ++i) {
      const Buffer& b = n->regions[i].buffer;
      if (uses[i].write && b->is_local() && !uniform_fill) mark(b.get());
    }
  }

 private:
  std::unordered_set<const VarNode*> vars_;
  std::unordered_set<const BufferNode*> buffers_;
  int varying_control_ = 0;
  bool grew_ = false;
};

// True when s holds work spread over the block or a barrier: a loop of anything else is
// executed whole by every thread, so it is one unit.
bool has_cooperative_work(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_tile_op(const TileOpNode*) override { found = true; }
    void visit_for(const ForNode* n) override {
      if (n->for_kind == ForKind::Parallel) found = true;
      else IRVisitor::visit_for(n);
    }
    void visit_evaluate(const EvaluateNode* n) override {
      auto* call = as<CallNode>(n->value);
      if (is_barrier_call(call)) found = true;
    }
  } finder;
  finder.visit(s);
  return finder.found;
}

// ---------------------------------------------------------------- planning

class BarrierPlanner {
 public:
  BarrierPlanner(const PrimFunc& f, const KernelNode* k) {
    for (auto& v : shape_vars(*f)) analyzer_.bind(v.get(), ConstIntBound{1, ConstIntBound::kPosInf});
    for (size_t d = 0; d < k->block_vars.size() && d < k->grid.size(); ++d)
      analyzer_.bind(k->block_vars[d].get(), loop_var_bound(analyzer_, make_int(0), k->grid[d]));
    for (size_t d = 0; d < k->thread_vars.size() && d < k->threads.size(); ++d)
      analyzer_.bind(k->thread_vars[d].get(), 0, k->threads[d]);
    varying_.run(k);
    // The thread indices and the names given to them (`tn = T.get_thread_binding(0)`), with
    // their axis; the axes along which the block has more than one thread.
    for (size_t d = 0; d < k->thread_vars.size(); ++d) {
      thread_names_[k->thread_vars[d].get()] = int(d);
      if (d >= k->threads.size() || k->threads[d] > 1) thread_axes_.push_back(int(d));
    }
    struct Names : IRVisitor {
      std::unordered_map<const VarNode*, int>* names;
      using IRVisitor::visit;
      void visit_let(const LetStmtNode* n) override {
        auto* call = as<CallNode>(n->value);
        auto* var = as<VarNode>(n->value);
        const int64_t* axis = call && call->op == "thread_index" && !call->args.empty() ? const_int(call->args[0])
                                                                                          : nullptr;
        if (axis) (*names)[n->var.get()] = int(*axis);
        else if (var && names->count(var)) (*names)[n->var.get()] = names->at(var);
        IRVisitor::visit_let(n);
      }
    } names;
    names.names = &thread_names_;
    names.visit(k->body);
    // Buffers whose allocation says a software pipeline orders their accesses itself, and
    // the byte ranges the shared-memory plan gave the others.
    struct Allocations : IRVisitor {
      std::unordered_set<const BufferNode*>* pipelined;
      std::vector<std::tuple<const BufferNode*, int64_t, int64_t>> ranges;
      using IRVisitor::visit;
      void visit_allocate(const AllocateNode* n) override {
        if (n->attrs.count("pipelined")) pipelined->insert(n->buffer.get());
        auto it = n->attrs.find("offset");
        int64_t size = n->buffer->const_size();
        if (it != n->attrs.end() && std::holds_alternative<int64_t>(it->second) && size >= 0) {
          int64_t lo = std::get<int64_t>(it->second);
          ranges.emplace_back(n->buffer.get(), lo, lo + size * n->buffer->dtype.bytes());
        }
        IRVisitor::visit_allocate(n);
      }
    } a;
    a.pipelined = &self_synchronised_;
    a.visit(k->body);
    // Overlapping ranges join one storage (the first buffer of the group names it).
    std::unordered_map<const BufferNode*, const BufferNode*> parent;
    std::function<const BufferNode*(const BufferNode*)> root = [&](const BufferNode* b) {
      return parent[b] == b ? b : parent[b] = root(parent[b]);
    };
    for (auto& [b, lo, hi] : a.ranges) parent[b] = b;
    for (size_t i = 0; i < a.ranges.size(); ++i)
      for (size_t j = i + 1; j < a.ranges.size(); ++j) {
        auto& [bi, li, hi_i] = a.ranges[i];
        auto& [bj, lj, hj] = a.ranges[j];
        if (li < hj && lj < hi_i) parent[root(bj)] = root(bi);
      }
    for (auto& [b, lo, hi] : a.ranges) shared_bytes_[b] = root(b);
  }

  Stmt run(const Stmt& body) {
    AccessSet pending;
    return plan(body, pending);
  }

 private:
  // Where a barrier was placed: before a statement, or at the start or end of a loop's body.
  enum class Place { Before, StartOfBody, EndOfBody };
  using Event = std::pair<const StmtNode*, Place>;

  // Plans s given the accesses pending on entry; leaves those pending after s.
  Stmt plan(const Stmt& s, AccessSet& pending) {
    if (!s) return s;
    switch (s->kind) {
      case StmtKind::Seq: return plan_seq(s, static_cast<const SeqStmtNode*>(s.get()), pending);
      case StmtKind::For: return plan_for(s, static_cast<const ForNode*>(s.get()), pending);
      case StmtKind::While: return plan_while(s, static_cast<const WhileNode*>(s.get()), pending);
      case StmtKind::IfThenElse: return plan_if(s, static_cast<const IfThenElseNode*>(s.get()), pending);
      case StmtKind::LetStmt: return plan_let(s, static_cast<const LetStmtNode*>(s.get()), pending);
      case StmtKind::Allocate: return plan_allocate(s, static_cast<const AllocateNode*>(s.get()), pending);
      case StmtKind::Kernel: return s;  // kernels do not nest
      case StmtKind::Evaluate:
        if (is_barrier(s)) {
          pending.clear();
          return s;
        }
        return plan_unit(s, pending);
      default: return plan_unit(s, pending);
    }
  }

  // Adds accesses made at `at`; returns whether a barrier must precede them.
  bool touch(const AccessSet& accesses, const StmtNode* at, AccessSet& pending) {
    bool barrier = conflicts(accesses, pending);
    if (barrier) {
      events_.push_back({at, Place::Before});
      pending.clear();
    }
    merge(pending, accesses);
    return barrier;
  }

  AccessSet collect(const Stmt& s) {
    AccessCollector c(analyzer_, self_synchronised_, shared_bytes_, region_);
    c.visit(s);
    return std::move(c.accesses);
  }
  AccessSet collect(const std::vector<Expr>& exprs) {
    AccessCollector c(analyzer_, self_synchronised_, shared_bytes_, region_);
    for (auto& e : exprs) c.visit(e);
    return std::move(c.accesses);
  }

  Stmt with_barrier_before(bool barrier, const Stmt& s, Span span) {
    return barrier ? make_seq({make_barrier(span, region_), s}, span) : s;
  }

  Stmt plan_unit(const Stmt& s, AccessSet& pending) {
    return with_barrier_before(touch(collect(s), s.get(), pending), s, s->span);
  }

  Stmt plan_seq(const Stmt& s, const SeqStmtNode* n, AccessSet& pending) {
    std::vector<Stmt> out;
    bool changed = false;
    for (auto& c : n->seq) {
      out.push_back(plan(c, pending));
      changed = changed || out.back() != c;
    }
    return changed ? make_seq(std::move(out), n->span) : s;
  }

  Stmt plan_let(const Stmt& s, const LetStmtNode* n, AccessSet& pending) {
    bool barrier = touch(collect({n->value}), s.get(), pending);
    ScopedBind bind(analyzer_, n->var, analyzer_.const_int_bound(n->value));
    Stmt body = plan(n->body, pending);
    Stmt out = body == n->body ? s : std::make_shared<LetStmtNode>(n->var, n->value, body, n->span);
    return with_barrier_before(barrier, out, n->span);
  }

  Stmt plan_allocate(const Stmt& s, const AllocateNode* n, AccessSet& pending) {
    auto init = n->attrs.find("init");
    bool barrier = init != n->attrs.end() && std::holds_alternative<Expr>(init->second) &&
                   touch(collect({std::get<Expr>(init->second)}), s.get(), pending);
    Stmt body = plan(n->body, pending);
    Stmt out = body == n->body ? s : std::make_shared<AllocateNode>(n->buffer, body, n->attrs, n->span);
    return with_barrier_before(barrier, out, n->span);
  }

  // A trial run: the barriers s would get from this pending set, and the set left after.
  struct Trial {
    std::vector<Event> events;
    AccessSet after;
  };
  Trial trial(const Stmt& s, AccessSet pending) {
    size_t mark = events_.size();
    plan(s, pending);
    Trial t{std::vector<Event>(events_.begin() + static_cast<std::ptrdiff_t>(mark), events_.end()),
            std::move(pending)};
    events_.resize(mark);
    return t;
  }
  // Whether entering s with `pending` needs a barrier that entering with nothing does not.
  // (Accesses that only meet an existing barrier's conflicts change nothing.)
  bool entry_needs_barrier(const Stmt& s, const AccessSet& pending, const std::vector<Event>& clean) {
    return !pending.empty() && trial(s, pending).events != clean;
  }

  // Whether threads that run a loop body each on their own (thread-level code) can meet in a
  // tracked buffer inside it: the body reads what it writes, and not every access is the
  // thread's own (for each axis of the block's threads, one dimension indexed by the same
  // name of that thread index in all of them: then two threads never touch one element). Then
  // the body's statements are planned one by one, as upstream's thread storage sync does:
  // `for k: for t: S[t] = A[k, t]; for t: acc += S[t]` needs a barrier between the two
  // loops and at the end of the body, although each thread runs all of it.
  bool shares_between_threads(const Stmt& body) const {
    struct Uses : IRVisitor {
      const BarrierPlanner* self;
      std::unordered_map<const void*, std::vector<std::vector<Expr>>> indices;
      std::unordered_set<const void*> written, read;
      using IRVisitor::visit;
      const void* storage(const Buffer& b) const {
        auto it = self->shared_bytes_.find(b.get());
        return it != self->shared_bytes_.end() ? it->second : static_cast<const void*>(b.get());
      }
      void use(const Buffer& b, const std::vector<Expr>& idx, bool write) {
        if (!is_tracked(b) || self->self_synchronised_.count(b.get())) return;
        const void* key = storage(b);
        indices[key].push_back(idx);
        (write ? written : read).insert(key);
      }
      void visit_load(const BufferLoadNode* n) override {
        use(n->buffer, n->indices, false);
        IRVisitor::visit_load(n);
      }
      void visit_store(const BufferStoreNode* n) override {
        use(n->buffer, n->indices, true);
        IRVisitor::visit_store(n);
      }
      void visit_call(const CallNode* n) override {
        auto* target = n->args.empty() ? nullptr : as<BufferLoadNode>(n->args[0]);
        if (target && n->op.rfind("atomic_", 0) == 0) use(target->buffer, target->indices, true);
        IRVisitor::visit_call(n);
      }
    } uses;
    uses.self = this;
    uses.visit(body);
    // Loops inside the body count as one: `s[r * 16 + tx // 8]` in one loop over r and in
    // another over r_1 are the same elements of the same threads.
    std::unordered_map<const VarNode*, Expr> loop_vars;
    Var any_iteration = std::make_shared<VarNode>("iteration", DataType::Int(32));
    struct Loops : IRVisitor {
      std::unordered_map<const VarNode*, Expr>* vars;
      Expr to;
      using IRVisitor::visit;
      void visit_for(const ForNode* n) override {
        (*vars)[n->var.get()] = to;
        IRVisitor::visit_for(n);
      }
    } loops;
    loops.vars = &loop_vars;
    loops.to = any_iteration;
    loops.visit(body);
    // A T.loop_break (or T.continue_loop) may leave the loop (or skip the rest of an
    // iteration) in some threads only: no barrier inside then.
    bool breaks = false;
    for_each_expr(body, [&](const ExprNode* e) {
      auto* call = dynamic_cast<const CallNode*>(e);
      breaks = breaks || (call && (call->op == "loop_break" || call->op == "loop_continue"));
    });
    if (breaks) return false;
    for (const void* key : uses.written) {
      if (!uses.read.count(key)) continue;
      const auto& all = uses.indices.at(key);
      // Every access at one index that depends on the thread (`s[r * 16 + tx // 8] = v`,
      // then `if s[r * 16 + tx // 8]`): each thread reads what it wrote itself (as
      // upstream's thread storage sync takes it; threads that share an element write it
      // alike in such code).
      bool same = true;
      for (auto& idx : all) {
        same = same && idx.size() == all.front().size();
        for (size_t d = 0; same && d < idx.size(); ++d)
          same = structural_equal(substitute(idx[d], loop_vars), substitute(all.front()[d], loop_vars));
      }
      // (Only an axis with more than one thread tells threads apart: `x_s[tk, t]` with one
      // thread along tk is the same element for the whole block.)
      bool by_thread = false;
      auto varies = [&](int axis) {
        return std::find(thread_axes_.begin(), thread_axes_.end(), axis) != thread_axes_.end();
      };
      for (auto& i : all.front())
        for_each_expr(std::make_shared<EvaluateNode>(i, i->span), [&](const ExprNode* e) {
          auto* v = dynamic_cast<const VarNode*>(e);
          auto* c = dynamic_cast<const CallNode*>(e);
          auto name = v ? thread_names_.find(v) : thread_names_.end();
          const int64_t* axis = c && c->op == "thread_index" && !c->args.empty() ? const_int(c->args[0]) : nullptr;
          by_thread = by_thread || (name != thread_names_.end() && varies(name->second)) || (axis && varies(int(*axis)));
        });
      if (same && by_thread) continue;
      for (int axis : thread_axes_) {
        bool covered = false;
        for (size_t d = 0; !covered && d < all.front().size(); ++d) {
          auto* v = as<VarNode>(all.front()[d]);
          auto it = v ? thread_names_.find(v) : thread_names_.end();
          covered = it != thread_names_.end() && it->second == axis;
          for (auto& idx : all) covered = covered && d < idx.size() && as<VarNode>(idx[d]) == v;
        }
        if (!covered) return true;
      }
    }
    return false;
  }

  // Whether every iteration of loop n passes a barrier (one the plan `events` puts before a
  // statement the body always runs, or one the program wrote there), and the tail of each
  // iteration, with the loop variable written as c * j + r (c the least common multiple of
  // the constants it is taken modulo), meets the head of the next (c * j + r + 1) nowhere
  // for every r. Then only neighbouring iterations can meet, and the buffers a stage index
  // selects (`dS[i % 2]`) are apart: `dS[0]` written in one iteration and `dS[1]` read in
  // the one before need no barrier between them.
  bool stages_keep_apart(const ForNode* n, const std::vector<Event>& events) {
    // The moduli of the loop variable in the indices of shared buffers (a paged cache's
    // `pos % page_size` into a global tensor does not count).
    int64_t period = 1;
    bool too_long = false;
    auto moduli_in = [&](const Expr& index) {
      for_each_expr(std::make_shared<EvaluateNode>(index, index->span), [&](const ExprNode* e) {
        auto* b = dynamic_cast<const BinaryNode*>(e);
        if (!b || (b->op != BinaryOp::FloorMod && b->op != BinaryOp::Mod)) return;
        const int64_t* m = const_int(b->b);
        bool uses_var = false;
        for_each_expr(std::make_shared<EvaluateNode>(b->a, b->span),
                      [&](const ExprNode* x) { uses_var = uses_var || x == n->var.get(); });
        if (!m || *m < 2 || !uses_var) return;
        period = std::lcm(period, *m);
        too_long = too_long || period > 8;
      });
    };
    struct SharedIndices : IRVisitor {
      std::function<void(const Expr&)> f;
      using IRVisitor::visit;
      void visit_load(const BufferLoadNode* l) override {
        if (l->buffer->is_shared())
          for (auto& i : l->indices) f(i);
        IRVisitor::visit_load(l);
      }
      void visit_store(const BufferStoreNode* st) override {
        if (st->buffer->is_shared())
          for (auto& i : st->indices) f(i);
        IRVisitor::visit_store(st);
      }
      void visit_tile_op(const TileOpNode* op) override {
        for (auto& r : op->regions)
          if (r.buffer->is_shared())
            for (auto& rg : r.ranges) f(rg.min);
        IRVisitor::visit_tile_op(op);
      }
    } indices;
    indices.f = moduli_in;
    indices.visit(n->body);
    if (period < 2 || too_long) return false;
    // The statements every iteration runs: the body's sequence, through lets and allocations
    // and into the branches of a warp-specialised body (`if ws_role(r)`, each run by its role's
    // threads every iteration).
    std::unordered_set<const StmtNode*> always;
    std::vector<std::pair<Stmt, std::unordered_set<const StmtNode*>>> roles;  // a role's statements
    std::function<void(const Stmt&, std::unordered_set<const StmtNode*>&)> walk =
        [&](const Stmt& st, std::unordered_set<const StmtNode*>& into) {
          if (!st) return;
          into.insert(st.get());
          if (auto* seq = as<SeqStmtNode>(st))
            for (auto& c : seq->seq) walk(c, into);
          else if (auto* let = as<LetStmtNode>(st)) walk(let->body, into);
          else if (auto* alloc = as<AllocateNode>(st)) walk(alloc->body, into);
          else if (auto* branch = as<IfThenElseNode>(st); branch && !branch->else_case && &into == &always) {
            auto* role = as<CallNode>(branch->cond);
            if (role && role->op == "ws_role") {
              roles.push_back({st, {}});
              walk(branch->then_case, roles.back().second);
            }
          }
        };
    walk(n->body, always);
    // A barrier the plan puts before one of stmts, or one the program wrote among them.
    auto passes_barrier = [&](const std::unordered_set<const StmtNode*>& stmts) {
      for (auto& [at, place] : events)
        if (place == Place::Before && stmts.count(at)) return true;
      for (const StmtNode* st : stmts) {
        auto* ev = dynamic_cast<const EvaluateNode*>(st);
        if (ev && is_barrier_call(as<CallNode>(ev->value))) return true;
      }
      return false;
    };
    if (!passes_barrier(always)) {
      // A barrier of one role orders the others' accesses in nothing: they may only read
      // what no statement of the loop writes (a paged cache's block table).
      const std::pair<Stmt, std::unordered_set<const StmtNode*>>* with = nullptr;
      for (auto& r : roles)
        if (passes_barrier(r.second)) with = &r;
      if (!with) return false;
      AccessSet writes;
      for (auto& a : collect(n->body))
        if (a.write) writes.push_back(a);
      for (auto& r : roles) {
        if (&r == with) continue;
        for (auto& a : collect(r.first))
          if (a.write || conflicts(AccessSet{a}, writes)) return false;
      }
    }
    ConstIntBound range = analyzer_.const_int_bound(n->var);
    if (range.min == ConstIntBound::kNegInf || range.max == ConstIntBound::kPosInf) return false;
    Var j = std::make_shared<VarNode>(n->var->name + "_period", n->var->dtype);
    ScopedBind bind(analyzer_, j, ConstIntBound{arith::floordiv_int(range.min, period) - 1, arith::floordiv_int(range.max, period) + 1});
    auto iteration = [&](int64_t r) {
      Expr at = add(mul(j, arith::make_const(n->var->dtype, period)), arith::make_const(n->var->dtype, r));
      return simplify_stmt(substitute(n->body, {{n->var.get(), at}}), analyzer_);
    };
    for (int64_t r = 0; r < period; ++r) {
      Stmt prev = iteration(r), next = iteration(r + 1);
      AccessSet tail;
      for (auto& a : trial(prev, {}).after)
        if (a.threads.whole()) tail.push_back(a);
      if (entry_needs_barrier(next, tail, trial(next, {}).events)) return false;
    }
    return true;
  }

  Stmt plan_for(const Stmt& s, const ForNode* n, AccessSet& pending) {
    bool cooperative = n->for_kind == ForKind::Parallel || n->for_kind == ForKind::Vectorized;
    bool varying_bounds = varying_.varying(n->min) || varying_.varying(n->extent);
    if (cooperative || varying_bounds || (!has_cooperative_work(n->body) && !shares_between_threads(n->body)))
      return plan_unit(s, pending);

    // The bounds are read once, on entry, before the first iteration.
    AccessSet header = collect({n->min, n->extent});
    bool may_not_run = analyzer_.const_int_bound(n->extent).min < 1;
    ScopedBind bind(analyzer_, n->var, loop_var_bound(analyzer_, n->min, n->extent));

    // One iteration from a clean start; its tail meets the head of the next iteration.
    Trial clean = trial(n->body, {});
    // What a T.ws region leaves for its own next run, it orders itself (a barrier of its
    // threads at its start): only the whole block's accesses need one at the loop's end.
    AccessSet whole_block_after;
    for (auto& a : clean.after)
      if (a.threads.whole()) whole_block_after.push_back(a);
    bool carried = entry_needs_barrier(n->body, whole_block_after, clean.events);
    // Buffers indexed by the iteration's parity (dS[i % 2]) are another storage in the next
    // iteration: then what one iteration's tail leaves meets the next head nowhere.
    bool stages_apart = carried && stages_keep_apart(n, clean.events);
    carried = carried && !stages_apart;
    // Hazards from before the loop into its first iteration: one barrier, run once.
    bool barrier_before = conflicts(header, pending) || entry_needs_barrier(n->body, pending, clean.events);
    if (barrier_before) {
      events_.push_back({n, Place::Before});
      pending.clear();
    }
    merge(pending, header);
    // Only when the body writes what the bounds read: a barrier heads every iteration, and
    // then covers the loop-carried hazards too.
    bool barrier_at_start = !header.empty() && entry_needs_barrier(n->body, pending, clean.events);
    if (barrier_at_start) {
      events_.push_back({n, Place::StartOfBody});
      pending.clear();
      carried = false;
    }

    AccessSet on_entry = pending;
    if (!carried && !barrier_at_start && !stages_apart) merge(pending, clean.after);  // later iterations start so
    Stmt body = plan(n->body, pending);
    if (barrier_at_start) body = make_seq({make_barrier(n->span, region_), body}, n->span);
    if (carried) {
      events_.push_back({n, Place::EndOfBody});
      body = make_seq({body, make_barrier(n->span, region_)}, n->span);
      pending.clear();
    }
    if (may_not_run) merge(pending, on_entry);

    if (n->attrs.count("software_pipeline")) merge(pending, pipelined_buffers_of(n->body));
    Stmt loop = body == n->body ? s
                                : std::make_shared<ForNode>(n->var, n->min, n->extent, n->for_kind, body,
                                                            n->attrs, n->span);
    return with_barrier_before(barrier_before, loop, n->span);
  }

  // `while cond: body`, as a loop whose trip count is unknown (it may not run): the condition
  // is read before every iteration, hazards from one iteration's tail into the next head
  // (or into the condition) get a barrier at the end of the body. A condition that differs
  // between threads leaves the loop one unit, as a loop with thread-dependent bounds.
  Stmt plan_while(const Stmt& s, const WhileNode* n, AccessSet& pending) {
    if (varying_.varying(n->cond) || (!has_cooperative_work(n->body) && !shares_between_threads(n->body)))
      return plan_unit(s, pending);
    AccessSet header = collect({n->cond});
    Trial clean = trial(n->body, {});
    AccessSet whole_block_after;
    for (auto& a : clean.after)
      if (a.threads.whole()) whole_block_after.push_back(a);
    bool carried = entry_needs_barrier(n->body, whole_block_after, clean.events) || conflicts(header, clean.after);
    bool barrier_before = conflicts(header, pending) || entry_needs_barrier(n->body, pending, clean.events);
    if (barrier_before) {
      events_.push_back({n, Place::Before});
      pending.clear();
    }
    merge(pending, header);
    AccessSet on_entry = pending;
    if (!carried) merge(pending, clean.after);  // later iterations start so
    Stmt body = plan(n->body, pending);
    if (carried) {
      events_.push_back({n, Place::EndOfBody});
      body = make_seq({body, make_barrier(n->span, region_)}, n->span);
      pending.clear();
    }
    merge(pending, on_entry);  // it may not run
    Stmt loop = body == n->body ? s : std::make_shared<WhileNode>(n->cond, body, n->span);
    return with_barrier_before(barrier_before, loop, n->span);
  }

  // A software pipeline orders its own buffers inside the loop; after it, the loop counts as
  // a write of every one whose bytes other buffers share, so their next user waits.
  AccessSet pipelined_buffers_of(const Stmt& body) {
    AccessSet out;
    for_each_expr(body, [&](const ExprNode* e) {
      auto* l = dynamic_cast<const BufferLoadNode*>(e);
      if (!l || !self_synchronised_.count(l->buffer.get())) return;
      auto it = shared_bytes_.find(l->buffer.get());
      if (it != shared_bytes_.end()) merge(out, {Access{it->second, l->buffer.get(), true, {}}});
    });
    struct Regions : IRVisitor {
      std::vector<const BufferNode*> buffers;
      using IRVisitor::visit;
      void visit_tile_op(const TileOpNode* n) override {
        for (auto& r : n->regions) buffers.push_back(r.buffer.get());
      }
    } r;
    r.visit(body);
    for (auto* b : r.buffers) {
      auto it = shared_bytes_.find(b);
      if (self_synchronised_.count(b) && it != shared_bytes_.end()) merge(out, {Access{it->second, b, true, {}}});
    }
    return out;
  }

  Stmt plan_if(const Stmt& s, const IfThenElseNode* n, AccessSet& pending) {
    if (auto range = thread_range_of(n->cond); range && region_.whole()) return plan_region(s, n, *range, pending);
    if (varying_.varying(n->cond)) return plan_unit(s, pending);  // threads may disagree

    // The condition is read before either branch. A barrier both branches would need on
    // entry is placed once, before the if.
    AccessSet cond = collect({n->cond});
    bool barrier_before = conflicts(cond, pending);
    if (!barrier_before && n->else_case && !pending.empty()) {
      barrier_before = entry_needs_barrier(n->then_case, pending, trial(n->then_case, {}).events) &&
                       entry_needs_barrier(n->else_case, pending, trial(n->else_case, {}).events);
    }
    if (barrier_before) {
      events_.push_back({n, Place::Before});
      pending.clear();
    }
    merge(pending, cond);

    AccessSet else_pending = pending;
    Stmt then_case = plan(n->then_case, pending);
    Stmt else_case = n->else_case ? plan(n->else_case, else_pending) : nullptr;
    merge(pending, else_pending);

    Stmt out = then_case == n->then_case && else_case == n->else_case
                   ? s
                   : std::make_shared<IfThenElseNode>(n->cond, then_case, else_case, n->span);
    return with_barrier_before(barrier_before, out, n->span);
  }

  // `if thread_range(lo, hi)` (a T.ws region): what the whole block left pending that the
  // region touches takes a block barrier before it; inside, the region's own accesses are
  // planned with barriers of its threads; accesses of other regions are not its concern.
  Stmt plan_region(const Stmt& s, const IfThenElseNode* n, ThreadRange range, AccessSet& pending) {
    region_ = range;
    AccessSet inside = collect(n->then_case);
    AccessSet whole_block, own, others;
    for (auto& a : pending) (a.threads.whole() ? whole_block : a.threads == range ? own : others).push_back(a);
    bool barrier_before = conflicts(inside, whole_block);
    region_ = {};
    if (barrier_before) {
      events_.push_back({n, Place::Before});
      whole_block.clear();
      own.clear();
      others.clear();
    }
    region_ = range;
    Stmt then_case = plan(n->then_case, own);
    region_ = {};
    pending = whole_block;
    merge(pending, others);
    merge(pending, own);
    Stmt out = then_case == n->then_case ? s : std::make_shared<IfThenElseNode>(n->cond, then_case, nullptr, n->span);
    return with_barrier_before(barrier_before, out, n->span);
  }

  ThreadRange region_;  // the T.ws region being planned

  arith::Analyzer analyzer_;
  std::unordered_set<const BufferNode*> self_synchronised_;
  std::unordered_map<const BufferNode*, const void*> shared_bytes_;
  VaryingAnalysis varying_;
  std::unordered_map<const VarNode*, int> thread_names_;  // thread indices and lets bound to one: their axis
  std::vector<int> thread_axes_;  // the axes with more than one thread
  std::vector<Event> events_;  // barriers placed so far, in order (compared by trials)
};

class KernelBarriers : public IRMutator {
 public:
  explicit KernelBarriers(const PrimFunc& f) : func_(f) {}

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    Stmt body = BarrierPlanner(func_, n).run(n->body);
    if (body == n->body) return s;
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, n->threads, body, n->span, n->cluster);
  }

 private:
  const PrimFunc& func_;
};

}  // namespace

PrimFunc insert_barriers(const PrimFunc& f) {
  Stmt body = KernelBarriers(f).mutate(f->body);
  return body == f->body ? f : with_body(f, body);
}

}  // namespace tl
