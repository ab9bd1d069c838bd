// The intrinsic calls the IR knows (CallNode::op), with their arity.
#pragma once
#include <string>

namespace tl {

struct IntrinsicInfo {
  const char* name;
  int arity;          // -1: variadic
  bool math;          // a float math function: integer operands are cast to float32
};

// nullptr when name is not an intrinsic.
const IntrinsicInfo* find_intrinsic(const std::string& name);

}  // namespace tl
