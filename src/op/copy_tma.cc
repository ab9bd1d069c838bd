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

#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"

namespace tl {

Stmt lower_copy_tma(const TileOpNode& op, ThreadContext& ctx) {
  Span sp = op.span;
  const BufferRegion &src = op.regions.at(0), &dst = op.regions.at(1);
  if (op.args.size() != 1 || !as<BufferLoadNode>(op.args[0]))
    fail(ErrorKind::Internal, sp, "internal: a TMA copy takes its mbarrier element");
  const Buffer &G = src.buffer, &S = dst.buffer;
  const int64_t rows = *const_int(S->shape[S->shape.size() - 2]), cols = *const_int(S->shape.back());
  SharedSwizzle swz;
  if (auto it = ctx.layouts.swizzled.find(S.get()); it != ctx.layouts.swizzled.end()) swz = it->second;
  if (swz.mode != SwizzleMode::None && !swz.panelled(cols) && swz.panel_cols != cols && swz.panel_cols != 0)
    fail(ErrorKind::Internal, sp, "internal: the TMA destination " + S->name + " is not stored in panels");
  if (swz.mode != SwizzleMode::None && swz.panel_cols == 0 && cols * S->dtype.bytes() > swizzle_width_bytes(swz.mode))
    fail(ErrorKind::Internal, sp, "internal: the TMA destination " + S->name + " is swizzled in place");
  const int64_t panel = swz.panelled(cols) ? swz.panel_cols : cols;
  const int rank = int(G->shape.size());
  std::vector<Expr> args = {make_load(G, std::vector<Expr>(rank, make_int(0)), sp), nullptr, op.args[0],
                            make_int(swizzle_width_bytes(swz.mode)), make_int(rank)};
  // The box: the tile's rows along the one other non-unit dimension, one panel of columns
  // along the contiguous one, 1 elsewhere.
  for (int d = 0; d < rank; ++d) {
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
    for (int d = 0; d < rank; ++d)
      a.push_back(d == rank - 1 ? add(src.ranges[d].min, make_int(p * panel), sp) : src.ranges[d].min);
    out.push_back(std::make_shared<EvaluateNode>(std::make_shared<CallNode>(DataType::Void(), "tma_load", a, sp), sp));
  }
  (void)ctx;
  return make_seq(out, sp);
}

}  // namespace tl
