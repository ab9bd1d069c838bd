// What one thread holds: its per-thread arrays (fragments' slots, T.alloc_local, the
// lowerings' operand registers) must fit what the target can give a thread. A kernel over
// the limit is a compile error at the allocation that tips it over, not a compiler or
// driver that runs for minutes or hangs.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// Per kernel, the bytes of the `local` arrays of constant size one thread holds (those used
// everywhere, and those used only under a branch on the thread index that its thread
// takes: T.ws regions never hold each other's arrays): over the target's
// max_thread_array_bytes (CUDA: 16 KiB, 4096 floats a thread, past which NVRTC takes
// minutes; WebGPU: WGSL's 8 KiB of function-scope variables) is an error; over the
// registers a thread has (Target::register_bytes: CUDA's 255, an AMD SIMD's share per
// wavefront), the lowering report says the rest lives in local memory / scratch (a slower
// path).
PrimFunc check_thread_budget(const PrimFunc& f, const Target& target);

// Bytes of the `local` arrays of constant size in a kernel, per thread.
int64_t per_thread_array_bytes(const KernelNode& k);
// What a thread's registers hold (255 of 4 bytes on CUDA); more is kept in local memory.
constexpr int64_t kCudaRegisterBytes = 1020;

}  // namespace tl
