// Prints IR in the DSL's own syntax (a @T.prim_func one could read back).
#pragma once
#include <string>

#include "ir/function.h"

namespace tl {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s, int indent = 0);
std::string to_string(const PrimFunc& f);

}  // namespace tl
