// Bounds guards for hand-written element accesses to global tensors.
#pragma once
#include "transform/pass.h"

namespace tl {

PrimFunc legalize_safe_memory_access(const PrimFunc& f);

}  // namespace tl
