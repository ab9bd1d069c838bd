#include "arith/expr_equal.h"

namespace tl::arith {

namespace {
bool all_equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!expr_equal(a[i], b[i])) return false;
  return true;
}
}  // namespace

bool expr_equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype) return false;
  switch (a->kind) {
    case ExprKind::IntImm:
      return static_cast<const IntImmNode*>(a.get())->value == static_cast<const IntImmNode*>(b.get())->value;
    case ExprKind::FloatImm:
      return static_cast<const FloatImmNode*>(a.get())->value ==
             static_cast<const FloatImmNode*>(b.get())->value;
    case ExprKind::StringImm:
      return static_cast<const StringImmNode*>(a.get())->value ==
             static_cast<const StringImmNode*>(b.get())->value;
    case ExprKind::Var:
      return false;  // distinct variables (identity was checked above)
    case ExprKind::Binary: {
      auto* x = static_cast<const BinaryNode*>(a.get());
      auto* y = static_cast<const BinaryNode*>(b.get());
      return x->op == y->op && expr_equal(x->a, y->a) && expr_equal(x->b, y->b);
    }
    case ExprKind::Not:
      return expr_equal(static_cast<const NotNode*>(a.get())->a, static_cast<const NotNode*>(b.get())->a);
    case ExprKind::Select: {
      auto* x = static_cast<const SelectNode*>(a.get());
      auto* y = static_cast<const SelectNode*>(b.get());
      return expr_equal(x->cond, y->cond) && expr_equal(x->true_value, y->true_value) &&
             expr_equal(x->false_value, y->false_value);
    }
    case ExprKind::Cast:
      return expr_equal(static_cast<const CastNode*>(a.get())->value,
                        static_cast<const CastNode*>(b.get())->value);
    case ExprKind::BufferLoad: {
      auto* x = static_cast<const BufferLoadNode*>(a.get());
      auto* y = static_cast<const BufferLoadNode*>(b.get());
      return x->buffer == y->buffer && all_equal(x->indices, y->indices);
    }
    case ExprKind::Call: {
      auto* x = static_cast<const CallNode*>(a.get());
      auto* y = static_cast<const CallNode*>(b.get());
      return x->op == y->op && all_equal(x->args, y->args);
    }
  }
  return false;
}

}  // namespace tl::arith
