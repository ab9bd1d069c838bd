// HIP C++ for AMD GPUs from a function lowered to thread-level IR by the GPU pipeline
// (docs/hip.md). The CUDA generator emits it, in its HIP dialect: the two languages differ
// in the header, the 16-bit float helpers, shuffles (no lane masks; a wavefront of 64 lanes
// on CDNA) and in the NVIDIA-only instructions, which target hip rejects.
#pragma once
#include <string>

#include "codegen/cuda/codegen_cuda.h"
#include "ir/function.h"

namespace tl {

struct HipCodegenOptions {
  // The AMD architecture ("gfx942", "gfx1100", ...), named in the source's header comment.
  std::string arch = "gfx942";
  // Emit __launch_bounds__(threads per block), which lets the compiler budget registers.
  bool launch_bounds = true;
};

// Throws CompileError: Unsupported for what target hip cannot express (float8, NVIDIA-only
// instructions, symbolic shared sizes, ...).
std::string codegen_hip(const PrimFunc& lowered, const HipCodegenOptions& opts = {});

// The kernels it defines, with their launch shapes, are cuda_kernel_infos(lowered): the
// entry points and parameters are the same on both targets.

}  // namespace tl
