// The CUDA back end's lowering pipeline: tile-level function in, thread-level function out.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc lower_for_cuda(const PrimFunc& f, const Target& target);

}  // namespace tl
