// Read top to bottom: the passes a kernel goes through on its way to the CPU.
// Each tile runs as one program per block (one OpenMP task); T.Parallel becomes a loop
// nest, fragments and shared buffers become block-private arrays.
#include "transform/pipeline/cpu.h"

#include "transform/check_block_budget.h"
#include "transform/check_buffer_bounds.h"
#include "transform/check_register_bounds.h"
#include "transform/check_cluster.h"
#include "transform/check_tile_ops.h"
#include "transform/apply_user_layouts.h"
#include "transform/legalize_safe_memory_access.h"
#include "transform/lower_tile_ops.h"
#include "transform/pass.h"
#include "transform/simplify.h"
#include "transform/version_uniform_conditions.h"
#include "transform/verify_cpu.h"

namespace tl {

PrimFunc lower_for_cpu(const PrimFunc& f, const Target& target) {
  std::vector<Pass> passes = {
      // User errors first, while the program still looks like what the user wrote.
      {"check_tile_ops", check_tile_ops},
      // A buffer with a T.Layout by hand is addressed by the threads through it: its copies
      // stay off TMA; views of it and (on GPUs) T.gemm operands in it are refused.
      {"check_user_layouts", [&](const PrimFunc& g) { return check_user_layouts(g, target); }},
      // Clusters fit the target and the grid; multicasts and remote arrivals have a cluster.
      {"check_cluster", [&](const PrimFunc& g) { return check_cluster(g, target); }},
      {"check_buffer_bounds", check_buffer_bounds},
      {"verify_cpu", verify_cpu},
      // Element accesses written by hand that may run past a global tensor get guards.
      {"legalize_safe_memory_access", legalize_safe_memory_access},
      // A mask that holds for the whole tile in most runs (causal, ragged edge) gets a
      // block-uniform test and a copy of its loop without it.
      {"version_uniform_conditions", version_uniform_conditions},
      // Tile operators become loops over their regions, with bounds guards for tails.
      {"lower_tile_ops", [&](const PrimFunc& g) { return lower_tile_ops(g, target); }},
      // Accesses to a buffer with a T.Layout by hand go to the positions it gives.
      {"apply_user_layouts", apply_user_layouts},
      // Fold index arithmetic and drop the guards that block/loop ranges prove true.
      {"simplify", simplify},
      // No per-thread (local) array is read or written past its end.
      {"check_register_bounds", check_register_bounds},
      // What one launch asks for (grid, threads, shared memory) fits the exact target.
      {"check_block_budget", [&](const PrimFunc& g) { return check_block_budget(g, target); }},
  };
  return run_passes(f, passes);
}

}  // namespace tl
