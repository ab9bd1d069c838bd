// A compile-time proof that a warp-specialised pipeline cannot hang: its producer and
// consumer loops are run symbolically over their mbarrier operations for trip counts
// around the stage count, with the mbarriers' phase semantics.
#pragma once
#include "ir/function.h"

namespace tl {

// For every kernel with ws_pipeline loops: every wait is eventually satisfied (no
// deadlock), each wait on a barrier is for the phase after the one it waited for before
// (parities alternate, no phase is overrun while a waiter is behind), and no barrier is
// left with a partial phase. A violation is a compile error naming the trip count and the
// barrier; the lowering report says which trip counts were checked.
PrimFunc check_barrier_protocol(const PrimFunc& f);

}  // namespace tl
