// Tile operators. Each operator lives in its own file (copy.cc, fill.cc, gemm.cc, ...)
// and registers a TileOpDef: how to check a TileOpNode for user errors, and how to lower
// it to loops for a target. The encoding of each operator's regions/args/attrs is
// documented in docs/tile_ops.md.
#pragma once
#include <string>

#include "arith/analyzer.h"
#include "ir/stmt.h"
#include "target/target.h"

namespace tl {

struct LowerContext {
  const Target& target;
  arith::Analyzer& analyzer;  // knows the ranges of enclosing loop / block variables
};

struct ThreadContext;  // op/thread_context.h

struct TileOpDef {
  const char* name;
  // Throws CompileError (Shape, Type, Bounds, ...) at op.span for a bad use.
  void (*check)(const TileOpNode& op, arith::Analyzer& analyzer);
  // Lowers to loops, loads and stores at tile level (no TileOpNode in the result): the
  // whole block runs the loops as one program (the CPU back end).
  Stmt (*lower)(const TileOpNode& op, LowerContext& ctx);
  // Lowers to the code one thread runs (GPU back ends), following the layouts that
  // layout inference chose; null when the operator has no thread-level lowering yet.
  Stmt (*lower_threads)(const TileOpNode& op, ThreadContext& ctx) = nullptr;
};

// nullptr when there is no such operator.
const TileOpDef* find_tile_op(const std::string& name);

}  // namespace tl
