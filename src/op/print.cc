// T.print(buf, msg): prints every element of the region, one line each, in row-major order.
// Each element becomes print("<msg> <name>[", i0, ", ", i1, "] = ", value): the label names the
// index positions, then the index values and the element follow.
#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"

namespace tl {
namespace {

const char* const kOpName = "T.print";

void check_print(const TileOpNode& op, arith::Analyzer&) {
  require_regions(op, 1, kOpName);
  check_region(kOpName, op.regions[0], op.span);
}

Stmt lower_print(const TileOpNode& op, LowerContext& ctx) {
  require_regions(op, 1, kOpName);
  const BufferRegion& r = op.regions[0];
  Span sp = op.span;
  std::string msg = attr_str(op, "msg", "");
  // Serial loops: the output order is part of what the user sees.
  LoopNest loops(squeezed_extents(r), ctx.analyzer, sp);
  auto indices = region_indices(r, loops.vars(), sp);
  // print("<msg> S[", i0, ", ", i1, "] = ", value): the pieces are printed back to back.
  auto piece = [&](const std::string& text) { return std::make_shared<StringImmNode>(text, sp); };
  std::string label = (msg.empty() ? "" : msg + " ") + r.buffer->name;
  std::vector<Expr> args;
  if (indices.empty()) {
    args.push_back(piece(label + " = "));
  } else {
    args.push_back(piece(label + "["));
    for (size_t d = 0; d < indices.size(); ++d) {
      if (d) args.push_back(piece(", "));
      args.push_back(indices[d]);
    }
    args.push_back(piece("] = "));
  }
  args.push_back(guarded_load(r, indices, ctx.analyzer, sp));
  Expr call = std::make_shared<CallNode>(DataType::Void(), "print", std::move(args), sp);
  return loops.wrap(std::make_shared<EvaluateNode>(call, sp), ForKind::Serial);
}

}  // namespace

const TileOpDef& print_op() {
  static const TileOpDef def{"print", check_print, lower_print};
  return def;
}

}  // namespace tl
