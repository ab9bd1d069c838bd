// T.cumsum(src, dst, dim, reverse): inclusive prefix sum of src along dim into dst; with the
// attribute kind "max", T.cummax: the running maximum.
#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

// The running maximum (T.cummax) instead of the sum.
bool is_max(const TileOpNode& op) { return attr_str(op, "kind", "sum") == "max"; }
std::string op_name(const TileOpNode& op) { return is_max(op) ? "T.cummax" : "T.cumsum"; }

// The scan's starting value and step.
Expr scan_start(const TileOpNode& op, DataType t, Span sp) {
  if (!is_max(op)) return cast(t, make_int(0, DataType::Int(32), sp), sp);
  return t.is_float() ? neg(infinity(t, sp), sp) : min_value(t, sp);
}
Expr scan_step(const TileOpNode& op, const Expr& acc, const Expr& x, Span sp) {
  return is_max(op) ? max(acc, x, sp) : add(acc, x, sp);
}

int cumsum_dim(const TileOpNode& op) {
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

void check_cumsum(const TileOpNode& op, arith::Analyzer& analyzer) {
  const std::string name = op_name(op);
  require_regions(op, 2, name);
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  check_region(name, src, op.span);
  check_region(name, dst, op.span);
  cumsum_dim(op);
  auto se = region_extents(src), de = region_extents(dst);
  bool same = se.size() == de.size();
  for (size_t d = 0; same && d < se.size(); ++d) same = provably_equal(se[d], de[d], analyzer);
  if (!same)
    fail(ErrorKind::Shape, op.span,
         name + ": " + region_str(dst) + " (extents " + extents_str(de) +
             ") must have the shape of " + region_str(src) + " (extents " + extents_str(se) + ")",
         "the scan keeps the source's shape; allocate the destination like the source");
}

// A running accumulator walks the scanned dimension, so src and dst may be one buffer:
// each element is read before its position is written.
Stmt lower_cumsum(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 2, op_name(op));
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  int dim = cumsum_dim(op);
  bool reverse = attr_int(op, "reverse", 0) != 0;
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  arith::Analyzer& az = ctx.analyzer;

  std::vector<Expr> outer_ext;
  for (size_t d = 0; d < src.ranges.size(); ++d)
    if (int(d) != dim) outer_ext.push_back(src.ranges[d].extent);
  LoopNest outer(outer_ext, az, sp);
  const Expr& n = src.ranges[dim].extent;
  LoopNest scan({n}, az, sp, "", {"s"});
  Expr pos = scan.vars()[0];
  if (reverse) pos = sub(sub(n, make_int(1, n->dtype, sp), sp), pos, sp);

  auto indices = [&](const BufferRegion& r) {
    std::vector<Expr> out;
    for (size_t d = 0, k = 0; d < r.ranges.size(); ++d)
      out.push_back(add(r.ranges[d].min, int(d) == dim ? pos : outer.vars()[k++], sp));
    return out;
  };
  auto src_idx = indices(src), dst_idx = indices(dst);

  Buffer acc = make_scalar_buffer(dst.buffer->name + "_sum", t, sp);
  std::vector<Expr> at0 = {make_int(0, DataType::Int(32), sp)};
  Expr acc_val = make_load(acc, at0, sp);
  Stmt init = std::make_shared<BufferStoreNode>(acc, scan_start(op, t, sp), at0, sp);
  Expr x = cast(t, guarded_load(src, src_idx, az, sp), sp);
  Stmt step = std::make_shared<BufferStoreNode>(acc, scan_step(op, acc_val, x, sp), at0, sp);
  Stmt write = guarded_store(dst, acc_val, dst_idx, az, sp);
  Stmt body = make_seq({init, scan.wrap(make_seq({step, write}, sp), ForKind::Serial)}, sp);
  return outer.wrap(std::make_shared<AllocateNode>(acc, body, Attrs{}, sp), ForKind::Parallel);
}

// On threads: each thread scans whole lines (the lines are spread over the threads). A
// line of a fragment runs across threads, so fragments are staged through shared memory.
Stmt lower_cumsum_threads(const TileOpNode& op, ThreadContext& ctx) {
  const std::string name = op_name(op);
  require_regions(op, 2, name);
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  int dim = cumsum_dim(op);
  bool reverse = attr_int(op, "reverse", 0) != 0;
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  Stmt sync = sync_threads(sp);
  std::vector<Stmt> before, after;
  auto copy_all = [&](const BufferRegion& from, const BufferRegion& to, const BufferRegion& driver) {
    return ctx.over_points(name, driver, squeezed_extents(from), [&](const std::vector<Expr>& pt) {
      return std::make_shared<BufferStoreNode>(to.buffer, make_load(from.buffer, region_indices(from, pt, sp), sp),
                                               region_indices(to, pt, sp), sp);
    }, sp);
  };
  auto stage = [&](const BufferRegion& r) {
    Buffer sh = make_buffer(r.buffer->name + "_scan", r.buffer->dtype, region_extents(r), scope::kShared, sp);
    ctx.scratch.push_back(sh);
    return full_region(sh, sp);
  };
  BufferRegion s = src, d = dst;
  if (ctx.layout_of(src.buffer)) {
    s = stage(src);
    before = {copy_all(src, s, src), sync};
  }
  if (ctx.layout_of(dst.buffer)) {
    d = (dst.buffer == src.buffer && ctx.layout_of(src.buffer)) ? s : stage(dst);
    // Lines are complete before they are spread back, and read before a later use of the
    // staging buffers overwrites them.
    after = {sync, copy_all(d, dst, dst), sync};
  }
  std::vector<int64_t> lines;
  for (size_t k = 0; k < s.ranges.size(); ++k) {
    if (int(k) == dim) continue;
    const int64_t* e = const_int(s.ranges[k].extent);
    if (!e) fail(ErrorKind::Unsupported, sp, name + " with symbolic extents on target " + ctx.target.kind);
    lines.push_back(*e);
  }
  const Expr& n = s.ranges[dim].extent;
  auto scan_line = [&](const std::vector<Expr>& line) -> Stmt {
    LoopNest scan({n}, ctx.analyzer, sp, "", {"s"});
    Expr pos = scan.vars()[0];
    if (reverse) pos = sub(sub(n, make_int(1, n->dtype, sp), sp), pos, sp);
    auto at = [&](const BufferRegion& r) {
      std::vector<Expr> idx;
      for (size_t k = 0, j = 0; k < r.ranges.size(); ++k)
        idx.push_back(add(r.ranges[k].min, int(k) == dim ? pos : line[j++], sp));
      return idx;
    };
    Buffer acc = make_scalar_buffer(dst.buffer->name + "_sum", t, sp);
    std::vector<Expr> at0 = {make_int(0)};
    Expr acc_val = make_load(acc, at0, sp);
    Stmt init = std::make_shared<BufferStoreNode>(acc, scan_start(op, t, sp), at0, sp);
    Expr x = cast(t, guarded_load(s, at(s), ctx.analyzer, sp), sp);
    Stmt step = std::make_shared<BufferStoreNode>(acc, scan_step(op, acc_val, x, sp), at0, sp);
    Stmt write = guarded_store(d, acc_val, at(d), ctx.analyzer, sp);
    return std::make_shared<AllocateNode>(acc, make_seq({init, scan.wrap(make_seq({step, write}, sp),
                                                                         ForKind::Serial)}, sp), Attrs{}, sp);
  };
  Stmt scans = lines.empty()
                   ? Stmt(std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, ctx.thread, make_int(0), sp),
                                                           scan_line({}), nullptr, sp))
                   : ctx.over_owned(TilePartition::grid(lines, ctx.num_threads, 16), scan_line, sp, "l");  // one line per step
  std::vector<Stmt> all = before;
  all.push_back(scans);
  all.insert(all.end(), after.begin(), after.end());
  return make_seq(all, sp);
}

}  // namespace

const TileOpDef& cumsum_op() {
  static const TileOpDef def{"cumsum", check_cumsum, lower_cumsum, lower_cumsum_threads};
  return def;
}

}  // namespace tl
