// T.reduce_{sum,max,min,abssum,absmax,bitand,bitor,bitxor}(src, dst, dim, clear): dst = reduction of src over
// dimension dim; with clear=False the result is combined with what dst holds.
// T.finalize_reducer(reducer, dst): the partials of a reducer (T.alloc_reducer) combined.
#include <algorithm>
#include <cmath>
#include <functional>

#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

enum class ReduceKind { Sum, Max, Min, AbsSum, AbsMax, BitAnd, BitOr, BitXor };

ReduceKind reduce_kind(const TileOpNode& op) {
  std::string type = attr_str(op, "type", "");
  if (type == "sum") return ReduceKind::Sum;
  if (type == "max") return ReduceKind::Max;
  if (type == "min") return ReduceKind::Min;
  if (type == "abssum") return ReduceKind::AbsSum;
  if (type == "absmax") return ReduceKind::AbsMax;
  if (type == "bitand") return ReduceKind::BitAnd;
  if (type == "bitor") return ReduceKind::BitOr;
  if (type == "bitxor") return ReduceKind::BitXor;
  fail(ErrorKind::Name, op.span, "T.reduce: unknown reduction type '" + type + "'",
       "use T.reduce_sum, T.reduce_max, T.reduce_min, T.reduce_abssum, T.reduce_absmax, T.reduce_bitand, "
       "T.reduce_bitor or T.reduce_bitxor");
}

std::string op_name(const TileOpNode& op) { return "T.reduce_" + attr_str(op, "type", "?"); }

Expr identity(ReduceKind kind, DataType t, Span span) {
  switch (kind) {
    case ReduceKind::Max:
      return t.is_float() ? neg(infinity(t, span), span) : min_value(t, span);
    case ReduceKind::Min:
      return t.is_float() ? infinity(t, span) : max_value(t, span);
    case ReduceKind::BitAnd:  // every bit set
      return cast(t, make_int(-1, DataType::Int(32), span), span);
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
    case ReduceKind::BitAnd:
      return binary(BinaryOp::BitAnd, acc, x, span);
    case ReduceKind::BitOr:
      return binary(BinaryOp::BitOr, acc, x, span);
    case ReduceKind::BitXor:
      return binary(BinaryOp::BitXor, acc, x, span);
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
  ReduceKind kind = reduce_kind(op);
  if (kind == ReduceKind::BitAnd || kind == ReduceKind::BitOr || kind == ReduceKind::BitXor)
    for (const BufferRegion& r : op.regions)
      if (!(r.buffer->dtype.is_int() || r.buffer->dtype.is_uint() || r.buffer->dtype.is_bool()))
        fail(ErrorKind::Type, op.span, op_name(op) + " needs integer (or bool) buffers; " + r.buffer->name + " is " +
                                           r.buffer->dtype.str());
  check_region(op_name(op), op.regions[0], op.span);
  check_region(op_name(op), op.regions[1], op.span);
  keeps_dim(op, reduce_dim(op), analyzer);
}

// What a reduction does, as both lowerings read it: type, dimension, whether dst keeps
// that dimension (extent 1), and whether dst is cleared first.
struct ReduceOptions {
  ReduceKind kind;
  int dim;
  bool keep;
  bool clear;
};
ReduceOptions reduce_options(const TileOpNode& op, arith::Analyzer& analyzer) {
  require_regions(op, 2, "T.reduce");
  int dim = reduce_dim(op);
  return {reduce_kind(op), dim, keeps_dim(op, dim, analyzer), attr_int(op, "clear", 1) != 0};
}

Stmt lower_reduce(const TileOpNode& op, LowerContext& ctx) {
  auto [kind, dim, keep, clear] = reduce_options(op, ctx.analyzer);
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

// A whole rank-1 fragment reduced to one value every thread holds: each thread folds its
// elements, lanes combine by shuffles, warps through shared memory.
Stmt reduce_whole_tile(const TileOpNode& op, ReduceKind kind, bool clear, const TilePartition& layout,
                       ThreadContext& ctx) {
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  int64_t threads = ctx.num_threads, warp = ctx.shuffle_width();
  if (threads > warp && threads % warp != 0)
    fail(ErrorKind::Unsupported, sp,
         op_name(op) + " of a whole tile needs a multiple of " + std::to_string(warp) + " threads on target " +
             ctx.target.kind + ", the kernel has " + std::to_string(threads),
         "launch the kernel with threads=32, 64, 96, 128, ...");
  auto c = [](int64_t v) { return make_int(v); };
  Buffer acc = make_scalar_buffer(dst.buffer->name + "_red", t, sp);
  std::vector<Expr> at0 = {c(0)};
  Expr acc_val = make_load(acc, at0, sp);
  auto set_acc = [&](Expr v) -> Stmt { return std::make_shared<BufferStoreNode>(acc, v, at0, sp); };
  auto element = [&](const std::vector<Expr>& idx) {
    Expr x = cast(t, make_load(src.buffer, idx, sp), sp);
    return (kind == ReduceKind::AbsSum || kind == ReduceKind::AbsMax) ? call("abs", {x}, sp) : x;
  };
  std::vector<Stmt> steps = {set_acc(identity(kind, t, sp))};
  Stmt fold = ctx.over_owned(layout, [&](const std::vector<Expr>& idx) {
    return set_acc(combine(kind, acc_val, element(idx), sp));
  }, sp, "r");
  // A sum (or xor) counts each element once: of a replicated tile, only the threads that hold
  // the first copy of their elements add them (a maximum, and, or takes every copy alike).
  bool counts_copies = kind == ReduceKind::Sum || kind == ReduceKind::AbsSum || kind == ReduceKind::BitXor;
  if (counts_copies && layout.replicas() > 1)
    if (Expr first = layout.first_replica(ctx.thread, sp)) fold = std::make_shared<IfThenElseNode>(first, fold, nullptr, sp);
  steps.push_back(fold);
  // Lanes of a warp by shuffles, warps (or, without shuffles, threads) through shared memory.
  int64_t width = std::min(threads, warp);
  for (int64_t m = width / 2; m >= 1; m /= 2) {
    Expr other = std::make_shared<CallNode>(t, "shfl_xor", std::vector<Expr>{acc_val, c(m), c(warp)}, sp);
    steps.push_back(set_acc(combine(kind, acc_val, other, sp)));
  }
  Stmt sync = sync_threads(sp);
  if (threads > warp) {
    int64_t warps = threads / warp;
    Buffer partial = make_buffer(dst.buffer->name + "_warps", t, {c(warps)}, "shared", sp);
    ctx.scratch.push_back(partial);
    Expr lane = floormod(ctx.thread, c(warp), sp), warp_id = floordiv(ctx.thread, c(warp), sp);
    Stmt put = std::make_shared<BufferStoreNode>(partial, acc_val, std::vector<Expr>{warp_id}, sp);
    steps.push_back(warp > 1 ? Stmt(std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, lane, c(0), sp), put,
                                                                     nullptr, sp))
                             : put);
    steps.push_back(sync);
    steps.push_back(set_acc(identity(kind, t, sp)));
    Var w = make_var("rw", DataType::Int(32), sp);
    steps.push_back(std::make_shared<ForNode>(w, c(0), c(warps), ForKind::Unrolled,
                                              set_acc(combine(kind, acc_val, make_load(partial, {w}, sp), sp)),
                                              Attrs{}, sp));
    steps.push_back(sync);  // the partials are read before a later reduction overwrites them
  }
  std::vector<Expr> dst_idx(dst.buffer->shape.size(), c(0));
  Expr result = clear ? acc_val : combine(kind, make_load(dst.buffer, dst_idx, sp), acc_val, sp);
  steps.push_back(std::make_shared<BufferStoreNode>(dst.buffer, result, dst_idx, sp));
  (void)src;
  return std::make_shared<AllocateNode>(acc, make_seq(steps, sp), Attrs{}, sp);
}

// On threads: the reduced tile is a 2-D fragment (rows x cols, see layout/tile_partition.h)
// and one of its axes is reduced. For each value of the kept axis a thread owns, it folds
// the elements it holds along the reduced axis; then the threads that share the kept value
// combine: those inside a warp by butterfly shuffles (every one of them ends up with the
// result, so dst is replicated over them), those in different warps through shared memory.
// Any other dimension (the middle one of a 3-D fragment: upstream's conv puzzle reduces
// temp[i, kl, f] over kl): every thread puts the elements it holds into a shared copy of
// the tile, and each thread folds, for each destination element it holds, the line along
// the reduced dimension from there. Reported as a slower path.
Stmt reduce_through_shared(const TileOpNode& op, ReduceKind kind, int dim, bool keep, bool clear,
                           const TilePartition& layout, const TilePartition& dst_layout, ThreadContext& ctx) {
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  std::vector<Expr> shape;
  int64_t bytes = src.buffer->dtype.bytes();
  for (auto& e : src.buffer->shape) {
    shape.push_back(e);
    bytes *= *const_int(e);
  }
  // In the planned dynamic pool: a whole tile may be over the 48 KiB a kernel declares statically.
  Buffer copy = make_buffer(src.buffer->name + "_all", src.buffer->dtype, shape, "shared.dyn", sp);
  Stmt put = ctx.put_in_shared(src.buffer, layout, copy, sp);
  const int64_t extent = *const_int(src.buffer->shape[size_t(dim)]);
  Buffer acc = make_scalar_buffer(dst.buffer->name + "_red", t, sp);
  std::vector<Expr> at0 = {make_int(0)};
  Stmt fold = ctx.over_owned(dst_layout, [&](const std::vector<Expr>& didx) -> Stmt {
    std::vector<Expr> sidx;
    size_t k = 0;
    Var r = make_var("rr", DataType::Int(32), sp);
    for (int d = 0; d < int(shape.size()); ++d) {
      if (d == dim) {
        sidx.push_back(r);
        if (keep) ++k;
      } else {
        sidx.push_back(didx.at(k++));
      }
    }
    Expr x = cast(t, make_load(copy, sidx, sp), sp);
    if (kind == ReduceKind::AbsSum || kind == ReduceKind::AbsMax) x = call("abs", {x}, sp);
    Expr acc_val = make_load(acc, at0, sp);
    Stmt loop = std::make_shared<ForNode>(r, make_int(0), make_int(extent), ForKind::Serial,
                                          std::make_shared<BufferStoreNode>(acc, combine(kind, acc_val, x, sp), at0, sp),
                                          Attrs{}, sp);
    Expr result = clear ? acc_val : combine(kind, make_load(dst.buffer, didx, sp), acc_val, sp);
    Stmt body = make_seq({std::make_shared<BufferStoreNode>(acc, identity(kind, t, sp), at0, sp), loop,
                          std::make_shared<BufferStoreNode>(dst.buffer, result, didx, sp)}, sp);
    return std::make_shared<AllocateNode>(acc, body, Attrs{}, sp);
  }, sp, dst.buffer->name + "_q");
  ctx.scratch.push_back(copy);
  if (ctx.report)
    ctx.report->push_back(sp.str() + ": " + op_name(op) + " of " + src.buffer->name + " over dim " +
                          std::to_string(dim) + " through shared memory (" + std::to_string(bytes) +
                          " bytes) [slower path: registers and shuffles reduce a fragment over its last dimension "
                          "(or the first of a 2-D one); lay the reduced dimension out last]");
  Stmt sync = sync_threads(sp);
  return make_seq({sync, put, sync, fold, sync}, sp);
}

Stmt lower_reduce_threads(const TileOpNode& op, ThreadContext& ctx) {
  auto [kind, dim, keep, clear] = reduce_options(op, ctx.analyzer);
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  DataType t = dst.buffer->dtype;
  Span sp = op.span;
  const TilePartition* layout = ctx.layout_of(src.buffer);
  int rank = int(src.ranges.size());
  bool last = dim == rank - 1;
  const TilePartition* dst_layout = ctx.layout_of(dst.buffer);
  if (layout && rank == 1 && dst_layout && dst_layout->kind() == TilePartition::Kind::Broadcast)
    return reduce_whole_tile(op, kind, clear, *layout, ctx);
  if (layout && !dst_layout)
    fail(ErrorKind::Unsupported, sp,
         op_name(op) + " on target " + ctx.target.kind + " writes its result to a fragment; the destination " +
             region_str(dst) + " is in scope " + dst.buffer->scope,
         "reduce into a T.alloc_fragment buffer, then T.copy it where it is needed");
  if (layout && layout->replicas() != 1)
    fail(ErrorKind::Unsupported, sp,
         op_name(op) + " on target " + ctx.target.kind + " reduces a fragment each element of which one thread "
             "holds; " + src.buffer->name + " is held in " + std::to_string(layout->replicas()) + " copies (" +
             layout->str() + ")",
         "give its T.Fragment all of the block's threads, or reduce a copy made through shared memory "
         "(T.copy into a shared tile, then into a fragment of the compiler's choosing)");
  if (layout && dst_layout && !(layout->is_2d() && (last || (dim == 0 && rank == 2))))
    return reduce_through_shared(op, kind, dim, keep, clear, *layout, *dst_layout, ctx);
  if (!layout || !dst_layout || !layout->is_2d() || !(last || (dim == 0 && rank == 2)))
    fail(ErrorKind::Unsupported, sp,
         op_name(op) + " on target " + ctx.target.kind + " reduces fragments of rank >= 2 over their last "
             "dimension (or the first of a 2-D one); got " + region_str(src) + " in scope " + src.buffer->scope +
             " over dim " + std::to_string(dim),
         "allocate the source and destination with T.alloc_fragment");
  const TilePartition& p = *layout;
  const int red = last ? 1 : 0, kept = 1 - red;
  const TilePartition::Axis &kept_axis = p.axes()[kept], &red_axis = p.axes()[red];
  Expr tid = ctx.thread;
  auto c = [](int64_t v) { return make_int(v); };
  auto both = [&](Expr a, Expr b) { return a ? (b ? land(a, b, sp) : a) : b; };
  auto element = [&](const std::vector<Expr>& idx) {
    Expr x = cast(t, make_load(src.buffer, idx, sp), sp);
    return (kind == ReduceKind::AbsSum || kind == ReduceKind::AbsMax) ? call("abs", {x}, sp) : x;
  };
  auto finish = [&](const std::vector<Expr>& dst_idx, const Expr& total) -> Stmt {
    Expr result = clear ? total : combine(kind, make_load(dst.buffer, dst_idx, sp), total, sp);
    return std::make_shared<BufferStoreNode>(dst.buffer, result, dst_idx, sp);
  };
  // Loops over the local digits of an axis (unrolled); body gets the axis value and the
  // condition that it is inside the tile.
  std::function<Stmt(const TilePartition::Axis&, size_t, Expr, int64_t, const std::string&,
                     const std::function<Stmt(const Expr&, const Expr&)>&)>
      over_axis = [&](const TilePartition::Axis& axis, size_t k, Expr value, int64_t place, const std::string& pre,
                      const std::function<Stmt(const Expr&, const Expr&)>& body) -> Stmt {
    if (k == axis.digits.size()) {
      int64_t span_all = 1;
      for (auto& d : axis.digits) span_all *= d.extent;
      return body(value, span_all > axis.extent ? lt(value, c(axis.extent), sp) : nullptr);
    }
    const TilePartition::Digit& d = axis.digits[k];
    int64_t next_place = place / d.extent;
    auto with = [&](const Expr& dv) {
      return over_axis(axis, k + 1, add(value, next_place == 1 ? dv : mul(dv, c(next_place), sp), sp), next_place,
                       pre, body);
    };
    if (d.on_thread) return with(TilePartition::digit_of_thread(d, tid, p.threads(), sp));
    if (d.extent == 1) return with(c(0));
    Var v = make_var(pre + d.name, DataType::Int(32), sp);
    ctx.analyzer.bind(v.get(), 0, d.extent);
    Stmt b = with(v);
    ctx.analyzer.unbind(v.get());
    return std::make_shared<ForNode>(v, c(0), c(d.extent), ForKind::Unrolled, b, Attrs{}, sp);
  };
  auto axis_span = [](const TilePartition::Axis& a) {
    int64_t s = 1;
    for (auto& d : a.digits) s *= d.extent;
    return s;
  };
  auto source_index = [&](const Expr& kept_value, const Expr& red_value) {
    std::vector<Expr> values(2);
    values[kept] = kept_value;
    values[red] = red_value;
    return p.logical_index(values, sp);
  };
  auto dst_index = [&](const Expr& kept_value) {
    std::vector<Expr> idx;
    if (last) {
      std::vector<Expr> full = source_index(kept_value, c(0));
      idx.assign(full.begin(), full.end() - 1);
      if (keep) idx.push_back(c(0));
    } else {
      idx = keep ? std::vector<Expr>{c(0), kept_value} : std::vector<Expr>{kept_value};
    }
    return idx;
  };
  // The reduced axis's thread digits: power-of-two lanes of one warp combine by shuffles,
  // the rest (other warps) through shared memory.
  std::vector<int64_t> shuffle_masks;
  const int64_t warp = ctx.shuffle_width();
  std::vector<TilePartition::Digit> across;
  Expr shuffle_leader;  // the lanes whose shuffle digits are 0
  for (auto& d : red_axis.digits) {
    if (!d.on_thread || d.extent == 1) continue;
    bool pow2 = (d.extent & (d.extent - 1)) == 0 && (d.stride & (d.stride - 1)) == 0;
    int64_t inner = pow2 && d.stride < warp ? std::min(d.extent, warp / d.stride) : 1;
    if (inner > 1) {
      for (int64_t m = d.stride * inner / 2; m >= d.stride; m /= 2) shuffle_masks.push_back(m);
      TilePartition::Digit lanes{d.name, inner, true, d.stride};
      shuffle_leader = both(shuffle_leader,
                            binary(BinaryOp::EQ, TilePartition::digit_of_thread(lanes, tid, p.threads(), sp), c(0), sp));
    }
    if (d.extent / inner > 1) across.push_back({d.name, d.extent / inner, true, d.stride * inner});
  }
  Buffer acc = make_scalar_buffer(dst.buffer->name + "_red", t, sp);
  std::vector<Expr> at0 = {c(0)};
  Expr acc_val = make_load(acc, at0, sp);
  auto set_acc = [&](Expr v) -> Stmt { return std::make_shared<BufferStoreNode>(acc, v, at0, sp); };
  int64_t n_across = 1;
  for (auto& d : across) n_across *= d.extent;
  Expr across_index = c(0);
  for (auto& d : across)
    across_index = add(mul(across_index, c(d.extent), sp), TilePartition::digit_of_thread(d, tid, p.threads(), sp), sp);
  Buffer partial = make_buffer(dst.buffer->name + "_partial", t, {c(n_across), c(axis_span(kept_axis))}, "shared", sp);

  Stmt fold = over_axis(kept_axis, 0, c(0), axis_span(kept_axis), "rk_", [&](const Expr& kv, const Expr& kept_ok) {
    Stmt elements = over_axis(red_axis, 0, c(0), axis_span(red_axis), "rr_", [&](const Expr& rv, const Expr& red_ok) {
      return guard(both(kept_ok, red_ok), set_acc(combine(kind, acc_val, element(source_index(kv, rv)), sp)), sp);
    });
    std::vector<Stmt> steps = {set_acc(identity(kind, t, sp)), elements};
    // Every lane takes part in the shuffles, also those whose kept value is past the end.
    for (int64_t m : shuffle_masks) {
      Expr other = std::make_shared<CallNode>(t, "shfl_xor", std::vector<Expr>{acc_val, c(m), c(warp)}, sp);
      steps.push_back(set_acc(combine(kind, acc_val, other, sp)));
    }
    if (across.empty()) {
      steps.push_back(guard(kept_ok, finish(dst_index(kv), acc_val), sp));
    } else {
      Stmt put = std::make_shared<BufferStoreNode>(partial, acc_val, std::vector<Expr>{across_index, kv}, sp);
      steps.push_back(guard(shuffle_leader, put, sp));
    }
    return std::make_shared<AllocateNode>(acc, make_seq(steps, sp), Attrs{}, sp);
  });
  if (across.empty()) return fold;
  Stmt gather = over_axis(kept_axis, 0, c(0), axis_span(kept_axis), "rk_", [&](const Expr& kv, const Expr& kept_ok) {
    Var q = make_var("rq", DataType::Int(32), sp);
    Stmt sum = std::make_shared<ForNode>(q, c(0), c(n_across), ForKind::Unrolled,
                                         set_acc(combine(kind, acc_val, make_load(partial, {q, kv}, sp), sp)), Attrs{},
                                         sp);
    Stmt body = make_seq({set_acc(identity(kind, t, sp)), sum, guard(kept_ok, finish(dst_index(kv), acc_val), sp)}, sp);
    return std::make_shared<AllocateNode>(acc, body, Attrs{}, sp);
  });
  ctx.scratch.push_back(partial);
  Stmt sync = sync_threads(sp);
  // The second barrier keeps a later reduction (the next loop iteration) from overwriting
  // partial results still being read.
  return make_seq({fold, sync, gather, sync}, sp);
}


// ---------------------------------------------------------------- T.finalize_reducer
// A reducer (T.alloc_reducer) is a per-thread array of partial results: each thread folds
// in the contributions of the T.Parallel iterations it runs (T.reducer_update, a store the
// copies of a replicated iteration make once: transform/lower_to_threads.cc). Finalizing
// combines, for every element, the block's partials and the starting value T.reducer_init
// gave (regions[2], a scalar, when there is one) into dst: a fragment of the reducer's
// shape, or the reducer itself (upstream's in-place form), every thread then holding every
// total. Regions: reducer, dst[, init]; attribute "type": sum, max, min, bitand, bitor, bitxor.

std::string finalize_name() { return "T.finalize_reducer"; }

void check_finalize(const TileOpNode& op, arith::Analyzer& analyzer) {
  if (op.regions.size() != 2 && op.regions.size() != 3) require_regions(op, 2, finalize_name());
  const Buffer &acc = op.regions[0].buffer, &dst = op.regions[1].buffer;
  ReduceKind kind = reduce_kind(op);
  if (kind == ReduceKind::AbsSum || kind == ReduceKind::AbsMax)
    fail(ErrorKind::Type, op.span, finalize_name() + ": a reducer combines by sum, max, min, bitand, bitor or bitxor");
  if (acc->scope != scope::kLocal || acc->const_size() < 0)
    fail(ErrorKind::Type, op.span, finalize_name() + ": '" + acc->name + "' is not a reducer (scope " + acc->scope + ")",
         "allocate it with T.alloc_reducer(shape, dtype, op)");
  if (dst != acc) {
    if (!dst->is_fragment())
      fail(ErrorKind::Type, op.span, finalize_name() + ": the destination '" + dst->name + "' is in scope " +
                                         dst->scope + "; it must be a fragment",
           "allocate it with T.alloc_fragment(shape, dtype) of the reducer's shape and dtype");
    check_regions_match(finalize_name(), op.regions[0], op.regions[1], analyzer, op.span);
    if (dst->dtype != acc->dtype)
      fail(ErrorKind::Type, op.span, finalize_name() + ": the destination '" + dst->name + "' is " + dst->dtype.str() +
                                         ", the reducer '" + acc->name + "' " + acc->dtype.str(),
           "give both the same dtype");
  }
}

// The element of a buffer of constant shape at flat (row-major) index e.
std::vector<Expr> unflatten(const Buffer& b, const Expr& e, Span sp) {
  std::vector<Expr> idx(b->shape.size());
  Expr rest = e;
  for (size_t d = b->shape.size(); d-- > 0;) {
    idx[d] = d ? floormod(rest, b->shape[d], sp) : rest;
    rest = floordiv(rest, b->shape[d], sp);
  }
  return idx;
}

Expr with_init(const TileOpNode& op, ReduceKind kind, Expr total, Span sp) {
  if (op.regions.size() < 3) return total;
  const Buffer& init = op.regions[2].buffer;
  return combine(kind, total, cast(total->dtype, make_load(init, {make_int(0)}, sp), sp), sp);
}

// The CPU: a block is one program, so its one set of partials holds the totals.
Stmt lower_finalize(const TileOpNode& op, LowerContext& ctx) {
  ReduceKind kind = reduce_kind(op);
  const Buffer &acc = op.regions[0].buffer, &dst = op.regions[1].buffer;
  Span sp = op.span;
  LoopNest nest(acc->shape, ctx.analyzer, sp, "e");
  Expr total = with_init(op, kind, make_load(acc, nest.vars(), sp), sp);
  return nest.wrap(std::make_shared<BufferStoreNode>(dst, total, nest.vars(), sp), ForKind::Serial);
}

// Threads: each element's partials combine inside a warp by butterfly shuffles, then
// across warps (or, without shuffles, threads) in shared memory; one pair of barriers for
// all the elements.
Stmt lower_finalize_threads(const TileOpNode& op, ThreadContext& ctx) {
  ReduceKind kind = reduce_kind(op);
  const Buffer &acc = op.regions[0].buffer, &dst = op.regions[1].buffer;
  DataType t = acc->dtype;
  Span sp = op.span;
  auto c = [](int64_t v) { return make_int(v); };
  const int64_t n = acc->const_size(), threads = ctx.num_threads, warp = std::min(ctx.shuffle_width(), threads);
  if (threads % warp != 0)
    fail(ErrorKind::Unsupported, sp,
         finalize_name() + " needs a multiple of " + std::to_string(warp) + " threads on target " + ctx.target.kind +
             ", the kernel has " + std::to_string(threads),
         "launch the kernel with threads=32, 64, 96, 128, ...");
  const int64_t groups = threads / warp;
  Buffer partial = make_buffer(acc->name + "_groups", t, {c(groups * n)}, "shared", sp);
  ctx.scratch.push_back(partial);
  Expr lane = floormod(ctx.thread, c(warp), sp), group = floordiv(ctx.thread, c(warp), sp);
  // Fold each element across the warp; its first lane puts the warp's value in shared memory.
  Var e = make_var("re", DataType::Int(32), sp);
  ctx.analyzer.bind(e.get(), 0, n);
  Buffer val = make_scalar_buffer(acc->name + "_lane", t, sp);
  std::vector<Expr> at0 = {c(0)};
  Expr v = make_load(val, at0, sp);
  std::vector<Stmt> per_element = {std::make_shared<BufferStoreNode>(val, make_load(acc, unflatten(acc, e, sp), sp), at0, sp)};
  for (int64_t m = warp / 2; m >= 1; m /= 2) {
    Expr other = std::make_shared<CallNode>(t, "shfl_xor", std::vector<Expr>{v, c(m), c(ctx.shuffle_width())}, sp);
    per_element.push_back(std::make_shared<BufferStoreNode>(val, combine(kind, v, other, sp), at0, sp));
  }
  Stmt put = std::make_shared<BufferStoreNode>(partial, v, std::vector<Expr>{add(mul(group, c(n), sp), e, sp)}, sp);
  per_element.push_back(warp > 1 ? Stmt(std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, lane, c(0), sp), put,
                                                                         nullptr, sp))
                                 : put);
  ctx.analyzer.unbind(e.get());
  // (Unrolled: the per-thread array's index must be a constant to stay in registers.)
  Stmt fold = std::make_shared<ForNode>(e, c(0), c(n), ForKind::Unrolled,
                                        std::make_shared<AllocateNode>(val, make_seq(per_element, sp), Attrs{}, sp),
                                        Attrs{}, sp);
  // The total of flat element `f`: the groups' values in order, then the starting value.
  auto total_of = [&](const Expr& f) {
    Expr total = identity(kind, t, sp);
    for (int64_t g = 0; g < groups; ++g) total = combine(kind, total, make_load(partial, {add(c(g * n), f, sp)}, sp), sp);
    return with_init(op, kind, total, sp);
  };
  Stmt write;
  if (dst == acc) {
    Var f = make_var("rf", DataType::Int(32), sp);
    write = std::make_shared<ForNode>(f, c(0), c(n), ForKind::Unrolled,
                                      std::make_shared<BufferStoreNode>(acc, total_of(f), unflatten(acc, f, sp), sp),
                                      Attrs{}, sp);
  } else {
    const TilePartition* layout = ctx.layout_of(dst);
    if (!layout)
      fail(ErrorKind::Internal, sp, "internal: " + finalize_name() + ": the fragment '" + dst->name + "' has no layout");
    write = ctx.over_owned(*layout, [&](const std::vector<Expr>& idx) -> Stmt {
      Expr f = c(0);
      for (size_t d = 0; d < idx.size(); ++d) f = add(mul(f, dst->shape[d], sp), idx[d], sp);
      return std::make_shared<BufferStoreNode>(dst, total_of(f), idx, sp);
    }, sp, "rd");
  }
  Stmt sync = sync_threads(sp);
  // The second barrier keeps a later use of the scratch from overwriting values still read.
  return make_seq({fold, sync, write, sync}, sp);
}
}  // namespace

const TileOpDef& reduce_op() {
  static const TileOpDef def{"reduce", check_reduce, lower_reduce, lower_reduce_threads};
  return def;
}

const TileOpDef& finalize_reducer_op() {
  static const TileOpDef def{"finalize_reducer", check_finalize, lower_finalize, lower_finalize_threads};
  return def;
}

Stmt reducer_update_as_store(const EvaluateNode* n) {
  auto* call = as<CallNode>(n->value);
  if (!call || call->op != "reducer_update") return nullptr;
  auto* target = call->args.size() == 2 ? as<BufferLoadNode>(call->args[0]) : nullptr;
  if (!target) fail(ErrorKind::Internal, n->span, "internal: reducer_update takes (reducer element, new value)");
  return std::make_shared<BufferStoreNode>(target->buffer, cast(target->dtype, call->args[1], n->span), target->indices,
                                           n->span);
}

}  // namespace tl
