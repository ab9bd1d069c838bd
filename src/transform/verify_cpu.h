// Rejects what the CPU back end cannot run, while the program still looks like what the
// user wrote: per-thread constructs (thread indices), sub-byte buffer dtypes, and grids
// of more than three dimensions. Returns f unchanged or throws CompileError(Unsupported).
#pragma once
#include "ir/function.h"

namespace tl {

PrimFunc verify_cpu(const PrimFunc& f);

}  // namespace tl
