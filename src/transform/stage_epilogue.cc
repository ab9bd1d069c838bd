#include "transform/stage_epilogue.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"
#include "ir/op.h"
#include "op/copy_tma.h"
#include "op/region.h"
#include "transform/pass.h"

namespace tl {
namespace {

int64_t shared_bytes(const Buffer& b) {
  int64_t n = b->const_size();
  return n < 0 ? -1 : n * b->dtype.bytes();
}

std::unordered_set<const BufferNode*> buffers_used(const Stmt& s) {
  std::unordered_set<const BufferNode*> out;
  struct V : IRVisitor {
    std::unordered_set<const BufferNode*>* out;
    using IRVisitor::visit;
    void visit_buffer(const Buffer& b) override { out->insert(b.get()); }
  } v;
  v.out = &out;
  v.visit(s);
  return out;
}

class Stage : public IRMutator {
 public:
  explicit Stage(const Target& target) : target_(target) {}
  std::vector<std::string> report;

 protected:
  Stmt mutate_kernel(const Stmt& s, const KernelNode* n) override {
    pipelined_.clear();
    // Shared memory the kernel could still take: the limit less every shared buffer's bytes
    // as if none shared any (an upper bound of the plan).
    int64_t used = 0;
    struct Sum : IRVisitor {
      int64_t* used;
      using IRVisitor::visit;
      void visit_allocate(const AllocateNode* a) override {
        if (a->buffer->is_shared()) *used += std::max<int64_t>(shared_bytes(a->buffer), 0) + 128;  // + alignment
        IRVisitor::visit_allocate(a);
      }
    } sum;
    sum.used = &used;
    sum.visit(n->body);
    headroom_ = target_.max_shared_bytes - used;
    return IRMutator::mutate_kernel(s, n);
  }
  Stmt mutate_allocate(const Stmt& s, const AllocateNode* n) override {
    // Multi-buffered tiles of a software pipeline: dead once their loop is over.
    if (n->buffer->is_shared() && n->attrs.count("stages")) pipelined_.push_back(n->buffer);
    return IRMutator::mutate_allocate(s, n);
  }
  // The kernel's top-level sequence (through allocations and lets), where a copy runs once
  // after the statements before it, and serial loops (a persistent kernel's tile loop),
  // where the pipeline's tiles are used again and the staging tile needs bytes of its own.
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Serial) return s;
    ++loops_;
    Stmt out = IRMutator::mutate_for(s, n);
    --loops_;
    return out;
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode*) override { return s; }

  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    std::vector<Stmt> out(n->seq.begin(), n->seq.end());
    bool changed = false;
    for (size_t i = 0; i < out.size(); ++i) {
      if (as<AllocateNode>(out[i]) || as<LetStmtNode>(out[i]) || as<ForNode>(out[i])) {
        Stmt m = mutate(out[i]);
        changed = changed || m != out[i];
        out[i] = m;
        continue;
      }
      auto* op = as<TileOpNode>(out[i]);
      if (!op || op->op != "copy" || op->regions.size() != 2 || !op->regions[0].buffer->is_fragment() ||
          !op->regions[1].buffer->is_global())
        continue;
      // The pipeline's tiles no statement after this one uses are free bytes.
      std::unordered_set<const BufferNode*> later;
      for (size_t j = i + 1; j < out.size(); ++j)
        for (auto* b : buffers_used(out[j])) later.insert(b);
      int64_t free_bytes = 0;
      for (auto& b : pipelined_)
        if (!later.count(b.get()) && shared_bytes(b) > 0) free_bytes += shared_bytes(b);
      // Inside a loop the pipeline's tiles are never free: the staging tile takes bytes of
      // its own; after the pipeline it takes theirs, and more where the kernel has room.
      bool own_bytes = loops_ > 0;
      Stmt staged = stage(*op, own_bytes ? 0 : free_bytes, own_bytes);
      if (staged) {
        out[i] = staged;
        changed = true;
      }
    }
    return changed ? make_seq(out, n->span) : s;
  }

 private:
  // copy(F, G[...]) -> allocate T; copy(F, T); copy(T, G[...]), when the tile fits the free
  // bytes and its store can be a TMA store; else null.
  Stmt stage(const TileOpNode& op, int64_t pipeline_free, bool own_bytes) {
    const BufferRegion &src = op.regions[0], &dst = op.regions[1];
    std::vector<Expr> shape;
    for (auto& r : dst.ranges) {
      const int64_t* e = const_int(r.extent);
      if (!e) return nullptr;
      if (*e != 1) shape.push_back(r.extent);
    }
    if (shape.size() != 2 || src.buffer->shape.size() != 2) return nullptr;
    for (size_t d = 0; d < 2; ++d) {
      const int64_t *mn = const_int(src.ranges[d].min), *e = const_int(src.ranges[d].extent),
                    *full = const_int(src.buffer->shape[d]);
      if (!mn || *mn != 0 || !e || !full || *e != *full || *e != *const_int(shape[d])) return nullptr;
    }
    Buffer tile = make_buffer(src.buffer->name + "_staged", dst.buffer->dtype, shape, scope::kSharedDyn, op.span);
    auto store = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{full_region(tile, op.span), dst},
                                              std::vector<Expr>{}, Attrs{}, op.span);
    if (!why_not_tma_store(*store, target_).empty()) return nullptr;
    // The tile takes the pipeline's dead bytes when they hold it, else bytes of its own.
    int64_t bytes = shared_bytes(tile), free_bytes = std::max<int64_t>(pipeline_free, headroom_);
    if (bytes > free_bytes) {
      // The program could have had it with fewer pipeline stages or a smaller tile.
      report.push_back(op.span.str() + ": T.copy " + src.buffer->name + " -> " + dst.buffer->name +
                       " stored from registers [slower path: not through a shared tile and a TMA store: its " +
                       std::to_string(bytes) + " bytes do not fit the " +
                       std::to_string(std::max<int64_t>(free_bytes, 0)) + " bytes of shared memory " +
                       (own_bytes ? "the kernel leaves free (fewer pipeline stages would make room)"
                                  : "the pipeline's tiles or the kernel leave free") +
                       "]");
      return nullptr;
    }
    auto fill = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{src, full_region(tile, op.span)},
                                             std::vector<Expr>{}, op.attrs, op.span);
    if (bytes > pipeline_free) headroom_ -= bytes + 128;
    report.push_back(op.span.str() + ": T.copy " + src.buffer->name + " -> " + dst.buffer->name + " through a shared tile " +
                     (bytes <= pipeline_free ? "in the pipeline's free bytes (" : "of its own (") + std::to_string(bytes) +
                     " bytes), then by TMA store");
    return std::make_shared<AllocateNode>(tile, make_seq({fill, store}, op.span), Attrs{}, op.span);
  }

  const Target& target_;
  std::vector<Buffer> pipelined_;  // the kernel's multi-buffered shared tiles seen so far
  int64_t headroom_ = 0;           // shared bytes the kernel leaves under the target's limit
  int loops_ = 0;                  // serial loops around the statement
};

}  // namespace

PrimFunc stage_epilogue(const PrimFunc& f, const Target& target) {
  if (target.kind != "cuda" || target.arch_number() != 90 || target.disable_tma) return f;
  Stage pass(target);
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
