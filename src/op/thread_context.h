// What a thread-level lowering of a tile operator knows: which thread runs the code, how
// each fragment is spread over the threads, and where to put scratch storage.
#pragma once
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "arith/analyzer.h"
#include "ir/stmt.h"
#include "layout/swizzle.h"
#include "layout/tile_partition.h"
#include "target/target.h"

namespace tl {

using LayoutMap = std::unordered_map<const BufferNode*, TilePartition>;

// How one T.gemm runs on threads: SIMT multiply-adds; mma.sync m16n8k (16 for 16-bit
// inputs, 32 for 8-bit ones) on a warps_m x warps_n grid of warps (each warp owns a
// contiguous sub-tile of C); or wgmma m64nNk on a warps_m x warps_n grid of warpgroups
// (each warpgroup owns a contiguous sub-tile of C, issued as m64 x inst_n instructions).
// On target hip: MFMA (CDNA) or WMMA (RDNA 3) on a warps_m x warps_n grid of wavefronts,
// each owning a contiguous sub-tile of C as amd.m x amd.n instruction tiles.
struct GemmInstruction {
  enum class Kind { Simt, MmaSync, Wgmma, Mfma, Wmma };
  Kind kind = Kind::Simt;
  int64_t warps_m = 1, warps_n = 1;  // warps (mma.sync), warpgroups (wgmma) or wavefronts (MFMA/WMMA)
  int64_t k = 16;       // the instruction's depth
  int64_t inst_n = 0;   // wgmma: the N of one instruction
  // MFMA / WMMA: the instruction's shape, its ISA mnemonic ("v_mfma_f32_32x32x8f16") and the
  // device header's function issuing it (tl::mfma_f32_32x32x8f16 in tl/hip/tl_hip.h).
  amd::MatrixCoreShape amd;
  std::string mnemonic, header_fn;
  std::string why_simt;  // what kept it off the tensor cores (for reports)
  // What kept it off a faster instruction it could otherwise have had (wgmma on sm_90a),
  // empty when it got the fastest one; reported and warned about.
  std::string why_not_faster;
};

// What layout inference decides for one kernel.
struct KernelLayouts {
  LayoutMap fragments;  // every local.fragment buffer
  // Shared buffers stored swizzled (the last dimension permuted in 16-byte chunks, and for
  // wgmma operands cut into panels, see layout/swizzle.h); absent ones are row-major.
  std::unordered_map<const BufferNode*, SharedSwizzle> swizzled;
  std::unordered_map<const TileOpNode*, GemmInstruction> gemms;
  // Shared -> global copies stored by TMA (op/copy_tma.h): their shared tile is in panels.
  std::unordered_set<const TileOpNode*> tma_stores;
};

struct ThreadContext {
  const Target& target;
  arith::Analyzer& analyzer;
  Expr thread;          // the flat index of the executing thread in its block
  int64_t num_threads;
  const KernelLayouts& layouts;
  // Block-level scratch buffers (shared memory) a lowering allocates; the pass wraps the
  // lowered operator in their allocations.
  std::vector<Buffer> scratch;
  // Lines for the lowering report (slower paths a lowering takes), when the pass keeps one.
  std::vector<std::string>* report = nullptr;
  // The block has threads along y or z (WebGPU's compilers then refuse the subgroup
  // builtins).
  bool multi_axis_block = false;

  // The layout of a fragment buffer; null for other scopes.
  const TilePartition* layout_of(const Buffer& b) const {
    auto it = layouts.fragments.find(b.get());
    return it == layouts.fragments.end() ? nullptr : &it->second;
  }
  // How many consecutive threads exchange registers by shuffles: a CUDA warp; a WebGPU
  // subgroup when the block is one axis of whole subgroups (a partial one has lanes that
  // hold nothing); 1 where lowerings go through shared memory alone.
  int64_t shuffle_width() const { return shuffle_width_of(target, num_threads, multi_axis_block); }
  static int64_t shuffle_width_of(const Target& target, int64_t num_threads, bool multi_axis_block) {
    int64_t w = target.warp_size();
    return target.kind == "webgpu" && (num_threads % w != 0 || multi_axis_block) ? 1 : w;
  }
  // The default spread of a tile of this shape and dtype (for shared/global work).
  TilePartition default_partition(const std::vector<int64_t>& shape, DataType t) const {
    return TilePartition::grid(shape, num_threads, t.bytes());
  }
  // Loops over the elements the executing thread owns under p, with body(index) inside
  // (guarded by the existence condition); loop variables are bound in the analyzer while
  // body is built.
  Stmt over_owned(const TilePartition& p, const std::function<Stmt(const std::vector<Expr>&)>& body,
                  Span span, const std::string& prefix = "t");
  // Every element of the fragment `frag` (laid out as p) stored at its index in `shared` by
  // the first of its holders: how a fragment reaches threads that do not hold it (the
  // caller puts the barriers around it).
  Stmt put_in_shared(const Buffer& frag, const TilePartition& p, const Buffer& shared, Span span);
  // `for name in T.unroll(n): body(name)`, the variable bound in the analyzer while the
  // body is built.
  Stmt unrolled(const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body, Span span);
  // Loops over the points of an operator's iteration space (the squeezed extents of the
  // regions it pairs) that the executing thread handles: those whose element of `driver`
  // it owns when driver is a fragment (covered whole by its region), else a default share
  // of the space. body receives the point (one index per squeezed dimension).
  Stmt over_points(const std::string& op_name, const BufferRegion& driver, const std::vector<Expr>& space,
                   const std::function<Stmt(const std::vector<Expr>&)>& body, Span span);
};

// Slot `slot` of the executing thread's registers of a fragment of rank >= 2, for
// lowerings that address registers directly (instruction operands): a load with one index
// where the fragment has several, which fragment lowering turns into `F_local[slot]`.
Expr fragment_slot(const Buffer& fragment, const Expr& slot, Span span);

// A block-wide barrier (`__syncthreads()` on CUDA), for lowerings that exchange data
// between threads through shared memory.
Stmt sync_threads(Span span);

// Marks the innermost loops of s that copy `lanes` contiguous elements of one dtype (4, 8
// or 16 bytes) between provably aligned addresses as Vectorized, so the code generator
// emits one vector access (a guard that holds for all lanes or none goes around it).
// Unaligned copies, and copies guarded lane by lane, stay scalar.
Stmt vectorize_copies(const Stmt& s, arith::Analyzer& analyzer);
// The same for the lane loops of a T.Parallel body: stores of any value whose memory loads
// that move with the lane are contiguous and aligned too (one vector store, vector loads).
Stmt vectorize_stores(const Stmt& s, arith::Analyzer& analyzer);

}  // namespace tl
