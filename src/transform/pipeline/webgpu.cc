// Read top to bottom: the passes a kernel goes through on its way to WGSL. The thread-level
// lowering is the CUDA back end's; with no cp.async there is no software pipelining, with
// no tensor cores every T.gemm is SIMT, and with no fixed subgroup size reductions exchange
// values through workgroup memory (Target::warp_size() is 1).
#include "transform/thread_range_branches.h"
#include "transform/pipeline/webgpu.h"

#include "transform/check_block_budget.h"
#include "transform/check_buffer_bounds.h"
#include "transform/check_register_bounds.h"
#include "transform/check_thread_budget.h"
#include "transform/check_cluster.h"
#include "transform/check_tile_ops.h"
#include "transform/apply_user_layouts.h"
#include "transform/insert_barriers.h"
#include "transform/legalize_safe_memory_access.h"
#include "transform/lower_to_threads.h"
#include "transform/pass.h"
#include "transform/simplify.h"
#include "transform/version_uniform_conditions.h"

namespace tl {

PrimFunc lower_for_webgpu(const PrimFunc& f, const Target& target) {
  std::vector<Pass> passes = {
      {"check_tile_ops", check_tile_ops},
      // `if tx < 128: ... else: ...` over whole warpgroups: T.ws regions.
      {"thread_range_branches", thread_range_branches},
      // A buffer with a T.Layout by hand is addressed by the threads through it: its copies
      // stay off TMA; views of it and (on GPUs) T.gemm operands in it are refused.
      {"check_user_layouts", [&](const PrimFunc& g) { return check_user_layouts(g, target); }},
      // Clusters fit the target and the grid; multicasts and remote arrivals have a cluster.
      {"check_cluster", [&](const PrimFunc& g) { return check_cluster(g, target); }},
      {"check_buffer_bounds", check_buffer_bounds},
      {"legalize_safe_memory_access", legalize_safe_memory_access},
      // Barriers are placed at tile level, where every statement is one block-wide step.
      {"insert_barriers", insert_barriers},
      // A mask that holds for the whole tile in most runs (causal, ragged edge) gets a
      // block-uniform test and a copy of its loop without it.
      {"version_uniform_conditions", version_uniform_conditions},
      // Layouts, then each thread's share of every tile operator and T.Parallel loop.
      {"lower_to_threads", [&](const PrimFunc& g) { return lower_to_threads(g, target); }},
      // Accesses to a buffer with a T.Layout by hand go to the positions it gives.
      {"apply_user_layouts", apply_user_layouts},
      {"simplify", simplify},
      {"check_register_bounds", check_register_bounds},
      // What each thread holds fits the target (else an error, not a compiler that never ends).
      {"check_thread_budget", [&](const PrimFunc& g) { return check_thread_budget(g, target); }},
      // What one launch asks for (grid, threads, shared memory) fits the exact target.
      {"check_block_budget", [&](const PrimFunc& g) { return check_block_budget(g, target); }},
  };
  return run_passes(f, passes);
}

}  // namespace tl
