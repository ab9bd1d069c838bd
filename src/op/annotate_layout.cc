// T.annotate_layout({buffer: layout}): a request about how a buffer is stored; it runs no
// code. layout = "swizzled": a shared tile, read by layout inference. layout = "fragment":
// a T.Fragment, the thread mapping of a fragment, read by layout inference (its digits in
// attr "digits"). layout = "user": a T.Layout by hand (transform/apply_user_layouts.h),
// kept until apply_user_layouts.
#include "ir/error.h"
#include "layout/swizzle.h"
#include "op/region.h"
#include "op/thread_context.h"
#include "transform/apply_user_layouts.h"

namespace tl {
namespace {

const char* const kOpName = "T.annotate_layout";

void check_annotate_layout(const TileOpNode& op, arith::Analyzer&) {
  require_regions(op, 1, kOpName);
  const Buffer& b = op.regions[0].buffer;
  if (is_user_layout(op)) {
    read_user_layout(op);  // its errors
    return;
  }
  if (attr_str(op, "layout", "") == "fragment") {  // a T.Fragment: read by layout inference
    if (!b->is_fragment())
      fail(ErrorKind::Layout, op.span,
           std::string(kOpName) + ": '" + b->name + "' is in scope '" + b->scope + "'; a T.Fragment is for fragments",
           "annotate a buffer from T.alloc_fragment, or give a T.Layout");
    return;
  }
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

// A layout by hand stays in the program for apply_user_layouts.
Stmt keep_user_layout(const TileOpNode& op) {
  if (is_user_layout(op)) return std::make_shared<TileOpNode>(op.op, op.regions, op.args, op.attrs, op.span);
  return std::make_shared<SeqStmtNode>(std::vector<Stmt>{}, op.span);
}
Stmt no_code(const TileOpNode& op, LowerContext&) { return keep_user_layout(op); }
Stmt no_thread_code(const TileOpNode& op, ThreadContext&) { return keep_user_layout(op); }

}  // namespace

const TileOpDef& annotate_layout_op() {
  static const TileOpDef def{"annotate_layout", check_annotate_layout, no_code, no_thread_code};
  return def;
}

}  // namespace tl
