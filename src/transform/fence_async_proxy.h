// Shared memory written by ordinary stores (and by cp.async) belongs to the generic proxy;
// wgmma reads it through the async proxy, which does not see those writes ordered by a
// barrier alone. Each writing thread must issue fence.proxy.async before the barrier that
// publishes its writes.
#pragma once
#include "ir/function.h"

namespace tl {

// In kernels that issue wgmma: a `fence_proxy_async()` right before every barrier
// (`sync_threads()`, `named_barrier_sync`).
// Runs on thread-level code.
PrimFunc fence_async_proxy(const PrimFunc& f);

}  // namespace tl
