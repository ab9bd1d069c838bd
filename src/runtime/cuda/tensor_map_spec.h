// What a kernel's TMA tensor map describes, known when the kernel is generated: the element
// type, the box (the tile one cp.async.bulk.tensor moves) and the shared-memory swizzle.
// The global tensor's address, shape and strides are known only at launch (tensor_map.h).
// Kept apart from the encoder so that the code generator can carry it without runtime code.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace tl {

struct TensorMapSpec {
  DataType dtype;
  std::vector<int64_t> box;  // box extent per dimension of the global tensor, outermost first
  int swizzle_bytes = 0;     // 0 (none), 32, 64 or 128
  // The tensor's dimensions in the order it is stored (a layout by hand that reorders
  // them), outermost first; empty: its own order. The box is in the stored order.
  std::vector<int64_t> order;
};

}  // namespace tl
