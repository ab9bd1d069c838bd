// Two consumer warpgroups take turns on the tensor cores (FlashAttention-3's ping-pong,
// thread-level IR, after warp_specialize): in a warp-specialised loop whose two consumer
// warpgroups work independently (no barrier among the consumers inside the loop) and run
// at least two wgmma groups with work on the CUDA cores between them (attention: S = Q K^T,
// the softmax, O += P V), a warpgroup's turn covers its last group of an iteration and its
// first group of the next; the softmax that follows runs while the other warpgroup's
// groups occupy the tensor cores, instead of both warpgroups alternating in lockstep.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// The turns are two named barriers (ids the kernel leaves free) of the 256 consumer
// threads: warpgroup w takes its turn by bar.sync on barrier first + w before its last
// group, and passes it by bar.arrive on the other's after its next first group is
// committed. Warpgroup 0 goes first: warpgroup 1 consumes warpgroup 0's first pass before
// the loop, and warpgroup 0 passes once more after it, so the barriers end balanced for
// any trip count, and a loop that runs again starts afresh. Only with the pass config
// tl.enable_warpgroup_pingpong: on the H200 it made the FlashAttention forward kernel 9-13%
// slower (benchmarks/RESULTS.md, runs 27-28; each warpgroup still waits for each group
// right after issuing it, so a turn holds the tensor cores idle between the two groups it
// pairs). The report says where it applied.
PrimFunc pingpong_warpgroups(const PrimFunc& f, const Target& target);

}  // namespace tl
