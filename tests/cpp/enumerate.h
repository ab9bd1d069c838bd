// Enumeration helpers the layout tests share: checks by visiting every index of a tile.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "layout/layout.h"

namespace tl::testing {

using Index = std::vector<int64_t>;

// Calls fn on every index of `shape`, in row-major order.
inline void for_each_index(const Index& shape, const std::function<void(const Index&)>& fn) {
  int64_t n = shape_size(shape);
  for (int64_t flat = 0; flat < n; ++flat) fn(unflatten_row_major(flat, shape));
}

}  // namespace tl::testing
