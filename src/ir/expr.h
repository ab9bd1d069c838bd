// Expressions of the IR. Nodes are immutable and shared; a pass that changes an
// expression builds a new node. Variables and buffers have identity (pointer equality).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/span.h"

namespace tl {

enum class ExprKind : uint8_t {
  IntImm,
  FloatImm,
  StringImm,
  Var,
  Binary,
  Not,
  Select,
  Cast,
  BufferLoad,
  Call,
};

struct ExprNode {
  ExprKind kind;
  DataType dtype;
  Span span;
  ExprNode(ExprKind k, DataType t, Span s) : kind(k), dtype(t), span(s) {}
  virtual ~ExprNode() = default;
};
using Expr = std::shared_ptr<const ExprNode>;

struct BufferNode;
using Buffer = std::shared_ptr<const BufferNode>;

struct IntImmNode : ExprNode {
  int64_t value;
  IntImmNode(DataType t, int64_t v, Span s = {}) : ExprNode(ExprKind::IntImm, t, s), value(v) {}
};

struct FloatImmNode : ExprNode {
  double value;
  FloatImmNode(DataType t, double v, Span s = {}) : ExprNode(ExprKind::FloatImm, t, s), value(v) {}
};

struct StringImmNode : ExprNode {
  std::string value;
  StringImmNode(std::string v, Span s = {})
      : ExprNode(ExprKind::StringImm, DataType::Handle(), s), value(std::move(v)) {}
};

struct VarNode : ExprNode {
  std::string name;
  VarNode(std::string n, DataType t, Span s = {}) : ExprNode(ExprKind::Var, t, s), name(std::move(n)) {}
};
using Var = std::shared_ptr<const VarNode>;

enum class BinaryOp : uint8_t {
  Add, Sub, Mul,
  Div,       // true division for floats, truncating for integers
  Mod,       // truncating remainder (C semantics)
  FloorDiv, FloorMod,
  Min, Max,
  EQ, NE, LT, LE, GT, GE,
  And, Or,   // logical, of bools
  // Bitwise operations of integers (C's &, |, ^, <<, >>), both operands of the result's type.
  // A shift amount must lie in [0, bits of the type); >> of a signed value is arithmetic.
  // There is no unary complement: ~x is BitXor(x, all-ones of x's type), which every
  // analysis and generator handles as an xor (the printer shows it as ~x).
  BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight,
};
const char* binary_op_name(BinaryOp op);  // "add", "floordiv", "bitwise_and", ...
bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);
bool is_bitwise(BinaryOp op);  // BitAnd, BitOr, BitXor and the shifts
bool is_shift(BinaryOp op);

struct BinaryNode : ExprNode {
  BinaryOp op;
  Expr a, b;
  BinaryNode(BinaryOp o, DataType t, Expr x, Expr y, Span s = {})
      : ExprNode(ExprKind::Binary, t, s), op(o), a(std::move(x)), b(std::move(y)) {}
};

struct NotNode : ExprNode {
  Expr a;
  NotNode(Expr x, Span s = {}) : ExprNode(ExprKind::Not, DataType::Bool(), s), a(std::move(x)) {}
};

struct SelectNode : ExprNode {
  Expr cond, true_value, false_value;
  SelectNode(Expr c, Expr t, Expr f, Span s = {})
      : ExprNode(ExprKind::Select, t->dtype, s),
        cond(std::move(c)), true_value(std::move(t)), false_value(std::move(f)) {}
};

struct CastNode : ExprNode {
  Expr value;
  CastNode(DataType t, Expr v, Span s = {}) : ExprNode(ExprKind::Cast, t, s), value(std::move(v)) {}
};

struct BufferLoadNode : ExprNode {
  Buffer buffer;
  std::vector<Expr> indices;
  BufferLoadNode(DataType t, Buffer b, std::vector<Expr> idx, Span s = {})
      : ExprNode(ExprKind::BufferLoad, t, s), buffer(std::move(b)), indices(std::move(idx)) {}
};

// A call to a named intrinsic: math functions ("exp", "sqrt", ...), "thread_index", ...
// The set of names is listed in ir/intrinsics.h.
struct CallNode : ExprNode {
  std::string op;
  std::vector<Expr> args;
  CallNode(DataType t, std::string o, std::vector<Expr> a, Span s = {})
      : ExprNode(ExprKind::Call, t, s), op(std::move(o)), args(std::move(a)) {}
};

// Downcast helpers: as<IntImmNode>(e) returns nullptr when e is of another kind.
template <typename T>
const T* as(const Expr& e) {
  return e ? dynamic_cast<const T*>(e.get()) : nullptr;
}

// Small constructors used everywhere.
inline Expr make_int(int64_t v, DataType t = DataType::Int(32), Span s = {}) {
  return std::make_shared<IntImmNode>(t, v, s);
}
inline Expr make_float(double v, DataType t = DataType::Float(32), Span s = {}) {
  return std::make_shared<FloatImmNode>(t, v, s);
}
inline Expr make_bool(bool v, Span s = {}) { return std::make_shared<IntImmNode>(DataType::Bool(), v, s); }
inline Var make_var(std::string name, DataType t = DataType::Int(32), Span s = {}) {
  return std::make_shared<VarNode>(std::move(name), t, s);
}
// The constant value of an integer immediate, if e is one.
inline const int64_t* const_int(const Expr& e) {
  auto* imm = as<IntImmNode>(e);
  return imm ? &imm->value : nullptr;
}

}  // namespace tl
