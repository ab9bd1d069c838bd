// Helpers shared by the tile operators: squeezing and matching regions, building the
// indices of a region from loop variables, bounds guards, user-error checks on regions,
// and the operator definitions the registry lists.
#pragma once
#include <string>
#include <vector>

#include "arith/analyzer.h"
#include "ir/stmt.h"
#include "op/op.h"

namespace tl {

// ---------------------------------------------------------------- expressions

// Equal constants, structurally equal expressions, or an equality the analyzer proves.
bool provably_equal(const Expr& a, const Expr& b, arith::Analyzer& analyzer);
// An expression for messages: constants and variables directly, the rest via the printer.
std::string expr_str(const Expr& e);
// "128 x 32"; "scalar" for an empty list.
std::string extents_str(const std::vector<Expr>& extents);
// "A_shared" for a full region, "A[0:128, k * 32:k * 32 + 32]" otherwise.
std::string region_str(const BufferRegion& r);
std::vector<Expr> region_extents(const BufferRegion& r);

// ---------------------------------------------------------------- squeezing and matching

// The dimensions of r whose extent is not the constant 1: those a loop nest runs over.
std::vector<int> non_unit_dims(const BufferRegion& r);
std::vector<Expr> squeezed_extents(const BufferRegion& r);
// Throws a Shape error at span unless a and b match (equal extents once unit extents are
// dropped). op_name is the user's spelling, e.g. "T.copy".
void check_regions_match(const std::string& op_name, const BufferRegion& a, const BufferRegion& b,
                         arith::Analyzer& analyzer, Span span);
// The loop extents of two matching regions, preferring the constant one of each pair.
std::vector<Expr> matched_extents(const BufferRegion& a, const BufferRegion& b);
// The region that an operand written as one element, `A[i, j]`, stands for when the other
// operand is a tile with extents `tile` (T.copy(A[i, j], tile)): it starts at the element
// and takes the tile's extents dimension for dimension, aligned to A's trailing dimensions
// (a tile of lower rank is padded with leading extents of 1). A tile of higher rank drops
// extents of 1, first to last, until the ranks agree; a Shape error at span when it cannot.
// So an (8, 1) tile at A[i, j] is the column A[i:i + 8, j], never the row A[i, j:j + 8].
BufferRegion region_at_point(const Buffer& b, const std::vector<Expr>& indices, const std::vector<Expr>& tile,
                             const std::string& op_name, Span span);

// ---------------------------------------------------------------- indices and guards

// Indices into r's buffer at one point of its squeezed iteration space: min + var on the
// non-unit dims (vars in order), min on the unit dims.
std::vector<Expr> region_indices(const BufferRegion& r, const std::vector<Expr>& vars, Span span);
// Whether accesses to b can run past its shape legitimately and so are guarded: global
// tensors (tails) and buffers of symbolic shape. Other buffers are checked instead.
bool is_guarded_buffer(const Buffer& b);
// The conjunction of those in-bounds conditions of an access at `indices` (a point inside
// region r) that the analyzer cannot prove; nullptr when none is left or r's buffer is
// not guarded.
Expr in_bounds(const BufferRegion& r, const std::vector<Expr>& indices, arith::Analyzer& analyzer, Span span);
// A load that yields 0 out of bounds.
Expr guarded_load(const BufferRegion& r, const std::vector<Expr>& indices, arith::Analyzer& analyzer,
                  Span span);
// A store of cast(buffer dtype, value) that is skipped out of bounds.
Stmt guarded_store(const BufferRegion& r, Expr value, const std::vector<Expr>& indices,
                   arith::Analyzer& analyzer, Span span);
// Wraps body in IfThenElse(cond) unless cond is null.
Stmt guard(const Expr& cond, Stmt body, Span span);
Expr make_load(const Buffer& b, std::vector<Expr> indices, Span span);

// ---------------------------------------------------------------- loops and scopes

// New loop variables over [0, extent) for a lowering, bound in the analyzer from
// construction to destruction so guards inside can be proven.
class LoopNest {
 public:
  // Variables are named names[k] when given, else prefix0, prefix1, ...
  LoopNest(std::vector<Expr> extents, arith::Analyzer& analyzer, Span span, const std::string& prefix = "i",
           std::vector<std::string> names = {});
  ~LoopNest();
  LoopNest(const LoopNest&) = delete;
  LoopNest& operator=(const LoopNest&) = delete;

  const std::vector<Expr>& vars() const { return vars_; }
  const std::vector<Expr>& extents() const { return extents_; }
  // The loops around body, outermost first, all of one kind.
  Stmt wrap(Stmt body, ForKind kind) const;

 private:
  std::vector<Expr> extents_;
  std::vector<Expr> vars_;
  arith::Analyzer& analyzer_;
  Span span_;
};

// Binds v to the values of [min, min + extent) as far as constant bounds tell.
void bind_loop_var(arith::Analyzer& analyzer, const VarNode* v, const Expr& min, const Expr& extent);
// A fresh one-element local.var buffer (a scalar accumulator).
Buffer make_scalar_buffer(const std::string& name, DataType dtype, Span span);

// ---------------------------------------------------------------- user-error checks

// Throws unless op has n regions (the front end builds them; a wrong count is a bug).
void require_regions(const TileOpNode& op, size_t n, const std::string& op_name);
// Shape error for a region whose rank differs from its buffer's; Bounds error for a
// constant region outside a non-global buffer of constant shape, or wholly outside a
// global one.
void check_region(const std::string& op_name, const BufferRegion& r, Span span);
// Integer / string attributes with a default when absent.
int64_t attr_int(const TileOpNode& op, const std::string& key, int64_t fallback);
std::string attr_str(const TileOpNode& op, const std::string& key, const std::string& fallback);

// ---------------------------------------------------------------- operator definitions

const TileOpDef& copy_op();        // copy.cc
const TileOpDef& fill_op();        // fill.cc
const TileOpDef& gemm_op();        // gemm.cc
const TileOpDef& reduce_op();      // reduce.cc
const TileOpDef& finalize_reducer_op();
// T.reducer_update(acc[i], value) (a call the front end emits) as the store acc[i] = value;
// null for any other statement. The back ends' lowerings turn the calls into stores once
// T.Parallel's iterations are placed (transform/lower_to_threads.cc, lower_tile_ops.cc).
Stmt reducer_update_as_store(const EvaluateNode* n);
const TileOpDef& cumsum_op();      // cumsum.cc
const TileOpDef& atomic_add_op();  // atomic.cc
const TileOpDef& atomic_max_op();
const TileOpDef& atomic_min_op();
const TileOpDef& print_op();  // print.cc
const TileOpDef& annotate_layout_op();  // annotate_layout.cc

}  // namespace tl
