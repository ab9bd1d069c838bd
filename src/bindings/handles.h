// Python-visible handles on IR nodes. The front end holds these opaque objects and hands
// them back to C++; expressions carry the DSL's operators so Python evaluates `i * 4 + j`
// straight into IR.
#pragma once
#include <nanobind/nanobind.h>

#include "ir/function.h"

namespace tl::py {

namespace nb = nanobind;

struct PyExpr {
  Expr e;
};
struct PyStmt {
  Stmt s;
};
struct PyBuffer {
  Buffer b;
};
struct PyFunc {
  PrimFunc f;
};

// The span every node built from Python gets: set by the parser per statement/expression.
Span& current_span();

// Python int/float/bool or PyExpr -> Expr. Throws CompileError(Type) otherwise.
Expr to_expr(nb::handle h);
std::vector<Expr> to_exprs(nb::handle seq);
// (buffer, [(min, extent), ...]) -> BufferRegion
BufferRegion to_region(nb::handle h);
Attrs to_attrs(nb::handle dict);
DataType to_dtype(const std::string& s);

void bind_ir(nb::module_& m);
void bind_compiler(nb::module_& m);
void bind_cuda(nb::module_& m);
void bind_layouts(nb::module_& m);

}  // namespace tl::py
