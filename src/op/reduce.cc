// T.reduce_{sum,max,min,abssum,absmax}(src, dst, dim, clear): dst = reduction of src over
// dimension dim; with clear=False the result is combined with what dst holds.
#include <cmath>

#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"

namespace tl {
namespace {

enum class ReduceKind { Sum, Max, Min, AbsSum, AbsMax };

ReduceKind reduce_kind(const TileOpNode& op) {
  std::string type = attr_str(op, "type", "");
  if (type == "sum") return ReduceKind::Sum;
  if (type == "max") return ReduceKind::Max;
  if (type == "min") return ReduceKind::Min;
  if (type == "abssum") return ReduceKind::AbsSum;
  if (type == "absmax") return ReduceKind::AbsMax;
  fail(ErrorKind::Name, op.span, "T.reduce: unknown reduction type '" + type + "'",
       "use T.reduce_sum, T.reduce_max, T.reduce_min, T.reduce_abssum or T.reduce_absmax");
}

std::string op_name(const TileOpNode& op) { return "T.reduce_" + attr_str(op, "type", "?"); }

Expr identity(ReduceKind kind, DataType t, Span span) {
  switch (kind) {
    case ReduceKind::Max:
      return t.is_float() ? neg(infinity(t, span), span) : min_value(t, span);
    case ReduceKind::Min:
      return t.is_float() ? infinity(t, span) : max_value(t, span);
    default:
      return cast(t, make_int(0, DataType::Int(32), span), span);
  }
}

Expr combine(ReduceKind kind, const Expr& acc, const Expr& x, Span span) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::AbsSum:
      return add(acc, x, span);
    case ReduceKind::Max:
    case ReduceKind::AbsMax:
      return max(acc, x, span);
    case ReduceKind::Min:
      return min(acc, x, span);
  }
  return nullptr;
}

// The reduced dimension, checked against src's rank.
int reduce_dim(const TileOpNode& op) {
  const BufferRegion& src = op.regions[0];
  int64_t dim = attr_int(op, "dim", 0);
  int64_t rank = int64_t(src.ranges.size());
  if (dim < 0 || dim >= rank)
    fail(ErrorKind::Shape, op.span,
         op_name(op) + ": dim " + std::to_string(dim) + " out of range for " + src.buffer->name +
             " of rank " + std::to_string(rank),
         "dim must lie in [0, " + std::to_string(rank) + ") (negative dims count from the end)");
  return int(dim);
}

// Whether dst keeps the reduced dimension with extent 1 (else it drops it).
bool keeps_dim(const TileOpNode& op, int dim, arith::Analyzer& analyzer) {
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  std::vector<Expr> removed, kept;
  for (size_t d = 0; d < src.ranges.size(); ++d) {
    if (int(d) != dim) removed.push_back(src.ranges[d].extent);
    kept.push_back(int(d) == dim ? make_int(1) : src.ranges[d].extent);
  }
  auto dst_ext = region_extents(dst);
  auto equal_to = [&](const std::vector<Expr>& want) {
    if (want.size() != dst_ext.size()) return false;
    for (size_t d = 0; d < want.size(); ++d)
      if (!provably_equal(want[d], dst_ext[d], analyzer)) return false;
    return true;
  };
  if (equal_to(removed)) return false;
  if (equal_to(kept)) return true;
  fail(ErrorKind::Shape, op.span,
       op_name(op) + ": " + region_str(dst) + " (extents " + extents_str(dst_ext) +
           ") does not fit the reduction of " + region_str(src) + " (extents " +
           extents_str(region_extents(src)) + ") over dim " + std::to_string(dim) + ": expected extents " +
           extents_str(removed) + " or " + extents_str(kept),
       "the destination has the source's shape without the reduced dimension (or with it as 1)");
}

void check_reduce(const TileOpNode& op, arith::Analyzer& analyzer) {
  require_regions(op, 2, "T.reduce");
  reduce_kind(op);
  check_region(op_name(op), op.regions[0], op.span);
  check_region(op_name(op), op.regions[1], op.span);
  keeps_dim(op, reduce_dim(op), analyzer);
}

Stmt lower_reduce(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 2, "T.reduce");
  ReduceKind kind = reduce_kind(op);
  int dim = reduce_dim(op);
  bool keep = keeps_dim(op, dim, ctx.analyzer);
  bool clear = attr_int(op, "clear", 1) != 0;
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  arith::Analyzer& az = ctx.analyzer;

  // Loops over every src dim but the reduced one; the reduction loop innermost.
  std::vector<Expr> outer_ext;
  for (size_t d = 0; d < src.ranges.size(); ++d)
    if (int(d) != dim) outer_ext.push_back(src.ranges[d].extent);
  LoopNest outer(outer_ext, az, sp);
  LoopNest inner({src.ranges[dim].extent}, az, sp, "", {"r"});
  const Expr& r = inner.vars()[0];

  std::vector<Expr> src_idx, dst_idx;
  for (size_t d = 0, k = 0; d < src.ranges.size(); ++d) {
    if (int(d) == dim) {
      src_idx.push_back(add(src.ranges[d].min, r, sp));
      continue;
    }
    src_idx.push_back(add(src.ranges[d].min, outer.vars()[k++], sp));
  }
  for (size_t d = 0, k = 0; d < dst.ranges.size(); ++d) {
    bool reduced = keep && int(d) == dim;
    dst_idx.push_back(reduced ? dst.ranges[d].min : add(dst.ranges[d].min, outer.vars()[k++], sp));
  }

  Buffer acc = make_scalar_buffer(dst.buffer->name + "_red", t, sp);
  std::vector<Expr> at0 = {make_int(0, DataType::Int(32), sp)};
  Expr acc_val = make_load(acc, at0, sp);
  Expr x = cast(t, make_load(src.buffer, src_idx, sp), sp);
  if (kind == ReduceKind::AbsSum || kind == ReduceKind::AbsMax) x = call("abs", {x}, sp);
  Stmt init = std::make_shared<BufferStoreNode>(acc, identity(kind, t, sp), at0, sp);
  // An element past a tensor's end takes no part (a 0 would be wrong for max and min).
  Stmt step = guard(in_bounds(src, src_idx, az, sp),
                    std::make_shared<BufferStoreNode>(acc, combine(kind, acc_val, x, sp), at0, sp), sp);
  Expr result = clear ? acc_val : combine(kind, guarded_load(dst, dst_idx, az, sp), acc_val, sp);
  Stmt write = guarded_store(dst, result, dst_idx, az, sp);
  Stmt body = make_seq({init, inner.wrap(step, ForKind::Serial), write}, sp);
  return outer.wrap(std::make_shared<AllocateNode>(acc, body, Attrs{}, sp), ForKind::Parallel);
}

}  // namespace

const TileOpDef& reduce_op() {
  static const TileOpDef def{"reduce", check_reduce, lower_reduce};
  return def;
}

}  // namespace tl
