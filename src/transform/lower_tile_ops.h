// Replaces every tile operator by its loop-level lowering for the target; on the CPU,
// T.Pipelined loops become serial loops.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc lower_tile_ops(const PrimFunc& f, const Target& target);

}  // namespace tl
