// Thread-block clusters (T.Kernel(..., cluster_dims=)) fit the target and the grid, and what
// reaches the cluster's other blocks (multicast copies, remote arrivals, the cluster's
// rank and barrier) is used where it means something: a typed error at the user's line
// otherwise. Runs first on every target.
#pragma once
#include "ir/function.h"
#include "target/target.h"

namespace tl {

PrimFunc check_cluster(const PrimFunc& f, const Target& target);

}  // namespace tl
