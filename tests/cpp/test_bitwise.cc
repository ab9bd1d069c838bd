// The bit operations of the IR (BinaryOp::BitAnd ... ShiftRight, ~x as x ^ all-ones): the typed
// constructors' rules and constant folding, the printer, and the layout evaluator's exact
// integer semantics. (The analyzer's rules are in test_arith.cc.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "expect_error.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "layout/layout.h"

namespace tl {
namespace {

using testing::contains;
using testing::expect_compile_error;

const DataType kI32 = DataType::Int(32);
const DataType kI64 = DataType::Int(64);
const DataType kU8 = DataType::UInt(8);
const DataType kU32 = DataType::UInt(32);
const DataType kBool = DataType::Bool();

Expr i32(int64_t v) { return make_int(v); }
Expr bit(BinaryOp op, Expr a, Expr b) { return binary(op, std::move(a), std::move(b)); }
int64_t folded(const Expr& e) {
  const int64_t* v = const_int(e);
  EXPECT_NE(v, nullptr) << to_string(e);
  return v ? *v : 0;
}

TEST(Bitwise, ConstantsFoldWithCSemantics) {
  EXPECT_EQ(folded(bit(BinaryOp::BitXor, i32(5), i32(3))), 6);
  EXPECT_EQ(folded(bit(BinaryOp::BitAnd, i32(-6), i32(7))), 2);
  EXPECT_EQ(folded(bit(BinaryOp::BitOr, i32(-8), i32(3))), -5);
  EXPECT_EQ(folded(bitwise_not(i32(0))), -1);
  EXPECT_EQ(folded(bitwise_not(make_int(0, kU8))), 255);
  EXPECT_EQ(folded(bitwise_not(make_int(0, kU32))), 4294967295LL);
  EXPECT_EQ(folded(bit(BinaryOp::ShiftLeft, i32(1), i32(31))), INT32_MIN);  // wraps as the type
  EXPECT_EQ(folded(bit(BinaryOp::ShiftLeft, make_int(200, kU8), make_int(1, kU8))), 144);
  EXPECT_EQ(folded(bit(BinaryOp::ShiftRight, i32(-9), i32(1))), -5);  // arithmetic
  EXPECT_EQ(folded(bit(BinaryOp::ShiftRight, make_int(0x80000000LL, kU32), i32(31))), 1);  // logical
  EXPECT_EQ(folded(bit(BinaryOp::ShiftLeft, make_int(1, kI64), make_int(40, kI64))), int64_t(1) << 40);
  EXPECT_EQ(folded(bit(BinaryOp::ShiftRight, make_int(INT64_MIN, kI64), make_int(63, kI64))), -1);
  // fold_bitwise is the shared definition; an amount outside the type has no value.
  EXPECT_FALSE(fold_bitwise(BinaryOp::ShiftLeft, kI32, 1, 32).has_value());
  EXPECT_FALSE(fold_bitwise(BinaryOp::ShiftRight, kI32, 1, -1).has_value());
  EXPECT_EQ(*fold_bitwise(BinaryOp::ShiftRight, DataType::Int(8), -128, 7), -1);
}

TEST(Bitwise, TypesAndIdentities) {
  Var x = make_var("x"), w = make_var("w", kI64), u = make_var("u", kU8);
  Expr e = bit(BinaryOp::BitAnd, x, i32(3));
  EXPECT_EQ(e->dtype, kI32);
  EXPECT_EQ(as<BinaryNode>(e)->op, BinaryOp::BitAnd);
  EXPECT_EQ(bit(BinaryOp::BitXor, x, w)->dtype, kI64);        // the wider wins, as in arithmetic
  EXPECT_EQ(bit(BinaryOp::ShiftLeft, u, i32(3))->dtype, kU8);  // a literal adopts the type
  EXPECT_EQ(bitwise_not(u)->dtype, kU8);
  EXPECT_EQ(bit(BinaryOp::BitOr, x, i32(0)), Expr(x));
  EXPECT_EQ(bit(BinaryOp::BitXor, i32(0), x), Expr(x));
  EXPECT_EQ(bit(BinaryOp::ShiftRight, x, i32(0)), Expr(x));
  EXPECT_EQ(bit(BinaryOp::BitAnd, x, i32(-1)), Expr(x));
  EXPECT_EQ(folded(bit(BinaryOp::BitAnd, x, i32(0))), 0);
  // ~x is x ^ all-ones of x's type.
  auto* n = as<BinaryNode>(bitwise_not(u));
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op, BinaryOp::BitXor);
  EXPECT_EQ(folded(n->b), 255);
  EXPECT_EQ(all_ones_value(kI32), -1);
  EXPECT_EQ(all_ones_value(DataType::UInt(16)), 65535);
  // The upstream names as calls build the operators.
  EXPECT_EQ(as<BinaryNode>(call("shift_left", {x, i32(2)}))->op, BinaryOp::ShiftLeft);
  EXPECT_EQ(folded(call("bitwise_xor", {i32(5), i32(3)})), 6);
  EXPECT_EQ(folded(call("bitwise_not", {i32(5)})), -6);
  EXPECT_THROW(call("bitwise_and", {x}), CompileError);
}

TEST(Bitwise, BoolsAreLogical) {
  Var x = make_var("x"), y = make_var("y");
  Expr p = lt(x, i32(0)), q = lt(y, i32(0));
  Expr a = bit(BinaryOp::BitAnd, p, q);
  EXPECT_EQ(a->dtype, kBool);
  EXPECT_EQ(as<BinaryNode>(a)->op, BinaryOp::And);
  EXPECT_EQ(as<BinaryNode>(bit(BinaryOp::BitOr, p, q))->op, BinaryOp::Or);
  EXPECT_EQ(as<BinaryNode>(bit(BinaryOp::BitXor, p, q))->op, BinaryOp::NE);
  EXPECT_EQ(bitwise_not(p)->kind, ExprKind::Not);
  EXPECT_EQ(to_string(bit(BinaryOp::BitAnd, p, q)), "x < 0 and y < 0");
  // A literal 0 or 1 next to a bool is a bool.
  EXPECT_EQ(bit(BinaryOp::BitAnd, p, i32(1)), p);
  EXPECT_EQ(folded(bit(BinaryOp::BitOr, make_bool(false), make_bool(true))), 1);
}

TEST(Bitwise, TypeErrors) {
  Var x = make_var("x"), f = make_var("f", DataType::Float(32));
  Expr p = lt(x, i32(0));
  CompileError e = expect_compile_error([&] { bit(BinaryOp::BitXor, f, i32(1)); });
  EXPECT_EQ(e.kind(), ErrorKind::Type);
  EXPECT_TRUE(contains(e.what(), "operator '^' takes integers, got float32")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::BitAnd, x, make_float(1.5)); });
  EXPECT_TRUE(contains(e.what(), "operator '&' takes integers, got float32")) << e.what();
  e = expect_compile_error([&] { bitwise_not(f); });
  EXPECT_TRUE(contains(e.what(), "operator '~' takes integers, got float32")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::BitAnd, p, x); });
  EXPECT_EQ(e.kind(), ErrorKind::Type);
  EXPECT_TRUE(contains(e.what(), "operator '&' on a bool and an int32")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::BitOr, i32(3), p); });
  EXPECT_TRUE(contains(e.what(), "operator '|' on a bool and an int32")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::ShiftLeft, p, i32(1)); });
  EXPECT_TRUE(contains(e.what(), "operator '<<' takes integers, got bool")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::ShiftLeft, x, i32(32)); });
  EXPECT_TRUE(contains(e.what(), "shift amount 32 is out of range for int32 (0 to 31)")) << e.what();
  e = expect_compile_error([&] { bit(BinaryOp::ShiftRight, make_var("u", kU8), i32(-1)); });
  EXPECT_TRUE(contains(e.what(), "out of range for uint8 (0 to 7)")) << e.what();
}

TEST(Bitwise, PrinterUsesPythonPrecedence) {
  Var a = make_var("a"), b = make_var("b"), c = make_var("c");
  EXPECT_EQ(to_string(bit(BinaryOp::BitAnd, a, i32(3))), "a & 3");
  EXPECT_EQ(to_string(bit(BinaryOp::BitOr, bit(BinaryOp::BitAnd, a, b), c)), "a & b | c");
  EXPECT_EQ(to_string(bit(BinaryOp::BitAnd, bit(BinaryOp::BitOr, a, b), c)), "(a | b) & c");
  EXPECT_EQ(to_string(bit(BinaryOp::BitXor, a, bit(BinaryOp::BitAnd, b, c))), "a ^ b & c");
  EXPECT_EQ(to_string(bit(BinaryOp::BitAnd, bit(BinaryOp::BitXor, a, b), c)), "(a ^ b) & c");
  EXPECT_EQ(to_string(bit(BinaryOp::ShiftLeft, add(a, b), i32(2))), "a + b << 2");
  EXPECT_EQ(to_string(add(bit(BinaryOp::ShiftLeft, a, i32(2)), b)), "(a << 2) + b");
  EXPECT_EQ(to_string(bit(BinaryOp::ShiftRight, a, bit(BinaryOp::ShiftRight, b, c))), "a >> (b >> c)");
  EXPECT_EQ(to_string(lt(bit(BinaryOp::BitAnd, a, i32(1)), b)), "a & 1 < b");
  EXPECT_EQ(to_string(bitwise_not(a)), "~a");
  EXPECT_EQ(to_string(bitwise_not(add(a, b))), "~(a + b)");
  EXPECT_EQ(to_string(mul(bitwise_not(a), b)), "~a * b");
  EXPECT_EQ(to_string(bitwise_not(make_var("u", kU8))), "~u");
  EXPECT_EQ(to_string(bit(BinaryOp::BitXor, a, i32(-2))), "a ^ -2");
  // The precedence of the other operators is unchanged.
  EXPECT_EQ(to_string(mul(add(a, b), c)), "(a + b) * c");
  EXPECT_EQ(to_string(sub(make_int(0), a)), "-a");
}

TEST(Bitwise, LayoutEvaluationIsExact) {
  Var x = make_var("x"), y = make_var("y");
  for (int64_t v = -20; v <= 20; ++v) {
    for (int64_t s = 0; s < 6; ++s) {
      IndexEnv env{{x.get(), v}, {y.get(), s}};
      EXPECT_EQ(evaluate_index(bit(BinaryOp::BitAnd, x, y), env), v & s);
      EXPECT_EQ(evaluate_index(bit(BinaryOp::BitOr, x, y), env), v | s);
      EXPECT_EQ(evaluate_index(bit(BinaryOp::BitXor, x, y), env), v ^ s);
      EXPECT_EQ(evaluate_index(bitwise_not(x), env), ~v);
      EXPECT_EQ(evaluate_index(bit(BinaryOp::ShiftLeft, x, y), env), int64_t(int32_t(uint32_t(v) << s)));
      // Arithmetic: floor division by 2^s.
      int64_t p = int64_t(1) << s;
      int64_t floor_div = v >= 0 ? v / p : -((-v + p - 1) / p);
      EXPECT_EQ(evaluate_index(bit(BinaryOp::ShiftRight, x, y), env), floor_div);
    }
  }
  // Shifts wrap as int32 does; an amount out of range is a Layout error.
  EXPECT_EQ(evaluate_index(bit(BinaryOp::ShiftLeft, x, i32(30)), {{x.get(), 3}}), -(int64_t(1) << 30));
  try {
    evaluate_index(bit(BinaryOp::ShiftLeft, x, y), {{x.get(), 1}, {y.get(), 32}});
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Layout) << e.what();
  }
  // A layout written with ^ (an XOR swizzle of the column by the row).
  Layout swz({8, 8}, [](const std::vector<Var>& v) {
    return std::vector<Expr>{v[0], binary(BinaryOp::BitXor, v[1], v[0])};
  });
  EXPECT_EQ(swz.output_shape(), (std::vector<int64_t>{8, 8}));  // from the analyzer's bound of c ^ r
  EXPECT_TRUE(swz.is_bijective());
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(swz.evaluate({r, c}), (std::vector<int64_t>{r, c ^ r}));
  Layout inv = swz.inverse();
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(inv.evaluate(swz.evaluate({r, c})), (std::vector<int64_t>{r, c}));
}

}  // namespace
}  // namespace tl
