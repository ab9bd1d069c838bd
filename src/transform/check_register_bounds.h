// A last check of thread-level code: every access to a per-thread register array stays
// inside it. Lowerings index these arrays with unrolled loop variables and instruction
// operand offsets; an access past the end would silently read or clobber a neighbour,
// so it is reported (ErrorKind::Bounds) at the statement's line, whether the array is a
// T.alloc_local buffer of the user's or one a lowering made.
#pragma once
#include "ir/function.h"

namespace tl {

// Element accesses of `local` buffers of constant size, and the operands of ldmatrix
// (16 bytes written), mma_sync (4 accumulators, 16 + 8 operand bytes) and cp_async.
PrimFunc check_register_bounds(const PrimFunc& f);

}  // namespace tl
