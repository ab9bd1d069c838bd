// Read top to bottom: the passes a kernel goes through on its way to a CUDA GPU.
// See docs/gpu_lowering.md for the plan; passes still to come are listed there.
#include "transform/pipeline/cuda.h"

#include "transform/check_barrier_protocol.h"
#include "transform/check_block_budget.h"
#include "transform/check_buffer_bounds.h"
#include "transform/check_register_bounds.h"
#include "transform/check_thread_budget.h"
#include "transform/check_cluster.h"
#include "transform/defer_tma_store_waits.h"
#include "transform/check_tile_ops.h"
#include "transform/apply_user_layouts.h"
#include "transform/inject_software_pipeline.h"
#include "transform/fence_async_proxy.h"
#include "transform/insert_barriers.h"
#include "transform/legalize_safe_memory_access.h"
#include "transform/overlap_wgmma_groups.h"
#include "transform/plan_shared_memory.h"
#include "transform/producer_tile_loads.h"
#include "transform/warp_specialize.h"
#include "transform/lower_to_threads.h"
#include "transform/pingpong_warpgroups.h"
#include "transform/pass.h"
#include "transform/simplify.h"
#include "transform/version_uniform_conditions.h"
#include "transform/stage_epilogue.h"
#include "transform/thread_range_branches.h"

namespace tl {

PrimFunc lower_for_cuda(const PrimFunc& f, const Target& target) {
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
      // T.Pipelined: copies run ahead into multi-buffered shared memory (cp.async).
      {"inject_software_pipeline", [&](const PrimFunc& g) { return inject_software_pipeline(g, target); }},
      // Tiles copied once per run of a TMA pipeline (attention's query tile) are loaded by
      // its producer too, on an mbarrier pair of their own.
      {"producer_tile_loads", [&](const PrimFunc& g) { return producer_tile_loads(g, target); }},
      // An accumulator's store to global memory after the pipeline goes through its free
      // bytes and a TMA store (sm_90a).
      {"stage_epilogue", [&](const PrimFunc& g) { return stage_epilogue(g, target); }},
      // Several T.gemm in a row (sm_90a): independent products issued back to back, each
      // waited for only where its result or an operand is next used.
      {"overlap_wgmma_groups", [&](const PrimFunc& g) { return overlap_wgmma_groups(g, target); }},
      // Shared buffers that are never alive together share bytes.
      {"plan_shared_memory", plan_shared_memory},
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
      // No per-thread register array is read or written past its end.
      {"check_register_bounds", check_register_bounds},
      // What each thread holds fits the target (else an error, not a compiler that never ends).
      {"check_thread_budget", [&](const PrimFunc& g) { return check_thread_budget(g, target); }},
      // A TMA store's wait for its tile to be read moves to the next barrier before the
      // tile is written again (in loops: the dQ reduction of attention's backward).
      {"defer_tma_store_waits", defer_tma_store_waits},
      // A TMA pipeline's producer gets a warpgroup of its own (the block grows by 128
      // threads; the code above was made and checked for the consumers' thread range).
      {"warp_specialize", warp_specialize},
      // Two independent consumer warpgroups take turns on the tensor cores (ping-pong).
      {"pingpong_warpgroups", [&](const PrimFunc& g) { return pingpong_warpgroups(g, target); }},
      // Every mbarrier wait of the pipeline has its arrivals, for any trip count.
      {"check_barrier_protocol", check_barrier_protocol},
      // wgmma reads shared memory through the async proxy: writers fence before barriers.
      {"fence_async_proxy", fence_async_proxy},
      // What one launch asks for (grid, threads, shared memory) fits the exact target.
      {"check_block_budget", [&](const PrimFunc& g) { return check_block_budget(g, target); }},
  };
  return run_passes(f, passes);
}

}  // namespace tl
