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
  explicit ApplySwizzles(const std::unordered_map<const BufferNode*, SwizzleMode>& swizzled) : swizzled_(swizzled) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Vectorized) return IRMutator::mutate_for(s, n);
    lanes_.push_back(n->var.get());
    Stmt m = IRMutator::mutate_for(s, n);
    lanes_.pop_back();
    return m;
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
    if (it == swizzled_.end() || it->second == SwizzleMode::None) return std::nullopt;
    if (indices.size() < 2 || indices.size() != b->shape.size())
      fail(ErrorKind::Internal, b->span, "internal: swizzled shared buffer '" + b->name + "' accessed with " +
                                            std::to_string(indices.size()) + " indices");
    Span sp = indices.back()->span;
    int64_t vec = 16 / b->dtype.bytes();
    int64_t chunks = swizzle_width_bytes(it->second) / 16;  // per segment: 2, 4 or 8
    const Expr& row = indices[indices.size() - 2];
    Expr col = indices.back();
    // The first lane's column inside a vector loop, and the lane's distance from it.
    Expr lane_offset;
    for (const VarNode* v : lanes_) {
      if (!mentions(col, v)) continue;
      Expr base = substitute(col, {{v, c(0)}});
      lane_offset = analyzer_.simplify(sub(col, base, sp));
      col = base;
    }
    Expr key = floordiv(floormod(row, c(8), sp), c(8 / chunks), sp);
    Expr chunk = std::make_shared<CallNode>(DataType::Int(32), "bitwise_xor",
                                            std::vector<Expr>{floordiv(col, c(vec), sp), key}, sp);
    Expr phys = add(mul(chunk, c(vec), sp), floormod(col, c(vec), sp), sp);
    if (lane_offset) phys = add(phys, lane_offset, sp);
    std::vector<Expr> out = indices;
    out.back() = analyzer_.simplify(phys);
    return out;
  }

  const std::unordered_map<const BufferNode*, SwizzleMode>& swizzled_;
  std::vector<const VarNode*> lanes_;
  arith::Analyzer analyzer_;
};

}  // namespace

Stmt apply_swizzles(const Stmt& body, const std::unordered_map<const BufferNode*, SwizzleMode>& swizzled) {
  if (swizzled.empty()) return body;
  return ApplySwizzles(swizzled).mutate(body);
}

}  // namespace tl
