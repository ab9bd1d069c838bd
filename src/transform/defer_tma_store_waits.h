// A TMA store or reduction issued in a loop (`if (tx == 0) { tma_store(...); commit;
// wait_read(0); }`) makes its thread wait, right after the issue, until the bulk copy has
// read its shared tile, and the warp of that thread arrives that much later at the next
// barrier every thread waits on. The wait only has to come before that barrier, when the
// tile is next written after it: it moves there (run every iteration; nothing is in flight
// in the first), and after the loop for the last iteration's copy.
// Runs on thread-level code, before warp specialisation.
#pragma once
#include "ir/function.h"

namespace tl {

PrimFunc defer_tma_store_waits(const PrimFunc& f);

}  // namespace tl
