// T.copy global -> shared by the Tensor Memory Accelerator (cp.async.bulk.tensor), as the
// TMA pipeline's producer issues it (transform/inject_software_pipeline.cc): one thread
// starts the copy of the whole tile, which completes on an mbarrier with its byte count.
//
// The shared tile is stored as layout inference decided for TMA destinations
// (layout/swizzle.h): panels one swizzle width wide, each a TMA box of rows x panel
// columns written by the hardware in that swizzle. So the box, the shared layout and the
// wgmma descriptors that read the tile agree by construction. Rows and columns past the
// tensor's edge arrive as zeros (the tensor map's out-of-bounds fill): no guards.
#include "op/copy_tma.h"

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/region.h"
#include "layout/swizzle.h"

namespace tl {

namespace {

// One tma_load / tma_store per panel of the shared tile S (region `shared`) at the global
// region `global`; `bar` is the load's mbarrier element (0 for a store).
std::vector<Stmt> tma_boxes(const std::string& op, const BufferRegion& global, const BufferRegion& shared, Expr bar,
                            const ThreadContext& ctx, Span sp, const std::vector<int>& order = {}) {
  const BufferRegion &src = global, &dst = shared;
  const Buffer &G = src.buffer, &S = dst.buffer;
  const int64_t rows = S->shape.size() >= 2 ? *const_int(S->shape[S->shape.size() - 2]) : 1;
  const int64_t cols = *const_int(S->shape.back());
  SharedSwizzle swz;
  if (auto it = ctx.layouts.swizzled.find(S.get()); it != ctx.layouts.swizzled.end()) swz = it->second;
  if (swz.mode != SwizzleMode::None && !swz.panelled(cols) && swz.panel_cols != cols && swz.panel_cols != 0)
    fail(ErrorKind::Internal, sp, "internal: the TMA destination " + S->name + " is not stored in panels");
  if (swz.mode != SwizzleMode::None && swz.panel_cols == 0 && cols * S->dtype.bytes() > swizzle_width_bytes(swz.mode))
    fail(ErrorKind::Internal, sp, "internal: the TMA destination " + S->name + " is swizzled in place");
  const int64_t panel = swz.panelled(cols) ? swz.panel_cols : cols;
  const int rank = int(G->shape.size());
  std::vector<Expr> args = {make_load(G, std::vector<Expr>(rank, make_int(0)), sp), nullptr, bar,
                            make_int(swizzle_width_bytes(swz.mode)), make_int(rank)};
  // A tensor stored in another order of its dimensions (a layout by hand that reorders
  // them): the map's dimension k is the tensor's order[k], and the order follows the
  // coordinates (the tensor map is encoded for it, jit/backends.py).
  auto dim = [&](int k) { return order.empty() ? k : order[size_t(k)]; };
  // The box: the tile's rows along the one other non-unit dimension, one panel of columns
  // along the contiguous one, 1 elsewhere.
  for (int k = 0; k < rank; ++k) {
    int d = dim(k);
    const int64_t* e = const_int(src.ranges[d].extent);
    args.push_back(make_int(d == rank - 1 ? panel : (*e == 1 ? 1 : rows)));
  }
  std::vector<Stmt> out;
  for (int64_t p = 0; p * panel < cols; ++p) {
    std::vector<Expr> a = args;
    // The panel's first element; the shared layout puts it at the panel's start.
    std::vector<Expr> at;
    for (size_t d = 0; d < dst.ranges.size(); ++d) at.push_back(dst.ranges[d].min);
    at.back() = add(at.back(), make_int(p * panel), sp);
    a[1] = make_load(S, at, sp);
    for (int k = 0; k < rank; ++k) {
      int d = dim(k);
      a.push_back(d == rank - 1 ? add(src.ranges[d].min, make_int(p * panel), sp) : src.ranges[d].min);
    }
    for (int d : order) a.push_back(make_int(d));
    out.push_back(std::make_shared<EvaluateNode>(std::make_shared<CallNode>(DataType::Void(), op, a, sp), sp));
  }
  return out;
}

// The dimension order of op's global tensor (attribute tma_order, check_user_layouts.cc);
// empty when it is stored in its own order.
std::vector<int> tma_order_of(const TileOpNode& op) {
  std::vector<int> order;
  std::string text = attr_str(op, "tma_order", "");
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    order.push_back(std::stoi(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    at = comma == std::string::npos ? text.size() : comma + 1;
  }
  return order;
}

// Why the strides of G (elements), in the order its storage takes, are not what a tensor
// map needs (multiples of 16 bytes, known at compile time), or "".
std::string why_not_map_strides(const Buffer& G, const std::vector<int>& order) {
  std::vector<Expr> strides = G->effective_strides();
  if (!order.empty()) {  // row-major over the reordered shape
    strides.assign(order.size(), make_int(1));
    for (size_t k = order.size() - 1; k-- > 0;) strides[k] = mul(strides[k + 1], G->shape[size_t(order[k + 1])]);
  }
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    const int64_t* st = const_int(strides[d]);
    if (!st) {
      arith::Analyzer analyzer;
      st = const_int(analyzer.simplify(strides[d]));
    }
    if (!st || (*st * G->dtype.bits) % 128 != 0)
      return G->name + "'s stride along dimension " + std::to_string(order.empty() ? int(d) : order[d]) +
             (st ? " is not a multiple of 16 bytes" : " is known only at run time (TMA needs multiples of 16 bytes)");
  }
  return "";
}

// A tile wider than one 128-byte swizzle is moved in panels of boxes, each swizzled by
// the hardware from the bits of its shared-memory address: a panel must start on an 8-row
// swizzle atom, so the tile's rows must be a multiple of 8 (one row of 8192 columns would
// be swizzled by the hardware with each panel's position, but read by the threads as a
// plain row).
std::string why_not_panels(const Buffer& S, int64_t rows, int64_t cols) {
  if (cols * S->dtype.bits > 128 * 8 && rows % 8 != 0)
    return S->name + ": " + std::to_string(rows) + " row(s) of " + std::to_string(cols * S->dtype.bits / 8) +
           " bytes; TMA moves a row wider than 128 bytes in swizzled panels of 8-row atoms";
  return "";
}

}  // namespace

// A multicast (cluster_mask): the block of the mask's lowest bit loads for every block of
// the mask; the mask's other blocks receive; blocks outside it load their own tile.
Stmt multicast_or_load(const TileOpNode& op, ThreadContext& ctx, int64_t mask) {
  Span sp = op.span;
  std::vector<Stmt> loads =
      tma_boxes("tma_load", op.regions.at(0), op.regions.at(1), op.args[0], ctx, sp, tma_order_of(op));
  if (!mask) return make_seq(loads, sp);
  if (!tma_order_of(op).empty())
    fail(ErrorKind::Unsupported, sp, "a multicast TMA load of a tensor with a layout by hand",
         "drop the cluster multicast of this copy, or the layout");
  std::vector<Stmt> casts;
  for (auto& l : loads) {
    auto* call = as<CallNode>(as<EvaluateNode>(l)->value);
    std::vector<Expr> args = call->args;
    args.push_back(make_int(mask));
    casts.push_back(std::make_shared<EvaluateNode>(
        std::make_shared<CallNode>(DataType::Void(), "tma_load_multicast", args, sp), sp));
  }
  int64_t leader = 0;
  while (!((mask >> leader) & 1)) ++leader;
  Expr rank = std::make_shared<CallNode>(DataType::Int(32), "block_rank_in_cluster", std::vector<Expr>{}, sp);
  Expr bit = floormod(binary(BinaryOp::ShiftRight, make_int(mask), rank, sp), make_int(2), sp);
  Expr outside = binary(BinaryOp::EQ, bit, make_int(0), sp);
  Stmt own = std::make_shared<IfThenElseNode>(outside, make_seq(loads, sp), nullptr, sp);
  return std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, rank, make_int(leader), sp), make_seq(casts, sp), own, sp);
}

// T.copy(..., eviction_policy=k): every TMA load of the copy gets a last argument
// l2_policy(k), the cache policy of its lines in L2 (0 evict_normal, 1 evict_first,
// 2 evict_last; codegen_cuda.cc).
class AddL2Policy : public IRMutator {
 public:
  explicit AddL2Policy(int64_t policy) : policy_(policy) {}

 protected:
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    auto* c = as<CallNode>(n->value);
    if (!c || (c->op != "tma_load" && c->op != "tma_load_multicast")) return s;
    std::vector<Expr> args = c->args;
    args.push_back(std::make_shared<CallNode>(DataType::UInt(64), "l2_policy", std::vector<Expr>{make_int(policy_)},
                                              c->span));
    return std::make_shared<EvaluateNode>(std::make_shared<CallNode>(c->dtype, c->op, std::move(args), c->span),
                                          n->span);
  }

 private:
  int64_t policy_;
};

Stmt lower_copy_tma(const TileOpNode& op, ThreadContext& ctx) {
  Span sp = op.span;
  if (op.args.size() != 1 || !as<BufferLoadNode>(op.args[0]))
    fail(ErrorKind::Internal, sp, "internal: a TMA copy takes its mbarrier element");
  std::vector<Stmt> loads = {multicast_or_load(op, ctx, attr_int(op, "cluster_mask", 0))};
  if (op.attrs.count("eviction_policy")) loads[0] = AddL2Policy(attr_int(op, "eviction_policy", 0)).mutate(loads[0]);
  if (!attr_int(op, "by_hand", 0)) return make_seq(loads, sp);
  if (std::string why = why_not_tma_load(op, ctx.target); !why.empty())
    fail(ErrorKind::Unsupported, sp, "T.tma_copy: " + why, "use T.copy, which picks a mechanism that can take it");
  loads.insert(loads.begin(), call_stmt("mbarrier_expect_tx", {op.args[0], make_int(tma_load_bytes(op))}, sp));
  return std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, ctx.thread, make_int(0), sp), make_seq(loads, sp),
                                          nullptr, sp);
}

std::string why_not_tma_load(const TileOpNode& op, const Target& target) {
  if (target.kind != "cuda" || target.arch_number() != 90 || target.arch.back() != 'a') return "TMA needs sm_90a";
  if (target.disable_tma) return "pass config tl.disable_tma_lower is set";
  if (std::string why = attr_str(op, "no_tma", ""); !why.empty()) return why;
  if (op.regions.size() != 2) return "not a copy";
  const BufferRegion &src = op.regions[0], &dst = op.regions[1];
  if (!src.buffer->is_global() || !dst.buffer->is_shared()) return "not a global -> shared copy";
  // Tensor maps describe kernel parameters; a T.reshape / T.view is read by the threads.
  if (src.buffer->is_view) return src.buffer->name + " is a T.reshape / T.view";
  const Buffer& S = dst.buffer;
  // A 1-D tile is one row; a 2-D tile (a stage of a multi-buffered one) rows x columns.
  const size_t tile_rank = S->shape.size() == 1 ? 1 : 2;
  for (size_t d = 0; d + tile_rank < S->shape.size(); ++d)  // a stage of a multi-buffered tile
    if (const int64_t* e = const_int(dst.ranges[d].extent); !e || *e != 1) return S->name + " is not a 2-D tile";
  for (size_t d = S->shape.size() - tile_rank; d < S->shape.size(); ++d) {
    const int64_t *mn = const_int(dst.ranges[d].min), *e = const_int(dst.ranges[d].extent), *full = const_int(S->shape[d]);
    if (!mn || *mn != 0 || !e || !full || *e != *full) return "the copy writes part of " + S->name + "'s tile";
  }
  const int64_t one = 1;
  const int64_t *rows = tile_rank == 1 ? &one : const_int(S->shape[S->shape.size() - 2]), *cols = const_int(S->shape.back());
  int bits = S->dtype.bits;
  if (!rows || !cols || *rows > 256 || (*cols * bits) % 256 != 0)
    return S->name + ": a TMA box needs at most 256 rows of a multiple of 32 bytes";
  if (tma_moves_one_row(op)) {
    if (*cols > 256) return S->name + ": one row of more than 256 elements (one unswizzled TMA box)";
  } else if (std::string why = why_not_panels(S, *rows, *cols); !why.empty()) {
    return why;
  }
  if (src.buffer->dtype != S->dtype) return "the copy into " + S->name + " converts its dtype";
  std::vector<int> dims;
  for (size_t d = 0; d < src.ranges.size(); ++d) {
    const int64_t* e = const_int(src.ranges[d].extent);
    if (!e) return "the copy into " + S->name + " has a symbolic extent";
    if (*e != 1) dims.push_back(int(d));
  }
  int last = int(src.ranges.size()) - 1;
  if (dims.empty() || dims.back() != last || *const_int(src.ranges[last].extent) != *cols ||
      (dims.size() == 2 && *const_int(src.ranges[dims[0]].extent) != *rows) || dims.size() > 2 ||
      (dims.size() == 1 && *rows != 1))
    return "the copy into " + S->name + " does not take whole rows along " + src.buffer->name +
           "'s contiguous dimension";
  if (src.ranges.size() > 5) return src.buffer->name + " has more than 5 dimensions";
  // A tensor map's strides are multiples of 16 bytes: known here only when constant.
  return why_not_map_strides(src.buffer, tma_order_of(op));
}

bool tma_moves_one_row(const TileOpNode& op) {
  if (op.regions.size() != 2) return false;
  int non_unit = 0;
  for (auto& r : op.regions[0].ranges) {
    const int64_t* e = const_int(r.extent);
    non_unit += !e || *e != 1;
  }
  return non_unit == 1;
}

int64_t tma_load_bytes(const TileOpNode& op) {
  const Buffer& S = op.regions.at(1).buffer;
  const int64_t rows = S->shape.size() >= 2 && !tma_moves_one_row(op) ? *const_int(S->shape[S->shape.size() - 2]) : 1;
  return rows * *const_int(S->shape.back()) * S->dtype.bytes();
}

std::pair<const BufferRegion*, const BufferRegion*> tma_store_regions(const TileOpNode& op) {
  if (op.regions.size() != 2) return {nullptr, nullptr};
  if (op.op == "atomic_add") return {&op.regions[1], &op.regions[0]};
  return {&op.regions[0], &op.regions[1]};
}

Stmt lower_copy_tma_store(const TileOpNode& op, ThreadContext& ctx) {
  Span sp = op.span;
  auto [shared, global] = tma_store_regions(op);
  // T.atomic_add(G, S, use_tma=True): the same boxes, added into the tensor.
  std::string instruction = op.op == "atomic_add" ? "tma_reduce_add" : "tma_store";
  std::vector<Stmt> issue = tma_boxes(instruction, *global, *shared, make_int(0), ctx, sp, tma_order_of(op));
  issue.push_back(call_stmt("tma_store_commit", {}, sp));
  // T.tma_copy's store leaves the group in flight: the program waits (T.tma_store_wait).
  if (!attr_int(op, "by_hand", 0)) issue.push_back(call_stmt("tma_store_wait_read", {make_int(0)}, sp));
  return std::make_shared<IfThenElseNode>(binary(BinaryOp::EQ, ctx.thread, make_int(0), sp), make_seq(issue, sp),
                                          nullptr, sp);
}

std::string why_not_tma_store(const TileOpNode& op, const Target& target) {
  if (target.kind != "cuda" || target.arch_number() != 90 || target.arch.back() != 'a') return "TMA needs sm_90a";
  if (target.disable_tma) return "pass config tl.disable_tma_lower is set";
  if (std::string why = attr_str(op, "no_tma", ""); !why.empty()) return why;
  bool reduce = op.op == "atomic_add";
  if ((op.op != "copy" && !reduce) || op.regions.size() != 2) return "not a copy";
  auto [shared, global] = tma_store_regions(op);
  const BufferRegion &src = *shared, &dst = *global;
  const Buffer &S = src.buffer, &G = dst.buffer;
  if (!S->is_shared() || !G->is_global())
    return reduce ? "the value is not a shared tile added into a global tensor" : "not a shared -> global copy";
  if (G->is_view) return G->name + " is a T.reshape / T.view";
  if (S->dtype != G->dtype) return reduce ? "the addition converts its dtype" : "the copy converts its dtype";
  if (reduce && !(S->dtype == DataType::Float(32) || S->dtype == DataType::Float(16) ||
                  S->dtype == DataType::BFloat16()))
    return "TMA adds float16, bfloat16 and float32, not " + S->dtype.str();
  if (S->shape.size() != 2) return S->name + " is not a 2-D tile";
  const int64_t *rows = const_int(S->shape[0]), *cols = const_int(S->shape[1]);
  if (!rows || !cols || *rows > 256 || (*cols * S->dtype.bits) % 256 != 0)
    return "a TMA box needs at most 256 rows of a multiple of 32 bytes";
  if (std::string why = why_not_panels(S, *rows, *cols); !why.empty()) return why;
  for (size_t d = 0; d < 2; ++d) {
    const int64_t *mn = const_int(src.ranges[d].min), *e = const_int(src.ranges[d].extent);
    if (!mn || *mn != 0 || !e || *e != *const_int(S->shape[d])) return "the copy reads part of " + S->name;
  }
  std::vector<int> dims;
  for (size_t d = 0; d < dst.ranges.size(); ++d) {
    const int64_t* e = const_int(dst.ranges[d].extent);
    if (!e) return "the copy into " + G->name + " has a symbolic extent";
    if (*e != 1) dims.push_back(int(d));
  }
  int last = int(dst.ranges.size()) - 1;
  if (dims.empty() || dims.back() != last || *const_int(dst.ranges[last].extent) != *cols || dims.size() > 2 ||
      (dims.size() == 2 && *const_int(dst.ranges[dims[0]].extent) != *rows) || (dims.size() == 1 && *rows != 1))
    return "the copy does not write whole rows along " + G->name + "'s contiguous dimension";
  if (dst.ranges.size() > 5) return G->name + " has more than 5 dimensions";
  return why_not_map_strides(G, tma_order_of(op));
}

}  // namespace tl
