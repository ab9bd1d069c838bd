#include "transform/apply_swizzles.h"

#include <optional>
#include <vector>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"

namespace tl {
namespace {

Expr c(int64_t v) { return make_int(v); }

bool mentions(const Expr& e, const VarNode* v) {
  bool found = false;
  for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) { found = found || n == v; });
  return found;
}

class ApplySwizzles : public IRMutator {
 public:
  explicit ApplySwizzles(const std::unordered_map<const BufferNode*, SharedSwizzle>& swizzled) : swizzled_(swizzled) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Vectorized) return IRMutator::mutate_for(s, n);
    if (spans_two_chunks(n)) {
      // The lanes of a swizzled tile would cross a 16-byte chunk (8 float32 read for 8
      // float16 stored), and the swizzle moves chunks apart: each lane by itself.
      auto unrolled = std::make_shared<ForNode>(n->var, n->min, n->extent, ForKind::Unrolled, n->body, n->attrs,
                                                n->span);
      return IRMutator::mutate_for(unrolled, unrolled.get());
    }
    lanes_.push_back(n->var.get());
    Stmt m = IRMutator::mutate_for(s, n);
    lanes_.pop_back();
    return m;
  }
  // Whether the vector loop n reaches more than 16 bytes of a swizzled tile.
  bool spans_two_chunks(const ForNode* n) const {
    const int64_t* lanes = const_int(n->extent);
    bool wide = false;
    auto check = [&](const Buffer& b, const std::vector<Expr>& idx) {
      auto it = swizzled_.find(b.get());
      if (it == swizzled_.end() || it->second.mode == SwizzleMode::None || idx.empty()) return;
      if (!mentions(idx.back(), n->var.get())) return;
      wide = wide || !lanes || *lanes * b->dtype.bits > 128;
    };
    struct Accesses : IRVisitor {
      std::function<void(const Buffer&, const std::vector<Expr>&)> check;
      using IRVisitor::visit;
      void visit_load(const BufferLoadNode* x) override {
        check(x->buffer, x->indices);
        IRVisitor::visit_load(x);
      }
      void visit_store(const BufferStoreNode* x) override {
        check(x->buffer, x->indices);
        IRVisitor::visit_store(x);
      }
    } accesses;
    accesses.check = check;
    accesses.visit(n->body);
    return wide;
  }
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    Expr m = IRMutator::mutate_load(e, n);
    auto* l = as<BufferLoadNode>(m);
    auto idx = swizzle(l->buffer, l->indices);
    if (!idx) return m;
    return std::make_shared<BufferLoadNode>(l->dtype, l->buffer, *idx, l->span);
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    Stmt m = IRMutator::mutate_store(s, n);
    auto* st = as<BufferStoreNode>(m);
    auto idx = swizzle(st->buffer, st->indices);
    if (!idx) return m;
    return std::make_shared<BufferStoreNode>(st->buffer, st->value, *idx, st->span);
  }

 private:
  std::optional<std::vector<Expr>> swizzle(const Buffer& b, const std::vector<Expr>& indices) {
    auto it = swizzled_.find(b.get());
    if (it == swizzled_.end() || it->second.mode == SwizzleMode::None) return std::nullopt;
    if (indices.size() < 2 || indices.size() != b->shape.size())
      fail(ErrorKind::Internal, b->span, "internal: swizzled shared buffer '" + b->name + "' accessed with " +
                                            std::to_string(indices.size()) + " indices");
    const int64_t* rows = const_int(b->shape[b->shape.size() - 2]);
    const int64_t* cols = const_int(b->shape.back());
    if (!rows || !cols)
      fail(ErrorKind::Internal, b->span, "internal: swizzled shared buffer '" + b->name + "' has a symbolic shape");
    Span sp = indices.back()->span;
    const Expr& row = indices[indices.size() - 2];
    Expr col = indices.back();
    // The first lane's column inside a vector loop, and the lane's distance from it: lanes
    // stay inside one 16-byte chunk, which the swizzle never splits.
    Expr lane_offset;
    for (const VarNode* v : lanes_) {
      if (!mentions(col, v)) continue;
      Expr base = substitute(col, {{v, c(0)}});
      lane_offset = analyzer_.simplify(sub(col, base, sp));
      col = base;
    }
    auto xor_op = [&](const Expr& a, const Expr& k, int) -> Expr {
      return binary(BinaryOp::BitXor, a, k, sp);
    };
    Expr flat = swizzled_offset(row, col, *rows, *cols, b->dtype.bits, it->second, xor_op);
    if (lane_offset) flat = add(flat, lane_offset, sp);
    // The tile's element offset goes in the last index (the row index becomes 0): the
    // generated address is the same linear function of the indices.
    std::vector<Expr> out = indices;
    out[out.size() - 2] = c(0);
    out.back() = analyzer_.simplify(flat);
    return out;
  }

  const std::unordered_map<const BufferNode*, SharedSwizzle>& swizzled_;
  std::vector<const VarNode*> lanes_;
  arith::Analyzer analyzer_;
};

}  // namespace

Stmt apply_swizzles(const Stmt& body, const std::unordered_map<const BufferNode*, SharedSwizzle>& swizzled) {
  if (swizzled.empty()) return body;
  return ApplySwizzles(swizzled).mutate(body);
}

}  // namespace tl
