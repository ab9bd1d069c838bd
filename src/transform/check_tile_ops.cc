#include "transform/check_tile_ops.h"

#include <algorithm>
#include <limits>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "op/op.h"
#include "op/region.h"

namespace tl {
namespace {

// ---------------------------------------------------------------- launch shapes and extents
// The one place where the extents a program states are validated, before any pass divides
// by one or sizes an array with it: block grids, threads per block, loop extents,
// allocation and tensor shapes. Symbolic extents are checked for their dtype only.

// An extent must be an integer; a constant one at least `lowest`.
void check_extent(const Expr& e, int64_t lowest, const std::string& what, Span span, const std::string& hint) {
  if (!e->dtype.is_integer())
    fail(ErrorKind::Type, span, what + " must be an integer, got " + expr_str(e) + " of dtype " + e->dtype.str(),
         "extents are ints: use // or T.ceildiv instead of /, or int(...) on a Python value");
  const int64_t* c = const_int(e);
  if (c && *c < lowest)
    fail(ErrorKind::Shape, span,
         what + " is " + std::to_string(*c) + "; it must be at least " + std::to_string(lowest), hint);
}

// A buffer's size in bytes is computed by every later pass and code generator in int64;
// block-private buffers (shared, fragment, local) are indexed with 32-bit offsets.
constexpr int64_t kMaxBlockPrivateBytes = (int64_t(1) << 31) - 1;

void check_buffer_size(const Buffer& b, const std::string& kind) {
  int64_t bytes = std::max(1, b->dtype.bytes());
  bool overflow = false;
  for (auto& e : b->shape) {
    const int64_t* v = const_int(e);
    if (!v) return;  // symbolic: checked where it is known
    overflow = overflow || __builtin_mul_overflow(bytes, *v, &bytes);
  }
  std::string what = kind + " '" + b->name + "' of shape " + extents_str(b->shape) + " and dtype " + b->dtype.str();
  if (overflow)
    fail(ErrorKind::Shape, b->span, what + " has more than 2^63 bytes: its size overflows",
         "check the shape's arithmetic (a product of extents that should have been a sum?)");
  if (!b->is_global() && bytes > kMaxBlockPrivateBytes)
    fail(ErrorKind::Unsupported, b->span,
         what + " needs " + std::to_string(bytes) + " bytes; a block-private buffer (shared, fragment, local) "
         "holds at most 2^31 - 1 bytes (its offsets are 32-bit)",
         "tile the data: keep the whole tensor in global memory and copy tiles of it");
}

void check_buffer_shape(const Buffer& b, const std::string& kind) {
  for (size_t d = 0; d < b->shape.size(); ++d)
    check_extent(b->shape[d], 1, kind + " '" + b->name + "': extent " + std::to_string(d) + " of its shape " +
                 extents_str(b->shape), b->span, "every dimension of a buffer holds at least one element");
  check_buffer_size(b, kind);
}

const char* const kKnownOps =
    "copy, fill, clear, gemm, reduce_sum/max/min/abssum/absmax, cumsum, atomic_add/max/min, print";

class TileOpChecker : public IRVisitor {
 public:
  using IRVisitor::visit;

  // Shape variables of the parameters are extents: never negative.
  void bind_shape_vars(const PrimFuncNode& f) {
    for (auto& v : shape_vars(f))
      analyzer_.bind(v.get(), arith::ConstIntBound{0, arith::ConstIntBound::kPosInf});
  }

 protected:
  void visit_for(const ForNode* n) override {
    // A T.Parallel loop is a tile: at least one element. Other loops may run zero times
    // (a trip count that happens to be 0 is valid), but their extents are integers.
    bool tile = n->for_kind == ForKind::Parallel;
    check_extent(n->extent, tile ? 1 : std::numeric_limits<int64_t>::min(),
                 std::string(tile ? "T.Parallel" : "loop") + " extent of '" + n->var->name + "'", n->span,
                 "a T.Parallel loop covers a tile of at least one element");
    if (!n->min->dtype.is_integer())
      fail(ErrorKind::Type, n->span, "the start of loop '" + n->var->name + "' must be an integer, got " +
                                         expr_str(n->min) + " of dtype " + n->min->dtype.str());
    if (n->for_kind == ForKind::Pipelined) check_pipeline_attrs(n);
    bind_loop_var(analyzer_, n->var.get(), n->min, n->extent);
    IRVisitor::visit_for(n);
    analyzer_.unbind(n->var.get());
  }
  void visit_let(const LetStmtNode* n) override {
    if (n->var->dtype.is_integer()) analyzer_.bind(n->var.get(), analyzer_.const_int_bound(n->value));
    IRVisitor::visit_let(n);
    analyzer_.unbind(n->var.get());
  }
  void visit_store(const BufferStoreNode* n) override {
    check_indices(n->buffer, n->indices, n->span);
    IRVisitor::visit_store(n);
  }
  void visit_load(const BufferLoadNode* n) override {
    check_indices(n->buffer, n->indices, n->span);
    IRVisitor::visit_load(n);
  }
  void visit_allocate(const AllocateNode* n) override {
    check_buffer_shape(n->buffer, "buffer");
    IRVisitor::visit_allocate(n);
  }
  void visit_kernel(const KernelNode* n) override {
    static const char* const kAxis[] = {"x", "y", "z"};
    for (size_t d = 0; d < n->grid.size(); ++d)
      check_extent(n->grid[d], 1, "T.Kernel: grid extent " + std::to_string(d), n->span,
                   "a kernel launches at least one block in every grid dimension");
    for (size_t d = 0; d < n->threads.size(); ++d)
      if (n->threads[d] < 1)
        fail(ErrorKind::Shape, n->span,
             std::string("T.Kernel: threads") + (n->threads.size() > 1 ? std::string(" (") + kAxis[d] + ")" : "") +
                 " is " + std::to_string(n->threads[d]) + "; a block has at least one thread in every dimension",
             "write threads=128 (or a list such as threads=[32, 4])");
    for (size_t d = 0; d < n->block_vars.size() && d < n->grid.size(); ++d)
      bind_loop_var(analyzer_, n->block_vars[d].get(), make_int(0), n->grid[d]);
    for (size_t d = 0; d < n->thread_vars.size() && d < n->threads.size(); ++d)
      bind_loop_var(analyzer_, n->thread_vars[d].get(), make_int(0), make_int(n->threads[d]));
    IRVisitor::visit_kernel(n);
    for (auto& v : n->block_vars) analyzer_.unbind(v.get());
    for (auto& v : n->thread_vars) analyzer_.unbind(v.get());
  }
  void visit_tile_op(const TileOpNode* n) override {
    const TileOpDef* def = find_tile_op(n->op);
    if (!def)
      fail(ErrorKind::Name, n->span, "unknown tile operator 'T." + n->op + "'",
           std::string("the tile operators are ") + kKnownOps);
    def->check(*n, analyzer_);
    IRVisitor::visit_tile_op(n);
  }

 private:
  // Statements of a loop body as the user wrote them: allocations and lets scope over the
  // statements after them and are not statements of their own.
  static int64_t count_statements(const Stmt& s) {
    if (!s) return 0;
    if (auto* q = dynamic_cast<const SeqStmtNode*>(s.get())) {
      int64_t n = 0;
      for (auto& x : q->seq) n += count_statements(x);
      return n;
    }
    if (auto* a = dynamic_cast<const AllocateNode*>(s.get())) return count_statements(a->body);
    if (auto* l = dynamic_cast<const LetStmtNode*>(s.get())) return count_statements(l->body);
    return 1;
  }

  // num_stages >= 0; order and stage of the same length, at most one entry per statement of
  // the body.
  static void check_pipeline_attrs(const ForNode* n) {
    auto it = n->attrs.find("num_stages");
    if (it != n->attrs.end())
      if (auto* v = std::get_if<int64_t>(&it->second); v && *v < 0)
        fail(ErrorKind::Shape, n->span, "T.Pipelined: num_stages is " + std::to_string(*v) + "; it must be >= 0",
             "num_stages=0 runs the loop without overlap; 2 or 3 overlaps copies with compute");
    auto list = [&](const char* key) -> const std::vector<int64_t>* {
      auto f = n->attrs.find(key);
      return f == n->attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&f->second);
    };
    const std::vector<int64_t>*order = list("order"), *stage = list("stage");
    if (order && stage && order->size() != stage->size())
      fail(ErrorKind::Shape, n->span,
           "T.Pipelined: order has " + std::to_string(order->size()) + " entries but stage has " +
               std::to_string(stage->size()),
           "give one order and one stage entry per statement of the loop body");
    int64_t statements = count_statements(n->body);
    for (auto [key, v] : {std::pair{"order", order}, std::pair{"stage", stage}})
      if (v && int64_t(v->size()) > statements)
        fail(ErrorKind::Shape, n->span,
             std::string("T.Pipelined: ") + key + " has " + std::to_string(v->size()) +
                 " entries but the loop body has " + std::to_string(statements) + " statement(s)",
             "give one entry per statement of the loop body");
  }

  // Indices are integers (a float index would be truncated somewhere below, silently).
  static void check_indices(const Buffer& b, const std::vector<Expr>& indices, Span span) {
    for (size_t d = 0; d < indices.size(); ++d)
      if (!indices[d]->dtype.is_integer())
        fail(ErrorKind::Type, span,
             "index " + std::to_string(d) + " of buffer '" + b->name + "' must be an integer, got " +
                 expr_str(indices[d]) + " of dtype " + indices[d]->dtype.str(),
             "use // instead of /, or T.cast(..., \"int32\") on purpose");
  }

  arith::Analyzer analyzer_;
};

}  // namespace

PrimFunc check_tile_ops(const PrimFunc& f) {
  for (auto& p : f->params)
    if (p.is_buffer()) check_buffer_shape(p.buffer, "tensor");
  TileOpChecker checker;
  checker.bind_shape_vars(*f);
  checker.visit(f->body);
  return f;
}

}  // namespace tl
