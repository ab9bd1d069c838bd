// T.copy(src, dst): element-wise dst = cast(dst.dtype, src) over two matching regions.
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/copy_tma.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

const char* const kOpName = "T.copy";

void check_copy(const TileOpNode& op, arith::Analyzer& analyzer) {
  require_regions(op, 2, kOpName);
  const BufferRegion& src = op.regions[0];
  const BufferRegion& dst = op.regions[1];
  check_region(kOpName, src, op.span);
  check_region(kOpName, dst, op.span);
  check_regions_match(kOpName, src, dst, analyzer, op.span);
}

// One parallel loop per matched extent, so the code generator can vectorise the innermost;
// reads past a global tensor's end give 0 and writes there are skipped.
Stmt lower_copy(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 2, kOpName);
  if (attr_int(op, "by_hand", 0))
    fail(ErrorKind::Unsupported, op.span, "T.tma_copy is not supported on target cpu: TMA needs sm_90a",
         "use T.copy");
  const BufferRegion& src = op.regions[0];
  const BufferRegion& dst = op.regions[1];
  LoopNest loops(matched_extents(src, dst), ctx.analyzer, op.span);
  auto src_indices = region_indices(src, loops.vars(), op.span);
  auto dst_indices = region_indices(dst, loops.vars(), op.span);
  Expr value = guarded_load(src, src_indices, ctx.analyzer, op.span);
  Stmt store = guarded_store(dst, value, dst_indices, ctx.analyzer, op.span);
  return loops.wrap(store, ForKind::Parallel);
}

// Vector loops `dst_shared[b + v] = src_global[b' + v]` become cp_async(&dst[b], &src[b'], bytes).
Stmt to_cp_async(const Stmt& s) {
  class ToCpAsync : public IRMutator {
   protected:
    Stmt mutate_for(const Stmt& st, const ForNode* n) override {
      auto* store = as<BufferStoreNode>(n->body);
      auto* load = store ? as<BufferLoadNode>(store->value) : nullptr;
      const int64_t* lanes = const_int(n->extent);
      if (n->for_kind != ForKind::Vectorized || !load || !lanes || !store->buffer->is_shared() ||
          !load->buffer->is_global())
        return IRMutator::mutate_for(st, n);
      int64_t bytes = *lanes * store->buffer->dtype.bytes();
      std::unordered_map<const VarNode*, Expr> first = {{n->var.get(), n->min}};
      Expr dst = substitute(Expr(std::make_shared<BufferLoadNode>(store->buffer->dtype, store->buffer, store->indices, store->span)), first);
      Expr src = substitute(Expr(std::make_shared<BufferLoadNode>(load->dtype, load->buffer, load->indices, load->span)), first);
      return std::make_shared<EvaluateNode>(
          std::make_shared<CallNode>(DataType::Void(), "cp_async", std::vector<Expr>{dst, src, make_int(bytes)}, n->span),
          n->span);
    }
  };
  return ToCpAsync().mutate(s);
}

// Fragment -> fragment between two spreads over the threads (upstream's split-KV combine
// copies row k of a [splits, rows] fragment into a [rows] one): every thread puts what it
// holds of the source into a shared copy, then takes what it holds of the destination
// from there. Reported as a slower path.
Stmt copy_between_layouts(const TileOpNode& op, const TilePartition& ls, ThreadContext& ctx) {
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  Span sp = op.span;
  int64_t bytes = src.buffer->dtype.bytes();
  for (auto& e : src.buffer->shape) bytes *= *const_int(e);
  // In the planned dynamic pool: a whole tile may be over the 48 KiB declared statically.
  Buffer shared = make_buffer(src.buffer->name + "_x", src.buffer->dtype, src.buffer->shape, "shared.dyn", sp);
  Stmt put = ctx.put_in_shared(src.buffer, ls, shared, sp);
  BufferRegion from{shared, src.ranges, src.span};
  Stmt take = ctx.over_points(kOpName, dst, matched_extents(from, dst), [&](const std::vector<Expr>& point) {
    Expr value = guarded_load(from, region_indices(from, point, sp), ctx.analyzer, sp);
    return guarded_store(dst, value, region_indices(dst, point, sp), ctx.analyzer, sp);
  }, sp);
  ctx.scratch.push_back(shared);
  if (ctx.report)
    ctx.report->push_back(sp.str() + ": " + std::string(kOpName) + " " + src.buffer->name + " -> " + dst.buffer->name +
                          " through shared memory (" + std::to_string(bytes) + " bytes) [slower path: the fragments "
                          "are spread over the threads differently (" + ls.str() + " and " +
                          ctx.layout_of(dst.buffer)->str() + ")]");
  Stmt sync = sync_threads(sp);
  return make_seq({sync, put, sync, take, sync}, sp);
}

// One thread's share: the elements it owns of the fragment side (the layout decides), or
// a default share of the tile when neither side is a fragment.
Stmt lower_copy_threads(const TileOpNode& op, ThreadContext& ctx) {
  require_regions(op, 2, kOpName);
  if (attr_int(op, "tma", 0)) return lower_copy_tma(op, ctx);
  // eviction_policy is a cache policy of TMA loads; other copies' loads take none.
  if (op.attrs.count("eviction_policy") && ctx.report)
    ctx.report->push_back(op.span.str() + ": T.copy " + op.regions[0].buffer->name + " -> " +
                          op.regions[1].buffer->name + ": eviction_policy has no effect (not a TMA load: " +
                          (ctx.target.kind == "cuda" ? why_not_tma_load(op, ctx.target) : "not sm_90a") +
                          "; the L2 policy is given to TMA loads only)");
  if (op.attrs.count("cluster_mask"))
    fail(ErrorKind::Unsupported, op.span,
         "T.copy_cluster(cluster_mask=...) is issued by the TMA pipeline of a T.Pipelined loop (num_stages >= 2), "
         "and this copy is not one of its producers",
         "put the copy in a T.Pipelined loop whose T.gemm reads the tile, or multicast by hand with "
         "T.tma_copy(..., cluster_mask=...) and your own barrier");
  if (ctx.layouts.tma_stores.count(&op)) return lower_copy_tma_store(op, ctx);
  if (attr_int(op, "tma_store", 0))
    fail(ErrorKind::Internal, op.span, "internal: T.tma_copy's store was not planned as a TMA store");
  const BufferRegion& src = op.regions[0];
  const BufferRegion& dst = op.regions[1];
  const TilePartition *ls = ctx.layout_of(src.buffer), *ld = ctx.layout_of(dst.buffer);
  if (ls && ld && !(*ls == *ld)) return copy_between_layouts(op, *ls, ctx);
  const BufferRegion& driver = ld ? dst : (ls ? src : dst);
  Stmt copy = ctx.over_points(kOpName, driver, matched_extents(src, dst), [&](const std::vector<Expr>& point) {
    auto src_indices = region_indices(src, point, op.span);
    auto dst_indices = region_indices(dst, point, op.span);
    Expr value = guarded_load(src, src_indices, ctx.analyzer, op.span);
    return guarded_store(dst, value, dst_indices, ctx.analyzer, op.span);
  }, op.span);
  copy = vectorize_copies(copy, ctx.analyzer);
  // In a software pipeline, global -> shared vectors go through cp.async (sm_80+): the
  // pipeline's wait and barrier complete them.
  if (attr_int(op, "async", 0) && src.buffer->is_global() && dst.buffer->is_shared()) copy = to_cp_async(copy);
  return copy;
}

}  // namespace

const TileOpDef& copy_op() {
  static const TileOpDef def{"copy", check_copy, lower_copy, lower_copy_threads};
  return def;
}

}  // namespace tl
