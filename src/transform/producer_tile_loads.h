// Tiles a block loads once for each run of its TMA pipeline (attention's query tile, copied
// before the loop over key tiles) are loaded by the pipeline's producer too: one TMA load
// on an mbarrier pair of their own, issued just before the run's first stage. The load then
// overlaps the pipeline's set-up instead of preceding it. Where the loop runs again (a
// persistent kernel's work items) and the shared memory allows, the tiles get two buffers:
// the next item's load overlaps this item's loop and epilogue, and the next item's first
// pipeline stages follow without waiting for this item's release.
#pragma once
#include "target/target.h"
#include "transform/pass.h"

namespace tl {

PrimFunc producer_tile_loads(const PrimFunc& f, const Target& target);

}  // namespace tl
