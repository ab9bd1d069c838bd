// T.fill(dst, value) / T.clear(dst): every element of the region set to cast(dst.dtype, value).
#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

const char* const kOpName = "T.fill";

void check_fill(const TileOpNode& op, arith::Analyzer&) {
  require_regions(op, 1, kOpName);
  if (op.args.size() != 1)
    fail(ErrorKind::Internal, op.span,
         std::string(kOpName) + " expects one value, got " + std::to_string(op.args.size()));
  const Expr& value = op.args[0];
  if (value->dtype.is_handle() || value->dtype.is_void())
    fail(ErrorKind::Type, op.span,
         std::string(kOpName) + ": the fill value for " + op.regions[0].buffer->name +
             " must be a number, got " +
             (value->dtype.is_void() ? "a call without a value" : "a buffer or string"),
         "pass a scalar, e.g. T.fill(" + op.regions[0].buffer->name + ", 0)");
  check_region(kOpName, op.regions[0], op.span);
}

Stmt lower_fill(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 1, kOpName);
  const BufferRegion& dst = op.regions[0];
  Expr value = cast(dst.buffer->dtype, op.args.at(0), op.span);
  LoopNest loops(squeezed_extents(dst), ctx.analyzer, op.span);
  auto indices = region_indices(dst, loops.vars(), op.span);
  return loops.wrap(guarded_store(dst, value, indices, ctx.analyzer, op.span), ForKind::Parallel);
}

Stmt lower_fill_threads(const TileOpNode& op, ThreadContext& ctx) {
  require_regions(op, 1, kOpName);
  const BufferRegion& dst = op.regions[0];
  Expr value = cast(dst.buffer->dtype, op.args.at(0), op.span);
  return ctx.over_points(kOpName, dst, squeezed_extents(dst), [&](const std::vector<Expr>& point) {
    return guarded_store(dst, value, region_indices(dst, point, op.span), ctx.analyzer, op.span);
  }, op.span);
}

}  // namespace

const TileOpDef& fill_op() {
  static const TileOpDef def{"fill", check_fill, lower_fill, lower_fill_threads};
  return def;
}

}  // namespace tl
