#include "transform/plan_shared_memory.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

constexpr int64_t kAlign = 128;
// Tiles start on 1 KiB: TMA and wgmma swizzle by the bits of the shared address, in atoms
// of 8 rows of up to 128 bytes, so a swizzled tile must start where an atom does. That
// holds for tiles of 1 KiB and more, and for smaller ones that may be swizzled (two or more
// dimensions, rows of 32 bytes or more): a 4 x 32 float32 tile at 1536 was stored by TMA
// with the swizzle of rows 4-7 while the threads had written it with that of rows 0-3.
constexpr int64_t kTileAlign = 1024;

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

int64_t alignment_of(const Buffer& b, int64_t bytes) {
  if (bytes >= kTileAlign) return kTileAlign;
  const int64_t* row = b->shape.size() >= 2 ? const_int(b->shape.back()) : nullptr;
  return row && *row * b->dtype.bytes() >= 32 ? kTileAlign : kAlign;
}

struct Lifetime {
  const AllocateNode* alloc = nullptr;
  int64_t bytes = 0;
  int64_t first = -1, last = -1;  // statement numbers, inclusive
};

// Numbers the statements of a kernel body in program order and records, for every
// shared.dyn buffer, the span of statements that use it.
class LifetimeCollector : public IRVisitor {
 public:
  std::unordered_map<const BufferNode*, Lifetime> lifetimes;
  std::vector<const BufferNode*> order;  // allocation order
  using IRVisitor::visit;

  void visit_allocate(const AllocateNode* n) override {
    const Buffer& b = n->buffer;
    if (b->scope == scope::kSharedDyn && b->const_size() >= 0 && !lifetimes.count(b.get())) {
      lifetimes[b.get()] = {n, b->const_size() * b->dtype.bytes()};
      order.push_back(b.get());
      if (b->data) by_data_[b->data.get()] = b.get();
    }
    IRVisitor::visit_allocate(n);
  }
  void visit_for(const ForNode* n) override {
    in_loop([&] { IRVisitor::visit_for(n); });
  }
  void visit_while(const WhileNode* n) override {
    in_loop([&] { IRVisitor::visit_while(n); });
  }
  template <typename F>
  void in_loop(F visit_loop) {
    if (loop_depth_++ == 0) loop_start_ = counter_;
    visit_loop();
    if (--loop_depth_ == 0) {
      // Everything used in this outermost loop lives for all of it.
      for (auto* b : used_in_loop_) touch_span(b, loop_start_, counter_);
      used_in_loop_.clear();
    }
  }
  void visit_evaluate(const EvaluateNode* n) override {
    ++counter_;
    IRVisitor::visit_evaluate(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    ++counter_;
    note(n->buffer);
    IRVisitor::visit_store(n);
  }
  void visit_tile_op(const TileOpNode* n) override {
    ++counter_;
    if (n->op != "annotate_layout")  // a request about storage, not a use
      for (auto& r : n->regions) note(r.buffer);
    IRVisitor::visit_tile_op(n);
  }
  void visit_load(const BufferLoadNode* n) override {
    note(n->buffer);
    IRVisitor::visit_load(n);
  }
  void visit_if(const IfThenElseNode* n) override {
    auto* c = as<CallNode>(n->cond);
    if (!c || c->op != "thread_range") return IRVisitor::visit_if(n);
    // T.ws regions run at the same time, not one after the other: what any of them uses
    // lives from the first region to the last (finish()).
    if (regions_first_ < 0) regions_first_ = counter_;
    ++region_depth_;
    IRVisitor::visit_if(n);
    --region_depth_;
    regions_last_ = counter_;
  }
  void visit_call(const CallNode* n) override {
    // An mbarrier keeps its bytes for the whole kernel: arrivals land asynchronously
    // (copies completing), after the last statement that names it may have run.
    if (n->op.rfind("mbarrier_", 0) == 0 || n->op == "cp_async_barrier_noinc")
      for (auto& a : n->args)
        if (auto* l = as<BufferLoadNode>(a); l && l->buffer->is_shared()) pinned_.push_back(l->buffer.get());
    IRVisitor::visit_call(n);
  }
  // Call once, after visiting the kernel body.
  void finish() {
    for (auto* b : used_in_region_) touch_span(b, regions_first_, regions_last_);
    for (auto* b : pinned_)
      if (lifetimes.count(b)) touch_span(b, 0, counter_);
  }

 private:
  // A use through a T.reshape / T.view is a use of the allocation it is over.
  void note(const Buffer& use) {
    const BufferNode* b = use.get();
    if (!lifetimes.count(b)) {
      auto it = use->data ? by_data_.find(use->data.get()) : by_data_.end();
      if (it == by_data_.end()) return;
      b = it->second;
    }
    if (loop_depth_ > 0) used_in_loop_.push_back(b);
    if (region_depth_ > 0) used_in_region_.push_back(b);
    touch_span(b, counter_, counter_);
  }
  void touch_span(const BufferNode* b, int64_t from, int64_t to) {
    Lifetime& l = lifetimes[b];
    l.first = l.first < 0 ? from : std::min(l.first, from);
    l.last = std::max(l.last, to);
  }

  int64_t counter_ = 0, loop_start_ = 0;
  int loop_depth_ = 0;
  std::vector<const BufferNode*> used_in_loop_;
  int region_depth_ = 0;
  int64_t regions_first_ = -1, regions_last_ = -1;
  std::vector<const BufferNode*> used_in_region_, pinned_;
  std::unordered_map<const VarNode*, const BufferNode*> by_data_;
};

std::unordered_map<const AllocateNode*, int64_t> place(const LifetimeCollector& c) {
  std::vector<const Lifetime*> items;
  for (auto* b : c.order) items.push_back(&c.lifetimes.at(b));
  std::stable_sort(items.begin(), items.end(), [](const Lifetime* a, const Lifetime* b) { return a->bytes > b->bytes; });
  struct Placed {
    const Lifetime* l;
    int64_t offset;
  };
  std::vector<Placed> placed;
  std::unordered_map<const AllocateNode*, int64_t> offsets;
  for (const Lifetime* l : items) {
    // Unused buffers (first < 0) still get room of their own.
    auto alive_together = [&](const Lifetime* o) {
      return l->first < 0 || o->first < 0 || !(l->last < o->first || o->last < l->first);
    };
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (auto& p : placed)
      if (alive_together(p.l)) taken.push_back({p.offset, p.offset + p.l->bytes});
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0, align = alignment_of(l->alloc->buffer, l->bytes);
    for (auto& [lo, hi] : taken)
      if (offset + l->bytes > lo && offset < hi) offset = round_up(hi, align);
    placed.push_back({l, offset});
    offsets[l->alloc] = offset;
  }
  return offsets;
}

class SetOffsets : public IRMutator {
 public:
  explicit SetOffsets(std::unordered_map<const AllocateNode*, int64_t> offsets) : offsets_(std::move(offsets)) {}

 protected:
  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    Stmt body = mutate(n->body);
    auto it = offsets_.find(n);
    if (it == offsets_.end()) return body == n->body ? s : std::make_shared<AllocateNode>(n->buffer, body, n->attrs, n->span);
    Attrs attrs = n->attrs;
    attrs["offset"] = it->second;
    return std::make_shared<AllocateNode>(n->buffer, body, attrs, n->span);
  }

 private:
  std::unordered_map<const AllocateNode*, int64_t> offsets_;
};

class PlanKernels : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    LifetimeCollector c;
    c.visit(n->body);
    c.finish();
    if (c.order.empty()) return s;
    auto offsets = place(c);
    int64_t planned = 0, separate = 0;
    for (auto& [b, l] : c.lifetimes) {
      planned = std::max(planned, offsets.at(l.alloc) + l.bytes);
      separate += round_up(l.bytes, kAlign);
    }
    if (planned < separate)
      report.push_back(n->span.str() + ": shared memory " + std::to_string(planned) + " bytes (" +
                       std::to_string(separate) + " without reuse of dead buffers' bytes)");
    Stmt body = SetOffsets(std::move(offsets)).mutate(n->body);
    return std::make_shared<KernelNode>(n->block_vars, n->grid, n->thread_vars, n->threads, body, n->span, n->cluster);
  }
};

}  // namespace

int64_t shared_buffer_bytes(const Buffer& b, Span span) {
  int64_t n = b->const_size();
  if (n < 0)
    fail(ErrorKind::Unsupported, span,
         "shared buffer '" + b->name + "' has a symbolic size, which target cuda does not support",
         "give shared tiles constant shapes (tile sizes are compile-time values)");
  return n * b->dtype.bytes();
}

SharedMemoryUse shared_memory_use(const KernelNode* k) {
  SharedMemoryUse use;
  std::vector<const AllocateNode*> unplaced;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (auto& x : as<SeqStmtNode>(s)->seq) walk(x);
        return;
      case StmtKind::For:
        return walk(as<ForNode>(s)->body);
      case StmtKind::While:
        return walk(as<WhileNode>(s)->body);
      case StmtKind::IfThenElse:
        walk(as<IfThenElseNode>(s)->then_case);
        return walk(as<IfThenElseNode>(s)->else_case);
      case StmtKind::LetStmt:
        return walk(as<LetStmtNode>(s)->body);
      case StmtKind::Allocate: {
        auto* a = as<AllocateNode>(s);
        const Buffer& b = a->buffer;
        if (b->scope == scope::kSharedDyn) {
          int64_t bytes = shared_buffer_bytes(b, a->span);
          use.buffers.push_back({a, bytes, false});
          auto it = a->attrs.find("offset");
          std::optional<int64_t> offset;
          if (it != a->attrs.end()) {
            if (auto* i = std::get_if<int64_t>(&it->second)) offset = *i;
            if (auto* e = std::get_if<Expr>(&it->second); e && const_int(*e)) offset = *const_int(*e);
            if (!offset || *offset < 0)
              fail(ErrorKind::Internal, a->span, "internal: shared buffer '" + b->name + "' has a bad offset",
                   "plan_shared_memory gives each shared.dyn allocation a constant byte offset");
          }
          if (offset) {
            use.dyn_offsets[a] = *offset;
            use.dyn_bytes = std::max(use.dyn_bytes, *offset + bytes);
          } else {
            unplaced.push_back(a);
          }
        } else if (b->scope == scope::kShared) {
          int64_t bytes = shared_buffer_bytes(b, a->span);
          use.buffers.push_back({a, bytes, true});
          use.static_bytes += round_up(bytes, 16);
        }
        return walk(a->body);
      }
      default:
        return;
    }
  };
  walk(k->body);
  int64_t end = round_up(use.dyn_bytes, kAlign);
  for (auto* a : unplaced) {
    use.dyn_offsets[a] = end;
    end = round_up(end + shared_buffer_bytes(a->buffer, a->span), kAlign);
    use.dyn_bytes = end;
  }
  return use;
}

PrimFunc plan_shared_memory(const PrimFunc& f) {
  PlanKernels pass;
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
