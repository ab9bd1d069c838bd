// A kernel function: parameters (buffers or scalars) and a body.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/stmt.h"

namespace tl {

// A parameter is a buffer (its data var is `var`) or a scalar (buffer is null).
struct Param {
  Var var;
  Buffer buffer;
  bool is_buffer() const { return buffer != nullptr; }
  const std::string& name() const { return buffer ? buffer->name : var->name; }
};

struct PrimFuncNode {
  std::string name;
  std::vector<Param> params;
  Stmt body;
  Attrs attrs;
  Span span;
};
using PrimFunc = std::shared_ptr<const PrimFuncNode>;

// The symbolic shape variables of the buffer parameters, in order of first appearance;
// they are bound from the shapes of the arguments at call time.
std::vector<Var> shape_vars(const PrimFuncNode& f);

}  // namespace tl
