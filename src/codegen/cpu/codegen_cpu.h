// C++ source for the host compiler from a function lowered by the CPU pipeline.
#pragma once
#include <string>

#include "ir/function.h"

namespace tl {

// The generated source defines
//   extern "C" int32_t <func name>_entry(void* const* args);
// args[i] for each parameter in order: a buffer's data pointer, or a pointer to a
// scalar of the parameter's dtype; then one int64_t* per shape variable
// (tl::shape_vars(func) order). Returns 0.
std::string codegen_cpu(const PrimFunc& lowered);

}  // namespace tl
