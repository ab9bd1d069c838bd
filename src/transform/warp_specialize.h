// Warp specialisation of a TMA pipeline (thread-level IR): the block gains a producer
// warpgroup that issues the TMA copies, while the block's own threads (the consumers)
// compute, each side on its own register budget (setmaxnreg).
#pragma once
#include "ir/function.h"

namespace tl {

// A kernel whose top-level loop carries attr ws_pipeline (inject_software_pipeline's TMA
// form: `if ws_role(1): producer` then `if ws_role(0): consumer` per iteration) becomes
//   mbarrier init; barrier;
//   if tx < T:  setmaxnreg.inc; <statements before the loop>; loop(consumer); <after>
//   else:       setmaxnreg.dec; if tx == T: loop(producer)
// with T + 128 threads; barriers among the consumers become named barriers over T threads.
PrimFunc warp_specialize(const PrimFunc& f);

}  // namespace tl
