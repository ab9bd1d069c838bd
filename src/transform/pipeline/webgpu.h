// The WebGPU back end's lowering pipeline: tile-level function in, thread-level function
// out (the CUDA pipeline's passes without the sm_80+ instruction choices).
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc lower_for_webgpu(const PrimFunc& f, const Target& target);

}  // namespace tl
