// The HIP back end's lowering pipeline (AMD GPUs): the CUDA pipeline's passes, whose
// instruction choices take NVIDIA's only on target cuda.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc lower_for_hip(const PrimFunc& f, const Target& target);

}  // namespace tl
