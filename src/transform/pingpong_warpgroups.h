// Two consumer warpgroups take turns on the tensor cores (FlashAttention-3's ping-pong,
// thread-level IR, after warp_specialize): in a warp-specialised loop whose two consumer
// warpgroups work independently (no barrier among the consumers inside the loop), each
// wgmma group waits for its warpgroup's turn and passes the turn to the other warpgroup
// once issued, so one warpgroup's softmax (or other CUDA-core work) runs while the other's
// matrix multiplies occupy the tensor cores, instead of both alternating in lockstep.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// The turns are two named barriers (ids the kernel leaves free) of the 256 consumer
// threads: before a group, bar.sync on its warpgroup's barrier; after the group's commit,
// bar.arrive on the other's. Warpgroup 1 passes the first turn before the loop and
// warpgroup 0 takes the last pass after it, so the barriers end balanced for any trip
// count, and a loop that runs again starts afresh. Off with tl.disable_warpgroup_pingpong
// (and with tl.disable_warp_specialized: no consumer loop to schedule); the report says
// where it applied.
PrimFunc pingpong_warpgroups(const PrimFunc& f, const Target& target);

}  // namespace tl
