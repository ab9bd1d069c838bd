// Stores the shared buffers that layout inference chose to swizzle in their swizzled order.
#pragma once
#include <unordered_map>

#include "ir/stmt.h"
#include "layout/swizzle.h"

namespace tl {

// Every access S[..., r, c] to a buffer of `swizzled` becomes S[..., r, c'] with the column
// permuted in 16-byte chunks (layout/swizzle.h; the key is taken from r % 8):
//     c' = ((c / vec) ^ key(r)) * vec + c % vec,   vec = elements per 16 bytes.
// Inside a Vectorized loop the chunk is computed from the first lane's column: a vector
// access is aligned to its size (at most 16 bytes), so it never leaves its chunk.
// Runs on thread-level code, after every lowering has produced plain element accesses.
Stmt apply_swizzles(const Stmt& body, const std::unordered_map<const BufferNode*, SharedSwizzle>& swizzled);

}  // namespace tl
