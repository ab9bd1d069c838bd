// Deep equality of expressions as the simplifier needs it: same tree, same constants and
// dtypes, variables and buffers compared by identity.
#pragma once
#include "ir/expr.h"

namespace tl::arith {

bool expr_equal(const Expr& a, const Expr& b);

}  // namespace tl::arith
