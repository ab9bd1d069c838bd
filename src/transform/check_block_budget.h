// What one launch asks for must fit the exact target, checked at compile time: the grid's
// extent in each dimension, threads per block (in each dimension and in all) and shared
// memory per block (Target's limits: CUDA's by architecture, WebGPU's from the adapter).
// An overrun is an Unsupported error at the T.Kernel line; a shared-memory overrun lists
// each buffer's bytes and, for a pipelined kernel, what one stage fewer saves.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// On CUDA, shared memory is counted as the code generator lays it out (after
// plan_shared_memory's reuse); on WebGPU, each shared buffer is a workgroup array of its
// own. Symbolic grid extents are checked when the kernel is launched.
PrimFunc check_block_budget(const PrimFunc& f, const Target& target);

}  // namespace tl
