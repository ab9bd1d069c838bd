// Runs every tile operator's user-error checks (shapes, dtypes, constant bounds) with an
// analyzer that knows the ranges of the enclosing loop and block variables. Throws
// CompileError; returns f unchanged.
#pragma once
#include "ir/function.h"

namespace tl {

PrimFunc check_tile_ops(const PrimFunc& f);

}  // namespace tl
