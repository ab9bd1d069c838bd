// Tile form of T.atomic_add / T.atomic_max / T.atomic_min(dst, src): for every element of
// two matching regions, atomic_op(dst[...], src[...]). The load in the call names the address.
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/copy_tma.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

std::string op_name(const TileOpNode& op) { return "T." + op.op; }

// Marks an innermost unrolled loop of 2 or 4 lanes that is exactly `atomic_add(dst[... base
// + v], value)` (unguarded, dst's last dimension contiguous) as Vectorized.
class VectorLanes : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    Stmt m = IRMutator::mutate_for(s, n);
    auto* f = as<ForNode>(m);
    const int64_t *lanes = const_int(f->extent), *lo = const_int(f->min);
    auto* ev = as<EvaluateNode>(f->body);
    auto* call = ev ? as<CallNode>(ev->value) : nullptr;
    auto* dst = call && call->args.size() == 2 ? as<BufferLoadNode>(call->args[0]) : nullptr;
    if (f->for_kind != ForKind::Unrolled || !lanes || (*lanes != 2 && *lanes != 4) || !lo || *lo != 0 || !dst ||
        dst->indices.empty())
      return m;
    auto strides = dst->buffer->effective_strides();
    if (!const_int(strides.back()) || *const_int(strides.back()) != 1) return m;
    const VarNode* v = f->var.get();
    for (size_t d = 0; d + 1 < dst->indices.size(); ++d)
      if (uses_var(dst->indices[d], v)) return m;
    Expr step = analyzer_.simplify(sub(substitute(dst->indices.back(), {{v, make_int(1)}}),
                                       substitute(dst->indices.back(), {{v, make_int(0)}})));
    if (!const_int(step) || *const_int(step) != 1) return m;
    return std::make_shared<ForNode>(f->var, f->min, f->extent, ForKind::Vectorized, f->body, f->attrs, f->span);
  }

 private:
  static bool uses_var(const Expr& e, const VarNode* v) {
    bool found = false;
    for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) { found = found || n == v; });
    return found;
  }
  arith::Analyzer analyzer_;
};

// The element update: op(dst element, value), with the tile's memory order (attribute
// memory_order, 0 relaxed .. 5 seq_cst) as a third argument when it is not relaxed.
Expr atomic_call(const TileOpNode& op, Expr element, Expr value) {
  std::vector<Expr> args{std::move(element), std::move(value)};
  if (int64_t order = attr_int(op, "memory_order", 0)) args.push_back(make_int(order));
  return std::make_shared<CallNode>(DataType::Void(), op.op, std::move(args), op.span);
}

void check_atomic(const TileOpNode& op, arith::Analyzer& analyzer) {
  require_regions(op, 2, op_name(op));
  const BufferRegion &dst = op.regions[0], &src = op.regions[1];
  check_region(op_name(op), dst, op.span);
  check_region(op_name(op), src, op.span);
  check_regions_match(op_name(op), dst, src, analyzer, op.span);
}

Stmt lower_atomic(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 2, op_name(op));
  const BufferRegion &dst = op.regions[0], &src = op.regions[1];
  Span sp = op.span;
  LoopNest loops(matched_extents(dst, src), ctx.analyzer, sp);
  auto dst_idx = region_indices(dst, loops.vars(), sp);
  auto src_idx = region_indices(src, loops.vars(), sp);
  Expr value = cast(dst.buffer->dtype, guarded_load(src, src_idx, ctx.analyzer, sp), sp);
  Expr call = atomic_call(op, make_load(dst.buffer, dst_idx, sp), value);
  Stmt update =
      guard(in_bounds(dst, dst_idx, ctx.analyzer, sp), std::make_shared<EvaluateNode>(call, sp), sp);
  return loops.wrap(update, ForKind::Parallel);
}

Stmt lower_atomic_threads(const TileOpNode& op, ThreadContext& ctx) {
  require_regions(op, 2, op_name(op));
  const BufferRegion &dst = op.regions[0], &src = op.regions[1];
  Span sp = op.span;
  // use_tma=True: one TMA reduction of the shared tile where layout inference could plan
  // it (sm_90a), else an atomic per element, reported with the reason.
  if (ctx.layouts.tma_stores.count(&op)) return lower_copy_tma_store(op, ctx);
  if (attr_int(op, "use_tma", 0) && ctx.report && ctx.target.kind == "cuda") {
    std::string why = why_not_tma_store(op, ctx.target);
    if (why.empty()) why = src.buffer->name + " is stored in a layout the TMA reduction cannot read (a T.gemm operand, "
                           "a layout given by hand, or another TMA copy's swizzle)";
    ctx.report->push_back(sp.str() + ": " + op_name(op) + " into " + dst.buffer->name + " by an atomic per element "
                          "[slower path: use_tma=True asks for one TMA reduction, but " + why + "]");
  }
  const BufferRegion& driver = ctx.layout_of(src.buffer) ? src : dst;
  Stmt updates = ctx.over_points(op_name(op), driver, matched_extents(dst, src), [&](const std::vector<Expr>& point) {
    auto dst_idx = region_indices(dst, point, sp);
    auto src_idx = region_indices(src, point, sp);
    Expr value = cast(dst.buffer->dtype, guarded_load(src, src_idx, ctx.analyzer, sp), sp);
    Expr call = atomic_call(op, make_load(dst.buffer, dst_idx, sp), value);
    return guard(in_bounds(dst, dst_idx, ctx.analyzer, sp), std::make_shared<EvaluateNode>(call, sp), sp);
  }, sp);
  // On CUDA a thread's 2 or 4 consecutive elements of the destination (an accumulator's
  // column pairs) are one vector atomic where the back end has one (codegen_cuda.cc).
  return op.op == "atomic_add" && ctx.target.kind == "cuda" ? VectorLanes().mutate(updates) : updates;
}

}  // namespace

const TileOpDef& atomic_add_op() {
  static const TileOpDef def{"atomic_add", check_atomic, lower_atomic, lower_atomic_threads};
  return def;
}
const TileOpDef& atomic_max_op() {
  static const TileOpDef def{"atomic_max", check_atomic, lower_atomic, lower_atomic_threads};
  return def;
}
const TileOpDef& atomic_min_op() {
  static const TileOpDef def{"atomic_min", check_atomic, lower_atomic, lower_atomic_threads};
  return def;
}

}  // namespace tl
