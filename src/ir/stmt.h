// Statements of the IR, from tile level (TileOp, Kernel) down to loops and stores.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/buffer.h"
#include "ir/expr.h"

namespace tl {

// A value attached to a statement under a name (pipeline stages, reduce dims, ...).
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, Expr>;
using Attrs = std::map<std::string, AttrValue>;

enum class StmtKind : uint8_t {
  Seq,
  For,
  IfThenElse,
  BufferStore,
  LetStmt,
  Evaluate,
  Allocate,
  TileOp,
  Kernel,
  While,
};

struct StmtNode {
  StmtKind kind;
  Span span;
  StmtNode(StmtKind k, Span s) : kind(k), span(s) {}
  virtual ~StmtNode() = default;
};
using Stmt = std::shared_ptr<const StmtNode>;

template <typename T>
const T* as(const Stmt& s) {
  return s ? dynamic_cast<const T*>(s.get()) : nullptr;
}

struct SeqStmtNode : StmtNode {
  std::vector<Stmt> seq;
  SeqStmtNode(std::vector<Stmt> s, Span sp = {}) : StmtNode(StmtKind::Seq, sp), seq(std::move(s)) {}
};

enum class ForKind : uint8_t {
  Serial,      // T.serial, range
  Parallel,    // T.Parallel: iterations are independent element-wise work over the tile
  Unrolled,    // T.unroll
  Vectorized,  // T.vectorized
  Pipelined,   // T.Pipelined: attrs num_stages, order, stage
};
const char* for_kind_name(ForKind k);

struct ForNode : StmtNode {
  Var var;
  Expr min, extent;
  ForKind for_kind;
  Stmt body;
  Attrs attrs;
  ForNode(Var v, Expr mn, Expr ext, ForKind k, Stmt b, Attrs a = {}, Span sp = {})
      : StmtNode(StmtKind::For, sp), var(std::move(v)), min(std::move(mn)), extent(std::move(ext)),
        for_kind(k), body(std::move(b)), attrs(std::move(a)) {}
};

// `while cond: body` (the condition read before every iteration); a T.loop_break() in the
// body (an Evaluate of the call "loop_break") leaves the innermost loop; "loop_continue"
// goes on with its next iteration.
struct WhileNode : StmtNode {
  Expr cond;
  Stmt body;
  WhileNode(Expr c, Stmt b, Span sp = {}) : StmtNode(StmtKind::While, sp), cond(std::move(c)), body(std::move(b)) {}
};

struct IfThenElseNode : StmtNode {
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be null
  IfThenElseNode(Expr c, Stmt t, Stmt e, Span sp = {})
      : StmtNode(StmtKind::IfThenElse, sp), cond(std::move(c)), then_case(std::move(t)),
        else_case(std::move(e)) {}
};

struct BufferStoreNode : StmtNode {
  Buffer buffer;
  Expr value;
  std::vector<Expr> indices;
  BufferStoreNode(Buffer b, Expr v, std::vector<Expr> idx, Span sp = {})
      : StmtNode(StmtKind::BufferStore, sp), buffer(std::move(b)), value(std::move(v)),
        indices(std::move(idx)) {}
};

// Binds var to value within body (immutable).
struct LetStmtNode : StmtNode {
  Var var;
  Expr value;
  Stmt body;
  LetStmtNode(Var v, Expr val, Stmt b, Span sp = {})
      : StmtNode(StmtKind::LetStmt, sp), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};

struct EvaluateNode : StmtNode {
  Expr value;
  EvaluateNode(Expr v, Span sp = {}) : StmtNode(StmtKind::Evaluate, sp), value(std::move(v)) {}
};

// Storage for buffer, live within body. Attrs may carry "init" (an Expr) for local.var.
struct AllocateNode : StmtNode {
  Buffer buffer;
  Stmt body;
  Attrs attrs;
  AllocateNode(Buffer b, Stmt bd, Attrs a = {}, Span sp = {})
      : StmtNode(StmtKind::Allocate, sp), buffer(std::move(b)), body(std::move(bd)), attrs(std::move(a)) {}
};

// A tile operator: T.copy, T.fill, T.gemm, T.reduce, T.cumsum, T.atomic_*, T.print...
// Buffer operands are regions; scalar operands are args; options are attrs.
// src/op/<name>.cc states each one's checks and lowering.
struct TileOpNode : StmtNode {
  std::string op;
  std::vector<BufferRegion> regions;
  std::vector<Expr> args;
  Attrs attrs;
  TileOpNode(std::string o, std::vector<BufferRegion> r, std::vector<Expr> a, Attrs at, Span sp = {})
      : StmtNode(StmtKind::TileOp, sp), op(std::move(o)), regions(std::move(r)), args(std::move(a)),
        attrs(std::move(at)) {}
};

// with T.Kernel(grid..., threads=...) as (bx, by, ...): body
struct KernelNode : StmtNode {
  std::vector<Var> block_vars;  // bx, by, bz
  std::vector<Expr> grid;       // extents of the block indices
  std::vector<Var> thread_vars; // tx, ty, tz (reachable through T.get_thread_binding)
  std::vector<int64_t> threads; // block shape, 1-3 entries
  Stmt body;
  // Thread-block cluster shape (3 entries), empty without clusters: the blocks of a
  // cluster run at once on one GPC and reach each other's shared memory.
  std::vector<int64_t> cluster;
  KernelNode(std::vector<Var> bv, std::vector<Expr> g, std::vector<Var> tv, std::vector<int64_t> t,
             Stmt b, Span sp = {}, std::vector<int64_t> cl = {})
      : StmtNode(StmtKind::Kernel, sp), block_vars(std::move(bv)), grid(std::move(g)),
        thread_vars(std::move(tv)), threads(std::move(t)), body(std::move(b)), cluster(std::move(cl)) {}
  int64_t cluster_size() const {
    int64_t n = 1;
    for (auto c : cluster) n *= c;
    return n;
  }
  int64_t num_threads() const {
    int64_t n = 1;
    for (auto t : threads) n *= t;
    return n;
  }
};

// Builds a sequence, flattening nested sequences and dropping nulls.
Stmt make_seq(std::vector<Stmt> stmts, Span span = {});
// The statement `op(args...)`, a call for its effect (a barrier, a wait, an intrinsic).
Stmt call_stmt(const std::string& op, std::vector<Expr> args, Span span = {});

}  // namespace tl
