// Places every shared.dyn buffer of a kernel in the one dynamic shared-memory block, letting
// buffers whose lifetimes do not overlap share bytes.
#pragma once
#include "ir/function.h"

namespace tl {

// A buffer's lifetime runs from its first to its last access in program order; an access
// inside a loop keeps the buffer alive for the whole of the outermost loop around it (a
// later iteration may read it again). Buffers are placed largest first at the lowest
// offset (a multiple of 128 bytes) that overlaps no buffer alive at the same time. The
// offset becomes the allocation's attribute `offset`, which the code generator uses and
// barrier insertion reads: buffers that share bytes are one storage there, so a write to
// one waits for every thread to finish with the other. Buffers of symbolic size are left
// to the code generator (after the planned ones).
PrimFunc plan_shared_memory(const PrimFunc& f);

}  // namespace tl
