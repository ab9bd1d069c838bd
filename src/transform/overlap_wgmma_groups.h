// wgmma runs asynchronously: a warpgroup issues a group of instructions and may do other
// work until it waits for the group. T.gemm waits for its own group right after issuing it
// unless told otherwise (wg_wait); in a sequence of several T.gemm this leaves the tensor
// cores idle while the threads run the statements between them, and the threads idle while
// each product runs. FlashAttention's backward, per query tile: S = K Q^T and dP = V dO^T
// (independent), the softmax of S, dV += P^T dO, dS from P and dP, dK += dS^T Q, dQ = dS K.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// On targets with wgmma (sm_90a), in every statement sequence at tile level that holds two or
// more T.gemm at its top level (none of them with wg_wait set by the program, no
// T.wait_wgmma of the program):
//   1. each T.gemm moves up past the statements before it that neither touch what it writes
//      nor write what it reads (never past another T.gemm, a barrier, a wait or any other
//      call), so that independent products are issued back to back;
//   2. each T.gemm is issued without a wait; a `wait_wgmma(n)` goes right before the first
//      later statement that touches its accumulator or writes one of its operands, n being
//      the number of groups issued after it, which stay in flight (groups complete in order);
//      before a barrier, a wait or any other call everything is waited for, and so at the end
//      of the sequence. At kernel level (outside loops), where buffers that are not alive
//      together may share shared-memory bytes, a write to any shared buffer also waits for
//      the groups that read shared memory.
// Off with the pass config tl.disable_wgmma_overlap; what moved is in the lowering report.
PrimFunc overlap_wgmma_groups(const PrimFunc& f, const Target& target);

}  // namespace tl
