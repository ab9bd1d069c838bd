// The TMA lowering of T.copy (op/copy_tma.cc).
#pragma once
#include "ir/stmt.h"
#include "op/thread_context.h"

namespace tl {

// A global -> shared T.copy marked `tma` by the software pipeline, its mbarrier element in
// args[0]: one tma_load per panel of the shared tile, issued by the calling thread.
Stmt lower_copy_tma(const TileOpNode& op, ThreadContext& ctx);

}  // namespace tl
