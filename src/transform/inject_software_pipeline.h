// T.Pipelined(n, num_stages=S) on GPU targets: the loop's global -> shared copies run S - 1
// iterations ahead of the computation that reads them, into S copies of their buffers.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

// A top-level T.copy of the loop body from a global tensor into a shared buffer is a
// producer when its source is not written in the loop, its region depends on the loop
// variable and values fixed before the loop only, and its destination is written by it
// alone and used nowhere but in this loop. Every other statement is a consumer and keeps
// its order. With producers P and consumers C, iteration i of the loop becomes
//
//     cp_async_wait(S - 2); sync_threads()     # copy i landed; iteration i - 1 is done
//     if i + S - 1 < n: P(i + S - 1) into slot (i + S - 1) % S
//     cp_async_commit()
//     C(i) reading slot i % S
//
// after a prologue that issues P(0) .. P(S - 2). Producer copies are marked `async` (the
// copy lowering emits cp.async where it can, plain copies elsewhere; both are complete at
// the wait and barrier). The multi-buffered allocations carry the attribute `pipelined`:
// the schedule orders their accesses itself, and barrier insertion leaves them alone.
// Loops with num_stages < 2, without producers, or on targets before sm_80 stay as they
// are (run in order).
PrimFunc inject_software_pipeline(const PrimFunc& f, const Target& target);

}  // namespace tl
