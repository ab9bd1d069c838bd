// T.annotate_layout({buffer: layout}): a request about how a buffer is stored, read by
// layout inference; it runs no code. Only swizzled shared buffers are expressible today
// (attribute layout = "swizzled"; the front end rejects other layouts).
#include "ir/error.h"
#include "layout/swizzle.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {
namespace {

const char* const kOpName = "T.annotate_layout";

void check_annotate_layout(const TileOpNode& op, arith::Analyzer&) {
  require_regions(op, 1, kOpName);
  const Buffer& b = op.regions[0].buffer;
  if (attr_str(op, "layout", "") != "swizzled")
    fail(ErrorKind::Unsupported, op.span, std::string(kOpName) + ": unknown layout for '" + b->name + "'");
  if (!b->is_shared())
    fail(ErrorKind::Layout, op.span,
         std::string(kOpName) + ": '" + b->name + "' is in scope '" + b->scope +
             "'; a swizzled layout is for shared buffers",
         "annotate a buffer from T.alloc_shared");
  const int64_t* cols = b->shape.empty() ? nullptr : const_int(b->shape.back());
  if (b->shape.size() < 2 || !cols || pick_swizzle_mode(*cols, b->dtype.bits) == SwizzleMode::None)
    fail(ErrorKind::Layout, op.span,
         std::string(kOpName) + ": '" + b->name + "' cannot be swizzled: its rows must be a multiple of 32 bytes " +
             "(16-byte chunks XORed in 32/64/128-byte segments) and it must be at least 2-D",
         "drop the annotation for this buffer");
}

Stmt no_code(const TileOpNode& op, LowerContext&) { return std::make_shared<SeqStmtNode>(std::vector<Stmt>{}, op.span); }
Stmt no_thread_code(const TileOpNode& op, ThreadContext&) {
  return std::make_shared<SeqStmtNode>(std::vector<Stmt>{}, op.span);
}

}  // namespace

const TileOpDef& annotate_layout_op() {
  static const TileOpDef def{"annotate_layout", check_annotate_layout, no_code, no_thread_code};
  return def;
}

}  // namespace tl
