// The CPU back end's lowering pipeline: tile-level function in, loop-level function out.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc lower_for_cpu(const PrimFunc& f, const Target& target);

}  // namespace tl
