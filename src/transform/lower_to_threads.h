// GPU targets: tile-level kernels become the program each thread runs.
#pragma once
#include <functional>

#include "op/thread_context.h"
#include "target/target.h"
#include "transform/pass.h"

namespace tl {

// Infers fragment layouts, partitions every T.Parallel nest over the threads by the layout
// of the fragment it walks (or a default share of its iteration space), lowers tile
// operators through their thread-level lowerings, and turns each fragment into a
// per-thread local array. T.Pipelined loops become serial (software pipelining comes
// later as its own pass).
PrimFunc lower_to_threads(const PrimFunc& f, const Target& target);

// Sees what layout inference decided for each kernel that lowerings on this thread go
// through while an ObserveLayouts is alive: tools that picture layouts read them here
// instead of inferring them again. Lowering never needs an observer.
using LayoutObserver = std::function<void(const KernelNode& kernel, const KernelLayouts& layouts)>;
class ObserveLayouts {
 public:
  explicit ObserveLayouts(LayoutObserver fn);
  ~ObserveLayouts();
  ObserveLayouts(const ObserveLayouts&) = delete;
  ObserveLayouts& operator=(const ObserveLayouts&) = delete;

 private:
  LayoutObserver fn_;
  const LayoutObserver* previous_;
};

}  // namespace tl
