// Branches on the thread index that split the block into whole warpgroups (upstream's hand
// warp specialisation: `if tx < 128: ... elif tx < 256: ... else: ...`) become T.ws
// regions: the tile operators and fragments inside are lowered for the threads that run
// the branch, and the barriers the compiler places inside are those threads' own.
#pragma once
#include "transform/pass.h"

namespace tl {

PrimFunc thread_range_branches(const PrimFunc& f);

}  // namespace tl
