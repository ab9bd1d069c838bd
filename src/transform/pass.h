// A pass maps a function to a function. A pipeline (transform/pipeline/<target>.cc) is an
// ordered list of named passes; run_passes prints the IR after each pass, with its time,
// when the environment variable TL_PRINT_IR is set (TL_PRINT_IR=1).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/function.h"

namespace tl {

using PassFn = std::function<PrimFunc(const PrimFunc&)>;
struct Pass {
  std::string name;
  PassFn fn;
};

PrimFunc run_passes(const PrimFunc& f, const std::vector<Pass>& passes);

// Returns a copy of f with a new body (the common last step of a pass).
PrimFunc with_body(const PrimFunc& f, Stmt body);

// The lowering report: lines a pass adds to f's attribute "lowering_report" to say what it
// decided (the instruction a T.gemm runs on, a pipeline's stages...), read by
// JITKernel.get_lowering_report().
PrimFunc with_report(const PrimFunc& f, const std::vector<std::string>& lines);

}  // namespace tl
