// Places every shared.dyn buffer of a kernel in the one dynamic shared-memory block, letting
// buffers whose lifetimes do not overlap share bytes.
#pragma once
#include <unordered_map>
#include <vector>

#include "ir/function.h"
#include "ir/stmt.h"

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

// The shared memory of one kernel as the CUDA code generator lays it out: shared.dyn
// buffers at their planned offsets (any left unplaced, of symbolic size or made after the
// plan, one after another past them, 128-byte aligned) in the one dynamic block, `shared`
// buffers as static arrays (16-byte aligned). A symbolic size is an Unsupported error.
struct SharedBufferUse {
  const AllocateNode* alloc;
  int64_t bytes;
  bool is_static;
};
struct SharedMemoryUse {
  std::vector<SharedBufferUse> buffers;  // in program order
  std::unordered_map<const AllocateNode*, int64_t> dyn_offsets;
  int64_t dyn_bytes = 0;
  int64_t static_bytes = 0;
};
SharedMemoryUse shared_memory_use(const KernelNode* k);
// Bytes of a shared buffer of constant shape (else the Unsupported error, at span).
int64_t shared_buffer_bytes(const Buffer& b, Span span);

}  // namespace tl
