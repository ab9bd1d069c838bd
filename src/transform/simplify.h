// The simplify pass: every expression of a function simplified with what is known about the
// variables in scope (loop ranges, block indices, positive shape variables); guards that are
// provably true or false removed, empty loops dropped, single-iteration loops inlined.
#pragma once
#include "arith/analyzer.h"
#include "ir/function.h"

namespace tl {

PrimFunc simplify(const PrimFunc& f);

// The same on a statement, with analyzer holding the ranges of the enclosing variables
// (for passes that lower to loops and want the result tidy). The analyzer is left as found.
Stmt simplify_stmt(const Stmt& s, arith::Analyzer& analyzer);

}  // namespace tl
