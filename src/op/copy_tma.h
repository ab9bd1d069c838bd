// The TMA lowering of T.copy (op/copy_tma.cc).
#pragma once
#include <utility>
#include "ir/stmt.h"
#include <string>

#include "op/thread_context.h"
#include "target/target.h"

namespace tl {

// A global -> shared T.copy marked `tma` by the software pipeline, its mbarrier element in
// args[0]: one tma_load per panel of the shared tile, issued by the calling thread. By hand
// (T.tma_copy, attr `by_hand`): the executing threads' first adds the tile's bytes to the
// mbarrier's phase and issues the loads; the program arrives and waits itself.
Stmt lower_copy_tma(const TileOpNode& op, ThreadContext& ctx);

// Why a global -> shared T.copy cannot be a TMA load on this target (empty when it can): a
// 2-D shared tile (a stage of a multi-buffered one) of at most 256 rows of a multiple of 32
// bytes, or a 1-D tile of one row of at most 256 elements, of whole rows along the tensor's
// contiguous dimension, in the tensor's dtype, the tensor's strides constant multiples of 16
// bytes.
std::string why_not_tma_load(const TileOpNode& op, const Target& target);

// Whether a TMA copy moves a single row (its global region has one extent other than 1): such
// a tile is stored unswizzled, one box (the hardware would swizzle each 128 bytes by their
// shared address, which a one-row tile's readers cannot follow).
bool tma_moves_one_row(const TileOpNode& op);

// The bytes a TMA load of op brings (the whole destination tile).
int64_t tma_load_bytes(const TileOpNode& op);

// Why a shared -> global T.copy cannot be a TMA store on this target (empty when it can): a
// whole 2-D shared tile of at most 256 rows of a multiple of 32 bytes, into rows along the
// tensor's contiguous dimension whose strides are constant multiples of 16 bytes.
// T.atomic_add(G[...], S, use_tma=True) is the same store made a reduction (float16,
// bfloat16, float32).
std::string why_not_tma_store(const TileOpNode& op, const Target& target);

// The shared tile and the global region of such a store (null for other operators).
std::pair<const BufferRegion*, const BufferRegion*> tma_store_regions(const TileOpNode& op);

// A shared -> global T.copy layout inference chose for TMA: the block's first thread stores
// the tile, one box per panel of its shared layout, and waits until the boxes are read, so
// the tile may be written again once the block has passed a barrier. Edges of the tensor
// are clipped by the hardware.
Stmt lower_copy_tma_store(const TileOpNode& op, ThreadContext& ctx);

}  // namespace tl
