// The stage_epilogue pass (transform/stage_epilogue.cc).
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// On sm_90a, a T.copy of a whole fragment tile to global memory that comes after the
// kernel's software-pipelined loop goes through a shared tile in the bytes the pipeline's
// buffers leave free: the fragment's stores into a swizzled tile hit no bank twice, and the
// tile leaves by TMA store (whole lines) instead of each thread's scattered 4-byte stores.
PrimFunc stage_epilogue(const PrimFunc& f, const Target& target);

}  // namespace tl
