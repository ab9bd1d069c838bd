// `with T.attr(node, "async_scope", 1):` (upstream's spelling): the copies from global to
// shared memory written inside, element by element, are issued as cp.async. Their
// completion is awaited by hand, typically by an mbarrier that the copying threads arrive
// on when their copies land (T.cp_async_barrier_noinc).
#pragma once
#include "ir/stmt.h"

namespace tl {

// Each `for v in T.vectorized(n): shared[..., c + v] = global[..., g + v]` of 4, 8 or 16
// bytes (and each single 4-, 8- or 16-byte element store shared[...] = global[...])
// becomes cp_async(&shared[..., c], &global[..., g], bytes). Any other store to shared
// memory inside the scope is an error at its line: it would not be asynchronous, and the
// barrier that awaits the scope's copies would not order it.
Stmt async_scope_copies(const Stmt& body);

}  // namespace tl
