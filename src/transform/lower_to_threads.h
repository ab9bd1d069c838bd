// GPU targets: tile-level kernels become the program each thread runs.
#pragma once
#include "target/target.h"
#include "transform/pass.h"

namespace tl {

// Infers fragment layouts, partitions every T.Parallel nest over the threads by the layout
// of the fragment it walks (or a default share of its iteration space), lowers tile
// operators through their thread-level lowerings, and turns each fragment into a
// per-thread local array. T.Pipelined loops become serial (software pipelining comes
// later as its own pass).
PrimFunc lower_to_threads(const PrimFunc& f, const Target& target);

}  // namespace tl
