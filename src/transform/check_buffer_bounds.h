// Element accesses to block-private buffers (shared, fragment, local) that are out of range
// for some iterations, where that is provable at compile time, are Bounds errors at their
// line: a T.Parallel loop that writes past a shared tile's end would otherwise corrupt its
// neighbours on a GPU and the heap on the CPU. (Global tensors are guarded instead:
// legalize_safe_memory_access, which also reports an index outside for every iteration.)
#pragma once
#include "ir/function.h"

namespace tl {

// Provable means: every index is a linear form over loop, block and thread indices of
// constant ranges (each combination of which some iteration reaches), and the access is
// not under a condition (an if, a select, the right operand of and/or) that may guard it.
PrimFunc check_buffer_bounds(const PrimFunc& f);

}  // namespace tl
