// Layout inference for GPU targets: decides how every fragment of a kernel is spread over
// the block's threads (see layout/tile_partition.h for the layouts themselves).
#pragma once
#include "ir/stmt.h"
#include "op/thread_context.h"

namespace tl {

// Rules, in order of strength:
//  0. T.gemm on tensor cores (op/gemm.h decides the instruction) fixes its accumulator's
//     layout (the mma.sync accumulator on its warp grid) and swizzles its shared operands.
//  1. The destination of a reduction takes the layout derived from its source: one value
//     per row held by the row's threads (reducing the last dimension), or one per column
//     held by every row group (reducing the first dimension of a 2-D tile).
//  2. A rank-1 fragment indexed by one loop variable of a T.Parallel loop that walks a 2-D
//     fragment follows that fragment in the same way (G[i] next to F[i, j]: per row).
//  3. Every other fragment gets the default grid partition of its shape.
// Two derivations that disagree on a buffer are a Layout error naming it and both lines.
KernelLayouts infer_layouts(const KernelNode& kernel, const Target& target);

}  // namespace tl
