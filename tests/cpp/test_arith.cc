// Integer analysis: constant bounds, modular sets, the simplifier and proofs. The randomised test
// checks the simplifier and both analyses against direct evaluation.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_map>

#include "arith/analyzer.h"
#include "arith/expr_equal.h"
#include "ir/expr.h"

namespace tl::arith {
namespace {

const DataType kI32 = DataType::Int(32);
const DataType kBool = DataType::Bool();

// ------------------------------------------------------------------ construction helpers

Expr imm(int64_t v, DataType t = kI32) { return std::make_shared<IntImmNode>(t, v); }
Expr bin(BinaryOp op, Expr a, Expr b) {
  DataType t = is_comparison(op) || is_logical(op) ? kBool : a->dtype;
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b));
}
Expr add(Expr a, Expr b) { return bin(BinaryOp::Add, a, b); }
Expr sub(Expr a, Expr b) { return bin(BinaryOp::Sub, a, b); }
Expr mul(Expr a, Expr b) { return bin(BinaryOp::Mul, a, b); }
Expr fdiv(Expr a, Expr b) { return bin(BinaryOp::FloorDiv, a, b); }
Expr fmod(Expr a, Expr b) { return bin(BinaryOp::FloorMod, a, b); }
Expr tdiv(Expr a, Expr b) { return bin(BinaryOp::Div, a, b); }
Expr tmod(Expr a, Expr b) { return bin(BinaryOp::Mod, a, b); }
Expr vmin(Expr a, Expr b) { return bin(BinaryOp::Min, a, b); }
Expr vmax(Expr a, Expr b) { return bin(BinaryOp::Max, a, b); }
Expr lt(Expr a, Expr b) { return bin(BinaryOp::LT, a, b); }
Expr le(Expr a, Expr b) { return bin(BinaryOp::LE, a, b); }
Expr ge(Expr a, Expr b) { return bin(BinaryOp::GE, a, b); }
Expr eq(Expr a, Expr b) { return bin(BinaryOp::EQ, a, b); }
Expr ne(Expr a, Expr b) { return bin(BinaryOp::NE, a, b); }
Expr land(Expr a, Expr b) { return bin(BinaryOp::And, a, b); }
Expr lor(Expr a, Expr b) { return bin(BinaryOp::Or, a, b); }
Expr lnot(Expr a) { return std::make_shared<NotNode>(a); }
Expr band(Expr a, Expr b) { return bin(BinaryOp::BitAnd, a, b); }
Expr bor(Expr a, Expr b) { return bin(BinaryOp::BitOr, a, b); }
Expr bxor(Expr a, Expr b) { return bin(BinaryOp::BitXor, a, b); }
Expr shl(Expr a, Expr b) { return bin(BinaryOp::ShiftLeft, a, b); }
Expr shr(Expr a, Expr b) { return bin(BinaryOp::ShiftRight, a, b); }
// ~a as the IR stores it: a ^ all-ones (-1 for signed types).
Expr bnot(Expr a) {
  DataType t = a->dtype;
  int64_t ones = t.is_uint() && t.bits < 64 ? int64_t((uint64_t(1) << t.bits) - 1) : -1;
  return bxor(a, imm(ones, t));
}
Expr sel(Expr c, Expr t, Expr f) { return std::make_shared<SelectNode>(c, t, f); }
Expr cast_to(DataType t, Expr v) { return std::make_shared<CastNode>(t, v); }

// A compact rendering for failure messages (the tests do not depend on a printer).
std::string str(const Expr& e) {
  std::ostringstream os;
  switch (e->kind) {
    case ExprKind::IntImm: os << static_cast<const IntImmNode*>(e.get())->value; break;
    case ExprKind::FloatImm: os << static_cast<const FloatImmNode*>(e.get())->value << "f"; break;
    case ExprKind::Var: os << static_cast<const VarNode*>(e.get())->name; break;
    case ExprKind::Binary: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      os << binary_op_name(n->op) << "(" << str(n->a) << ", " << str(n->b) << ")";
      break;
    }
    case ExprKind::Not: os << "not(" << str(static_cast<const NotNode*>(e.get())->a) << ")"; break;
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      os << "select(" << str(n->cond) << ", " << str(n->true_value) << ", " << str(n->false_value) << ")";
      break;
    }
    case ExprKind::Cast: {
      auto* n = static_cast<const CastNode*>(e.get());
      os << n->dtype.str() << "(" << str(n->value) << ")";
      break;
    }
    default: os << "<expr>"; break;
  }
  return os.str();
}

int count_nodes(const Expr& e) {
  switch (e->kind) {
    case ExprKind::Binary: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      return 1 + count_nodes(n->a) + count_nodes(n->b);
    }
    case ExprKind::Not: return 1 + count_nodes(static_cast<const NotNode*>(e.get())->a);
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return 1 + count_nodes(n->cond) + count_nodes(n->true_value) + count_nodes(n->false_value);
    }
    case ExprKind::Cast: return 1 + count_nodes(static_cast<const CastNode*>(e.get())->value);
    default: return 1;
  }
}

// ------------------------------------------------------------------ reference evaluator

using Env = std::unordered_map<const VarNode*, int64_t>;

int64_t ref_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Evaluates in mathematical integers; nothing when a value leaves its dtype's range (overflow)
// or a division by zero happens.
std::optional<int64_t> eval(const Expr& e, const Env& env) {
  auto fits = [&](int64_t v) -> std::optional<int64_t> {
    DataType t = e->dtype;
    if (t.is_bool()) return v != 0;
    if (t.bits >= 64) return v;
    int64_t lo = -(int64_t(1) << (t.bits - 1)), hi = (int64_t(1) << (t.bits - 1)) - 1;
    if (v < lo || v > hi) return std::nullopt;
    return v;
  };
  switch (e->kind) {
    case ExprKind::IntImm: return static_cast<const IntImmNode*>(e.get())->value;
    case ExprKind::Var: return env.at(static_cast<const VarNode*>(e.get()));
    case ExprKind::Not: {
      auto a = eval(static_cast<const NotNode*>(e.get())->a, env);
      if (!a) return std::nullopt;
      return *a == 0;
    }
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      auto c = eval(n->cond, env);
      if (!c) return std::nullopt;
      return eval(*c ? n->true_value : n->false_value, env);
    }
    case ExprKind::Cast: {
      auto v = eval(static_cast<const CastNode*>(e.get())->value, env);
      if (!v) return std::nullopt;
      return e->dtype.is_bool() ? (*v != 0) : fits(*v);
    }
    case ExprKind::Binary: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      auto a = eval(n->a, env), b = eval(n->b, env);
      if (!a || !b) return std::nullopt;
      int64_t x = *a, y = *b, r;
      switch (n->op) {
        case BinaryOp::Add: if (__builtin_add_overflow(x, y, &r)) return std::nullopt; return fits(r);
        case BinaryOp::Sub: if (__builtin_sub_overflow(x, y, &r)) return std::nullopt; return fits(r);
        case BinaryOp::Mul: if (__builtin_mul_overflow(x, y, &r)) return std::nullopt; return fits(r);
        case BinaryOp::Div: if (y == 0) return std::nullopt; return fits(x / y);
        case BinaryOp::Mod: if (y == 0) return std::nullopt; return fits(x % y);
        case BinaryOp::FloorDiv: if (y == 0) return std::nullopt; return fits(ref_floordiv(x, y));
        case BinaryOp::FloorMod: if (y == 0) return std::nullopt; return fits(x - ref_floordiv(x, y) * y);
        case BinaryOp::Min: return std::min(x, y);
        case BinaryOp::Max: return std::max(x, y);
        case BinaryOp::EQ: return x == y;
        case BinaryOp::NE: return x != y;
        case BinaryOp::LT: return x < y;
        case BinaryOp::LE: return x <= y;
        case BinaryOp::GT: return x > y;
        case BinaryOp::GE: return x >= y;
        case BinaryOp::And: return x && y;
        case BinaryOp::Or: return x || y;
        // Two's complement bits of the (in-range) values; shifts as multiplication and floor
        // division by 2^y, only for amounts inside the type.
        case BinaryOp::BitAnd: return fits(x & y);
        case BinaryOp::BitOr: return fits(x | y);
        case BinaryOp::BitXor: return fits(x ^ y);
        case BinaryOp::ShiftLeft:
          if (y < 0 || y >= n->dtype.bits || __builtin_mul_overflow(x, int64_t(1) << y, &r)) return std::nullopt;
          return fits(r);
        case BinaryOp::ShiftRight:
          if (y < 0 || y >= n->dtype.bits) return std::nullopt;
          return fits(ref_floordiv(x, int64_t(1) << y));
      }
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

// ------------------------------------------------------------------ fixtures

class ArithTest : public ::testing::Test {
 protected:
  Var x = make_var("x"), y = make_var("y"), i = make_var("i"), j = make_var("j");
  Var bx = make_var("bx"), n = make_var("n");
  Analyzer an;
  void SetUp() override {
    an.bind(i.get(), 0, 128);
    an.bind(j.get(), 0, 4);
    an.bind(bx.get(), 0, 64);
    an.bind(n.get(), ConstIntBound{1, ConstIntBound::kPosInf});
  }
  void expect_simplifies_to(const Expr& e, const Expr& want) {
    Expr got = an.simplify(e);
    EXPECT_TRUE(expr_equal(got, want)) << str(e) << "  ->  " << str(got) << "   want " << str(want);
    EXPECT_EQ(got->dtype, e->dtype);
  }
  void expect_const(const Expr& e, int64_t v) { expect_simplifies_to(e, imm(v, e->dtype)); }
};

// ------------------------------------------------------------------ ConstIntBound

TEST_F(ArithTest, BoundOfConstantsAndVars) {
  auto b = an.const_int_bound(imm(7));
  EXPECT_EQ(b.min, 7);
  EXPECT_EQ(b.max, 7);
  b = an.const_int_bound(i);
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 127);
  b = an.const_int_bound(x);  // unknown int32: its range
  EXPECT_EQ(b.min, -(int64_t(1) << 31));
  EXPECT_EQ(b.max, (int64_t(1) << 31) - 1);
  Var w = make_var("w", DataType::Int(64));
  b = an.const_int_bound(w);
  EXPECT_EQ(b.min, ConstIntBound::kNegInf);
  EXPECT_EQ(b.max, ConstIntBound::kPosInf);
  Var u = make_var("u", DataType::UInt(8));
  b = an.const_int_bound(u);
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 255);
}

TEST_F(ArithTest, BoundOfArithmetic) {
  auto b = an.const_int_bound(add(mul(bx, imm(128)), i));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 63 * 128 + 127);
  b = an.const_int_bound(sub(i, j));
  EXPECT_EQ(b.min, -3);
  EXPECT_EQ(b.max, 127);
  b = an.const_int_bound(sub(mul(i, imm(2)), i));  // shared terms cancel: exactly i
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 127);
  b = an.const_int_bound(mul(sub(j, imm(2)), sub(i, imm(3))));
  EXPECT_EQ(b.min, -248);  // corners of [-2, 1] x [-3, 124]
  EXPECT_EQ(b.max, 124);
  b = an.const_int_bound(fdiv(sub(i, imm(64)), imm(8)));
  EXPECT_EQ(b.min, -8);
  EXPECT_EQ(b.max, 7);
  b = an.const_int_bound(tdiv(sub(i, imm(64)), imm(8)));
  EXPECT_EQ(b.min, -8);
  EXPECT_EQ(b.max, 7);
  b = an.const_int_bound(fdiv(sub(i, imm(64)), imm(-8)));
  EXPECT_EQ(b.min, -8);  // floor(63 / -8)
  EXPECT_EQ(b.max, 8);
  b = an.const_int_bound(fmod(sub(i, imm(64)), imm(8)));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 7);
  b = an.const_int_bound(fmod(i, imm(-8)));
  EXPECT_EQ(b.min, -7);
  EXPECT_EQ(b.max, 0);
  b = an.const_int_bound(tmod(sub(i, imm(64)), imm(8)));
  EXPECT_EQ(b.min, -7);
  EXPECT_EQ(b.max, 7);
  b = an.const_int_bound(fmod(add(j, imm(8)), imm(16)));  // one period: exact
  EXPECT_EQ(b.min, 8);
  EXPECT_EQ(b.max, 11);
  b = an.const_int_bound(vmin(i, j));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 3);
  b = an.const_int_bound(vmax(sub(j, imm(10)), imm(-5)));
  EXPECT_EQ(b.min, -5);
  EXPECT_EQ(b.max, -5);
  b = an.const_int_bound(sel(lt(x, imm(0)), j, add(i, imm(1000))));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 1127);
  b = an.const_int_bound(fdiv(i, n));  // symbolic positive divisor
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 127);
}

TEST_F(ArithTest, BoundSaturatesInsteadOfOverflowing) {
  Var w = make_var("w", DataType::Int(64));
  an.bind(w.get(), ConstIntBound{0, ConstIntBound::kPosInf});
  auto b = an.const_int_bound(mul(w, imm(1000, DataType::Int(64))));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, ConstIntBound::kPosInf);
  b = an.const_int_bound(sub(imm(5, DataType::Int(64)), w));
  EXPECT_EQ(b.min, ConstIntBound::kNegInf);
  EXPECT_EQ(b.max, 5);
  b = an.const_int_bound(fdiv(w, imm(4, DataType::Int(64))));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, ConstIntBound::kPosInf);
}

TEST_F(ArithTest, BoundOfCastsAndBools) {
  auto b = an.const_int_bound(cast_to(DataType::Int(8), add(i, imm(200))));  // does not fit: full range
  EXPECT_EQ(b.min, -128);
  EXPECT_EQ(b.max, 127);
  b = an.const_int_bound(cast_to(DataType::Int(8), j));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 3);
  b = an.const_int_bound(cast_to(DataType::Int(64), x));
  EXPECT_EQ(b.min, -(int64_t(1) << 31));
  b = an.const_int_bound(lt(i, imm(128)));
  EXPECT_TRUE(b.is_const());
  EXPECT_EQ(b.min, 1);
  b = an.const_int_bound(lt(i, imm(100)));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 1);
  b = an.const_int_bound(land(lt(i, imm(100)), ge(j, imm(4))));
  EXPECT_EQ(b.max, 0);
  b = an.const_int_bound(lor(lt(i, imm(100)), ge(j, imm(0))));
  EXPECT_EQ(b.min, 1);
  b = an.const_int_bound(lnot(lt(i, imm(0))));
  EXPECT_EQ(b.min, 1);
  // uint8 wraps: x - 1 may be 255.
  Var u = make_var("u", DataType::UInt(8));
  an.bind(u.get(), 0, 10);
  b = an.const_int_bound(sub(u, imm(1, DataType::UInt(8))));
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 255);
}

// ------------------------------------------------------------------ ModularSet

TEST_F(ArithTest, ModularSets) {
  auto m = an.modular_set(add(mul(x, imm(8)), imm(3)));
  EXPECT_EQ(m.coeff, 8);
  EXPECT_EQ(m.base, 3);
  m = an.modular_set(add(mul(x, imm(8)), mul(y, imm(12))));
  EXPECT_EQ(m.coeff, 4);
  EXPECT_EQ(m.base, 0);
  m = an.modular_set(sub(mul(x, imm(6)), imm(1)));
  EXPECT_EQ(m.coeff, 6);
  EXPECT_EQ(m.base, 5);
  m = an.modular_set(fdiv(add(mul(x, imm(8)), imm(4)), imm(4)));
  EXPECT_EQ(m.coeff, 2);
  EXPECT_EQ(m.base, 1);
  m = an.modular_set(fmod(add(mul(x, imm(8)), imm(5)), imm(4)));
  EXPECT_EQ(m.coeff, 0);
  EXPECT_EQ(m.base, 1);
  m = an.modular_set(mul(add(mul(x, imm(4)), imm(2)), add(mul(y, imm(6)), imm(3))));
  EXPECT_EQ(m.coeff, 12);  // 24kj + 12k + 12j + 6
  EXPECT_EQ(m.base, 6);
  m = an.modular_set(x);
  EXPECT_EQ(m.coeff, 1);
  Var k = make_var("k");
  an.bind(k.get(), 5, 1);  // extent 1: exactly 5
  m = an.modular_set(add(mul(k, imm(3)), x));
  EXPECT_EQ(m.coeff, 1);
  m = an.modular_set(mul(k, imm(3)));
  EXPECT_EQ(m.coeff, 0);
  EXPECT_EQ(m.base, 15);
  m = an.modular_set(sel(lt(x, y), mul(x, imm(4)), add(mul(y, imm(8)), imm(4))));
  EXPECT_EQ(m.coeff, 4);
  EXPECT_EQ(m.base, 0);
}

// ------------------------------------------------------------------ Simplify: linear forms

TEST_F(ArithTest, LinearCanonicalForm) {
  expect_simplifies_to(add(mul(x, imm(3)), mul(x, imm(2))), mul(x, imm(5)));
  expect_const(sub(x, x), 0);
  expect_simplifies_to(add(add(x, imm(3)), sub(y, imm(3))), add(x, y));
  expect_simplifies_to(sub(add(x, imm(1)), add(x, y)), sub(imm(1), y));
  expect_simplifies_to(mul(add(x, imm(2)), imm(4)), add(mul(x, imm(4)), imm(8)));
  expect_const(add(imm(2), mul(imm(3), imm(4))), 14);
  expect_simplifies_to(sub(mul(x, imm(2)), mul(x, imm(3))), mul(x, imm(-1)));
  expect_simplifies_to(sub(add(x, imm(0)), imm(5)), sub(x, imm(5)));
  // Products of variables stay atoms but combine as such.
  expect_simplifies_to(sub(mul(mul(x, y), imm(2)), mul(x, y)), mul(x, y));
}

TEST_F(ArithTest, ExtentOneVariableIsAConstant) {
  Var k = make_var("k");
  an.bind(k.get(), 3, 1);
  expect_simplifies_to(add(mul(k, imm(4)), x), add(x, imm(12)));
}

// ------------------------------------------------------------------ Simplify: division

TEST_F(ArithTest, TypicalIndexExpressionsReduce) {
  Expr flat = add(mul(bx, imm(128)), i);
  expect_simplifies_to(fdiv(flat, imm(128)), bx);
  expect_simplifies_to(fmod(flat, imm(128)), i);
  expect_simplifies_to(fdiv(add(mul(i, imm(4)), j), imm(4)), i);
  expect_simplifies_to(fmod(add(mul(i, imm(4)), j), imm(4)), j);
  // The quotient and remainder put back together.
  expect_simplifies_to(add(mul(fdiv(x, imm(8)), imm(8)), fmod(x, imm(8))), x);
  expect_simplifies_to(add(mul(fdiv(flat, imm(16)), imm(16)), fmod(flat, imm(16))), flat);
  // Each of these must get strictly smaller.
  for (const Expr& e : {fdiv(flat, imm(128)), fmod(flat, imm(128)), fdiv(add(mul(i, imm(4)), j), imm(4)),
                        fmod(fdiv(flat, imm(2)), imm(64)), fdiv(fmod(flat, imm(128)), imm(4))}) {
    Expr s = an.simplify(e);
    EXPECT_LT(count_nodes(s), count_nodes(e)) << str(e) << " -> " << str(s);
  }
}

TEST_F(ArithTest, FloorDivRules) {
  expect_const(fdiv(i, imm(128)), 0);
  expect_const(fdiv(add(i, imm(128)), imm(128)), 1);
  expect_const(fdiv(sub(j, imm(4)), imm(4)), -1);  // floor, not truncation
  expect_simplifies_to(fdiv(mul(x, imm(8)), imm(4)), mul(x, imm(2)));
  expect_simplifies_to(fdiv(mul(x, imm(4)), imm(8)), fdiv(x, imm(2)));
  expect_simplifies_to(fdiv(fdiv(x, imm(4)), imm(8)), fdiv(x, imm(32)));
  expect_simplifies_to(fdiv(add(mul(x, imm(8)), y), imm(4)), add(mul(x, imm(2)), fdiv(y, imm(4))));
  expect_simplifies_to(fdiv(add(mul(x, imm(-8)), j), imm(4)), mul(x, imm(-2)));
  expect_simplifies_to(fdiv(x, imm(-1)), mul(x, imm(-1)));
  expect_simplifies_to(fdiv(x, imm(1)), x);
  expect_simplifies_to(fdiv(fmod(x, imm(32)), imm(8)), fmod(fdiv(x, imm(8)), imm(4)));
  // Negative divisor: floor(x*(-4) + j) / -4 = x (j in [0, 4) only ever rounds toward x).
  expect_simplifies_to(fdiv(add(mul(x, imm(-4)), j), imm(-4)), add(x, fdiv(j, imm(-4))));
  // j in [0, 4): floordiv(j, -4) is 0 for j = 0 and -1 otherwise, so it stays.
  EXPECT_EQ(an.simplify(fdiv(j, imm(-4)))->kind, ExprKind::Binary);
}

TEST_F(ArithTest, FloorModRules) {
  expect_simplifies_to(fmod(j, imm(4)), j);
  expect_simplifies_to(fmod(add(j, imm(4)), imm(4)), j);
  expect_simplifies_to(fmod(add(j, imm(8)), imm(16)), add(j, imm(8)));
  expect_simplifies_to(fmod(add(mul(x, imm(8)), imm(5)), imm(4)), imm(1));
  expect_simplifies_to(fmod(mul(x, imm(4)), imm(8)), mul(fmod(x, imm(2)), imm(4)));
  expect_simplifies_to(fmod(fmod(x, imm(16)), imm(4)), fmod(x, imm(4)));
  expect_simplifies_to(fmod(add(x, imm(9)), imm(4)), fmod(add(x, imm(1)), imm(4)));
  expect_const(fmod(x, imm(1)), 0);
  expect_const(fmod(mul(x, imm(6)), imm(-3)), 0);
  // Negative values: floormod(j - 4, 4) = j, and with a negative divisor the result is <= 0.
  expect_simplifies_to(fmod(sub(j, imm(4)), imm(4)), j);
  expect_simplifies_to(fmod(sub(j, imm(3)), imm(-4)), sub(j, imm(3)));
}

TEST_F(ArithTest, AnOffsetInsideAnAlignedBlockStaysThere) {
  // 2x + 1 and 2x lie in the same block of 8 (2x mod 8 is at most 6): one floordiv, and
  // the floormods differ by the offset (a vector's lanes under a layout by hand).
  expect_simplifies_to(fdiv(add(mul(x, imm(2)), imm(1)), imm(8)), fdiv(x, imm(4)));
  EXPECT_TRUE(an.can_prove(eq(fmod(add(mul(x, imm(2)), imm(1)), imm(8)), add(fmod(mul(x, imm(2)), imm(8)), imm(1)))));
  EXPECT_TRUE(an.can_prove(eq(fdiv(add(mul(x, imm(4)), imm(3)), imm(16)), fdiv(x, imm(4)))));
  // 4x + 5 may cross into the next block of 8: neither rule applies.
  EXPECT_FALSE(an.can_prove(eq(fdiv(add(mul(x, imm(4)), imm(5)), imm(8)), fdiv(mul(x, imm(4)), imm(8)))));
  // A negative divisor keeps its own rules.
  EXPECT_FALSE(an.can_prove(eq(fmod(add(mul(x, imm(2)), imm(1)), imm(-8)), add(fmod(mul(x, imm(2)), imm(-8)), imm(1)))));
}

TEST_F(ArithTest, TruncatingDivisionOnlyBecomesFloorWhenNonNegative) {
  expect_simplifies_to(tdiv(add(mul(bx, imm(128)), i), imm(128)), bx);
  expect_simplifies_to(tmod(add(mul(bx, imm(128)), i), imm(128)), i);
  // x may be negative: trunc stays.
  Expr e = tdiv(x, imm(4));
  Expr s = an.simplify(e);
  auto* n = as<BinaryNode>(s);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op, BinaryOp::Div);
  expect_const(tdiv(sub(j, imm(3)), imm(4)), 0);  // in (-4, 4): truncates to 0
  expect_simplifies_to(tmod(sub(j, imm(3)), imm(4)), sub(j, imm(3)));
  expect_const(tdiv(imm(-7), imm(2)), -3);
  expect_const(tmod(imm(-7), imm(2)), -1);
  expect_const(fdiv(imm(-7), imm(2)), -4);
  expect_const(fmod(imm(-7), imm(2)), 1);
  expect_const(fmod(imm(7), imm(-2)), -1);
}

// ------------------------------------------------------------------ Simplify: min/max, compare, logic

TEST_F(ArithTest, MinMax) {
  expect_simplifies_to(vmin(i, imm(128)), i);
  expect_simplifies_to(vmax(i, imm(0)), i);
  expect_simplifies_to(vmin(x, add(x, imm(1))), x);
  expect_simplifies_to(vmax(x, add(x, imm(1))), add(x, imm(1)));
  expect_simplifies_to(vmin(x, x), x);
  expect_simplifies_to(vmin(vmin(x, y), x), vmin(x, y));
  expect_simplifies_to(vmin(vmax(x, y), x), x);
  expect_simplifies_to(vmax(x, vmin(x, y)), x);
  Expr s = an.simplify(vmin(x, y));
  EXPECT_TRUE(expr_equal(s, vmin(x, y)));
  expect_const(vmin(imm(3), imm(-2)), -2);
}

TEST_F(ArithTest, Comparisons) {
  expect_const(lt(i, imm(128)), 1);
  expect_const(ge(i, imm(128)), 0);
  expect_const(lt(add(mul(bx, imm(128)), i), imm(8192)), 1);
  EXPECT_EQ(an.simplify(le(j, i))->kind, ExprKind::Binary);  // undecided: j = 3, i = 0
  expect_const(eq(x, x), 1);
  expect_const(ne(add(x, imm(1)), x), 1);
  expect_const(eq(mul(x, imm(2)), add(mul(y, imm(4)), imm(1))), 0);  // even vs odd
  expect_const(lt(x, add(x, imm(1))), 1);
  // Constants move to one side, common factors divide out.
  expect_simplifies_to(lt(add(x, imm(1)), imm(5)), lt(x, imm(4)));
  expect_simplifies_to(lt(sub(x, y), imm(0)), lt(x, y));
  expect_simplifies_to(lt(mul(x, imm(4)), imm(10)), lt(x, imm(3)));
  expect_simplifies_to(le(mul(x, imm(4)), imm(10)), le(x, imm(2)));
  expect_simplifies_to(eq(mul(x, imm(4)), imm(8)), eq(x, imm(2)));
  expect_const(eq(mul(x, imm(4)), imm(10)), 0);
  expect_simplifies_to(lt(i, n), lt(i, n));
}

TEST_F(ArithTest, Logic) {
  Expr c = lt(x, y);
  expect_simplifies_to(land(lt(i, imm(128)), c), c);
  expect_simplifies_to(land(c, lt(i, imm(0))), imm(0, kBool));
  expect_simplifies_to(lor(c, lt(i, imm(128))), imm(1, kBool));
  expect_simplifies_to(lor(lt(i, imm(0)), c), c);
  expect_simplifies_to(land(c, c), c);
  expect_simplifies_to(land(c, lnot(c)), imm(0, kBool));
  expect_simplifies_to(lnot(lt(x, y)), ge(x, y));
  expect_simplifies_to(lnot(eq(x, y)), ne(x, y));
  expect_simplifies_to(lnot(lnot(c)), c);
  expect_simplifies_to(lnot(ge(i, imm(128))), imm(1, kBool));
}

TEST_F(ArithTest, SelectAndCast) {
  expect_simplifies_to(sel(lt(i, imm(128)), x, y), x);
  expect_simplifies_to(sel(lt(i, imm(0)), x, y), y);
  expect_simplifies_to(sel(lt(x, y), add(x, imm(1)), add(imm(1), x)), add(x, imm(1)));
  expect_simplifies_to(cast_to(kI32, cast_to(DataType::Int(64), x)), x);
  // Narrowing then widening is not the identity.
  Expr e = cast_to(kI32, cast_to(DataType::Int(8), x));
  EXPECT_TRUE(expr_equal(an.simplify(e), e));
  expect_simplifies_to(cast_to(DataType::Int(8), imm(300)), imm(44, DataType::Int(8)));
}

TEST_F(ArithTest, FloatsKeepStructureAndFoldOnlyExactly) {
  DataType f32 = DataType::Float(32);
  Var a = make_var("a", f32), b = make_var("b", f32);
  Expr e = add(add(a, b), make_float(1.0f, f32));  // no reassociation
  EXPECT_TRUE(expr_equal(an.simplify(e), e));
  Expr sum = an.simplify(add(make_float(1.5, f32), make_float(2.25, f32)));
  auto* f = as<FloatImmNode>(sum);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->value, 3.75);
  // 0.1 + 0.2 is rounded in float32: stays as written.
  Expr inexact = add(make_float(double(0.1f), f32), make_float(double(0.2f), f32));
  EXPECT_EQ(an.simplify(inexact)->kind, ExprKind::Binary);
  EXPECT_TRUE(expr_equal(an.simplify(mul(a, make_float(1.0, f32))), a));
  // a + 0 is not a for a = -0.0.
  Expr plus_zero = add(a, make_float(0.0, f32));
  EXPECT_TRUE(expr_equal(an.simplify(plus_zero), plus_zero));
  // Float comparisons are not negated into their opposite (NaN).
  Expr not_lt = lnot(lt(a, b));
  EXPECT_EQ(an.simplify(not_lt)->kind, ExprKind::Not);
}

TEST_F(ArithTest, UnsignedAndNarrowTypesWrap) {
  DataType u32 = DataType::UInt(32);
  Var u = make_var("u", u32);
  an.bind(u.get(), 0, 10);
  // (u - 1) / 2 for u = 0 is (2^32 - 1) / 2: no splitting or bound reasoning across the wrap.
  Expr e = fdiv(sub(u, imm(1, u32)), imm(2, u32));
  Expr s = an.simplify(e);
  EXPECT_EQ(s->kind, ExprKind::Binary);
  EXPECT_FALSE(an.can_prove(lt(sub(u, imm(1, u32)), imm(10, u32))));
  // Ring identities still hold.
  Expr zero = an.simplify(sub(add(u, imm(3, u32)), add(u, imm(3, u32))));
  ASSERT_NE(const_int(zero), nullptr);
  EXPECT_EQ(*const_int(zero), 0);
  expect_const(add(imm(250, DataType::UInt(8)), imm(10, DataType::UInt(8))), 4);
}

TEST_F(ArithTest, Int64IndexArithmetic) {
  DataType i64 = DataType::Int(64);
  Var b = make_var("b64", i64), t = make_var("t64", i64);
  an.bind(b.get(), 0, 1 << 20);
  an.bind(t.get(), 0, 256);
  Expr flat = add(mul(b, imm(256, i64)), t);
  expect_simplifies_to(fdiv(flat, imm(256, i64)), b);
  expect_simplifies_to(fmod(flat, imm(256, i64)), t);
  expect_simplifies_to(fdiv(fmod(flat, imm(256, i64)), imm(256, i64)), imm(0, i64));
  auto bound = an.const_int_bound(flat);
  EXPECT_EQ(bound.max, (int64_t(1) << 28) - 1);
  // Huge constants whose sum leaves int64 are not combined.
  Var w = make_var("w64", i64);
  Expr big = add(add(w, imm(ConstIntBound::kPosInf - 1, i64)), imm(ConstIntBound::kPosInf - 1, i64));
  EXPECT_EQ(an.simplify(big)->dtype, i64);
}

TEST_F(ArithTest, TruncatingRecombination) {
  // x / 8 * 8 + x % 8 is x for every sign of x.
  expect_simplifies_to(add(mul(tdiv(x, imm(8)), imm(8)), tmod(x, imm(8))), x);
  expect_simplifies_to(add(mul(fdiv(x, imm(-8)), imm(-8)), fmod(x, imm(-8))), x);
}

TEST_F(ArithTest, UnchangedExpressionsStayShared) {
  Expr e = add(mul(bx, imm(128)), i);
  EXPECT_EQ(an.simplify(e), e);
  Expr g = lt(add(mul(bx, imm(128)), i), n);
  EXPECT_EQ(an.simplify(g), g);
}

TEST_F(ArithTest, CanProve) {
  EXPECT_TRUE(an.can_prove(lt(i, imm(128))));
  EXPECT_TRUE(an.can_prove(ge(add(mul(bx, imm(128)), i), imm(0))));
  EXPECT_TRUE(an.can_prove(lt(add(mul(i, imm(4)), j), imm(512))));
  EXPECT_FALSE(an.can_prove(lt(add(mul(i, imm(4)), j), imm(511))));
  EXPECT_TRUE(an.can_prove(ge(n, imm(1))));
  EXPECT_FALSE(an.can_prove(lt(i, n)));
  EXPECT_TRUE(an.can_prove(land(lt(i, imm(128)), ge(j, imm(0)))));
  EXPECT_TRUE(an.can_prove(lt(x, add(x, imm(1)))));
  EXPECT_TRUE(an.can_prove(le(fmod(x, imm(8)), imm(7))));
  EXPECT_FALSE(an.can_prove(lt(x, y)));
}

TEST_F(ArithTest, UnbindForgets) {
  Var k = make_var("k");
  an.bind(k.get(), 0, 4);
  EXPECT_TRUE(an.can_prove(lt(k, imm(4))));
  an.unbind(k.get());
  EXPECT_FALSE(an.can_prove(lt(k, imm(4))));
}

// ------------------------------------------------------------------ bit operations

TEST_F(ArithTest, BoundOfBitOperations) {
  auto expect_bound = [&](const Expr& e, int64_t lo, int64_t hi) {
    auto b = an.const_int_bound(e);
    EXPECT_EQ(b.min, lo) << str(e);
    EXPECT_EQ(b.max, hi) << str(e);
  };
  const int64_t kMin32 = -(int64_t(1) << 31), kMax32 = (int64_t(1) << 31) - 1;
  // & with a non-negative side is within [0, that side].
  expect_bound(band(x, imm(7)), 0, 7);
  expect_bound(band(imm(7), x), 0, 7);
  expect_bound(band(i, j), 0, 3);
  expect_bound(band(fmod(x, imm(8)), imm(255)), 0, 7);
  // | and ^ of non-negative values stay below the next power of two.
  expect_bound(bor(i, imm(3)), 3, 127);
  expect_bound(bor(j, imm(8)), 8, 11);
  expect_bound(bxor(i, fmod(bx, imm(8))), 0, 127);
  // Signs: the result of two negative values is negative for & and |, non-negative for ^.
  expect_bound(band(sub(i, imm(200)), sub(j, imm(8))), -256, -73);
  expect_bound(bor(sub(j, imm(8)), i), -8, -1);
  expect_bound(bxor(sub(j, imm(8)), sub(j, imm(4))), 0, 7);
  expect_bound(bxor(sub(j, imm(8)), j), -8, -1);
  expect_bound(bor(x, y), kMin32, kMax32);
  // ~x is -1 - x; for uint8, 255 - x.
  expect_bound(bnot(i), -128, -1);
  Var u = make_var("u", DataType::UInt(8));
  an.bind(u.get(), 10, 6);
  expect_bound(bnot(u), 240, 245);
  // Shifts by amounts inside the type: * 2^s and floordiv by 2^s.
  expect_bound(shl(i, imm(2)), 0, 508);
  expect_bound(shl(j, j), 0, 24);
  expect_bound(shr(sub(i, imm(64)), imm(3)), -8, 7);
  expect_bound(shr(x, imm(28)), -8, 7);
  expect_bound(shr(i, j), 0, 127);
  expect_bound(shl(x, imm(1)), kMin32, kMax32);  // may wrap
  expect_bound(shl(i, x), kMin32, kMax32);       // the amount may be out of range
  expect_bound(shl(imm(1), sub(j, imm(1))), kMin32, kMax32);
}

TEST_F(ArithTest, ModularSetsOfBitOperations) {
  auto m = an.modular_set(shl(x, imm(3)));
  EXPECT_EQ(m.coeff, 8);
  EXPECT_EQ(m.base, 0);
  m = an.modular_set(band(add(mul(x, imm(8)), imm(3)), imm(7)));  // floormod(8x + 3, 8)
  EXPECT_EQ(m.coeff, 0);
  EXPECT_EQ(m.base, 3);
  m = an.modular_set(band(mul(x, imm(4)), imm(15)));
  EXPECT_EQ(m.coeff, 4);
  EXPECT_EQ(m.base, 0);
  m = an.modular_set(shr(mul(x, imm(16)), imm(2)));
  EXPECT_EQ(m.coeff, 4);
  m = an.modular_set(bxor(mul(x, imm(8)), imm(1)));  // nothing known
  EXPECT_EQ(m.coeff, 1);
  // x << c may wrap: of (3x + 1) << 2 = 12x + 4 only the congruence modulo 4 survives.
  m = an.modular_set(shl(add(mul(x, imm(3)), imm(1)), imm(2)));
  EXPECT_EQ(m.coeff, 4);
  EXPECT_EQ(m.base, 0);
  m = an.modular_set(shl(imm(3), imm(31)));
  EXPECT_EQ(m.coeff, 0);
  EXPECT_EQ(m.base, -(int64_t(1) << 31));
}

TEST_F(ArithTest, BitOperationRules) {
  // Constants fold with C's semantics on the type.
  expect_const(bxor(imm(5), imm(3)), 6);
  expect_const(band(imm(-6), imm(7)), 2);
  expect_const(bor(imm(-8), imm(3)), -5);
  expect_const(bnot(imm(5)), -6);
  expect_const(shl(imm(1), imm(31)), -(int64_t(1) << 31));
  expect_const(shl(imm(3), imm(30)), -(int64_t(1) << 30));
  expect_const(shr(imm(-9), imm(1)), -5);  // arithmetic
  expect_const(shr(imm(-1), imm(31)), -1);
  DataType u8 = DataType::UInt(8), u32 = DataType::UInt(32), i8 = DataType::Int(8);
  expect_const(shl(imm(200, u8), imm(1, u8)), 144);
  expect_const(bnot(imm(5, u8)), 250);
  expect_const(shr(imm(0xFFFFFFFF, u32), imm(4, u32)), 0x0FFFFFFF);  // logical
  expect_const(shr(imm(-128, i8), imm(7, i8)), -1);
  expect_const(shl(imm(1, i8), imm(7, i8)), -128);
  // An out-of-range shift amount is left alone (its value is undefined).
  Expr bad = shl(imm(1), imm(32));
  EXPECT_EQ(an.simplify(bad)->kind, ExprKind::Binary);
  // Identities.
  expect_simplifies_to(bnot(bnot(x)), x);
  expect_simplifies_to(bxor(bxor(x, imm(3)), imm(5)), bxor(x, imm(6)));
  expect_simplifies_to(band(band(x, imm(12)), imm(6)), band(x, imm(4)));
  expect_simplifies_to(bor(bor(x, imm(1)), imm(2)), bor(x, imm(3)));
  expect_const(band(x, imm(0)), 0);
  expect_simplifies_to(bor(x, imm(0)), x);
  expect_simplifies_to(bxor(imm(0), x), x);
  expect_simplifies_to(band(x, imm(-1)), x);
  expect_const(bor(x, imm(-1)), -1);
  expect_const(bxor(x, x), 0);
  expect_simplifies_to(band(x, x), x);
  expect_simplifies_to(shl(x, imm(0)), x);
  expect_simplifies_to(band(imm(3), x), band(x, imm(3)));
  // A mask that keeps every bit the value can have disappears; a shift past them gives 0.
  expect_simplifies_to(band(fmod(x, imm(8)), imm(7)), fmod(x, imm(8)));
  expect_simplifies_to(band(i, imm(255)), i);
  expect_simplifies_to(band(i, imm(63)), band(i, imm(63)));
  expect_const(shr(i, imm(7)), 0);
  expect_const(band(shl(i, imm(3)), imm(7)), 0);  // bound [0, 7] but modular: multiple of 8
  expect_simplifies_to(add(bxor(i, j), sub(imm(0), bxor(i, j))), imm(0));
  EXPECT_TRUE(an.can_prove(lt(bxor(i, fmod(bx, imm(8))), imm(128))));
  EXPECT_TRUE(an.can_prove(ge(band(x, imm(15)), imm(0))));
}

// ------------------------------------------------------------------ randomised equivalence

class RandomExprs {
 public:
  // bitwise: also & | ^ ~ << >> (a separate stream, so that the other seeds keep their expressions).
  RandomExprs(uint32_t seed, std::vector<Var> vars, std::vector<int> divisors, bool bitwise = false)
      : rng_(seed), vars_(std::move(vars)), divisors_(std::move(divisors)), bitwise_(bitwise) {}

  Expr integer(int depth) {
    if (depth == 0 || pick(0, 9) < 2) return leaf();
    int which = pick(0, bitwise_ ? 19 : 13);
    if (which >= 14) return bit_op(which, depth);
    switch (which) {
      case 0:
      case 1: return add(integer(depth - 1), integer(depth - 1));
      case 2: return sub(integer(depth - 1), integer(depth - 1));
      case 3: return mul(integer(depth - 1), small_const());
      case 4: return mul(integer(depth - 1), integer(std::min(depth - 1, 1)));
      case 5: return fdiv(integer(depth - 1), divisor());
      case 6: return fmod(integer(depth - 1), divisor());
      case 7: return tdiv(integer(depth - 1), divisor());
      case 8: return tmod(integer(depth - 1), divisor());
      case 9: return vmin(integer(depth - 1), integer(depth - 1));
      case 10: return vmax(integer(depth - 1), integer(depth - 1));
      case 11: return sel(boolean(depth - 1), integer(depth - 1), integer(depth - 1));
      case 12: return cast_to(kI32, boolean(depth - 1));
      default: {
        // An index split and rebuilt: the patterns of tiled loops.
        Expr a = integer(depth - 1);
        Expr c = divisor();
        return add(mul(fdiv(a, c), c), fmod(a, c));
      }
    }
  }

  Expr boolean(int depth) {
    static const BinaryOp kCmp[] = {BinaryOp::EQ, BinaryOp::NE, BinaryOp::LT,
                                    BinaryOp::LE, BinaryOp::GT, BinaryOp::GE};
    int d = std::max(depth - 1, 0);
    switch (depth <= 0 ? 0 : pick(0, 5)) {
      case 3: return land(boolean(d), boolean(d));
      case 4: return lor(boolean(d), boolean(d));
      case 5: return lnot(boolean(d));
      default: return bin(kCmp[pick(0, 5)], integer(d), integer(d));
    }
  }

 private:
  Expr bit_op(int which, int depth) {
    Expr a = integer(depth - 1);
    switch (which) {
      case 14: return band(a, pick(0, 1) ? integer(depth - 1) : imm((1 << pick(0, 5)) - 1));
      case 15: return bor(a, integer(depth - 1));
      case 16: return bxor(a, integer(depth - 1));
      case 17: return bnot(a);
      case 18: return shl(a, pick(0, 2) ? imm(pick(0, 5)) : fmod(integer(depth - 1), imm(4)));
      default: return shr(a, pick(0, 2) ? imm(pick(0, 5)) : fmod(integer(depth - 1), imm(4)));
    }
  }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Expr small_const() { return imm(pick(-6, 6)); }
  Expr divisor() {
    return imm(divisors_[pick(0, int(divisors_.size()) - 1)]);
  }
  Expr leaf() {
    if (pick(0, 9) < 7) return vars_[pick(0, int(vars_.size()) - 1)];
    return imm(pick(-12, 12));
  }

  std::mt19937 rng_;
  std::vector<Var> vars_;
  std::vector<int> divisors_;
  bool bitwise_ = false;
};

struct Domain {
  Var var;
  int64_t min, extent;
};

struct RandomStats {
  int64_t exprs = 0, points = 0, value_mismatches = 0, bound_misses = 0, modular_misses = 0;
  int64_t nodes_before = 0, nodes_after = 0;
};

bool in_modular_set(int64_t v, ModularSet m) {
  if (m.coeff == 0) return v == m.base;
  return ((v - m.base) % m.coeff + m.coeff) % m.coeff == 0;
}

// Simplifies random expressions over the domains' variables and compares original and result
// at random points of the domains; also checks that both bounds and the modular set hold.
RandomStats check_random_exprs(uint32_t seed, const std::vector<Domain>& domains, int num_exprs,
                               std::vector<int> divisors, bool bitwise = false) {
  Analyzer an;
  std::vector<Var> vars;
  for (auto& d : domains) {
    an.bind(d.var.get(), d.min, d.extent);
    vars.push_back(d.var);
  }
  RandomExprs gen(seed, vars, std::move(divisors), bitwise);
  std::mt19937 point_rng(seed + 1);
  const int kPoints = 48;
  RandomStats st;
  int reported = 0;
  for (int k = 0; k < num_exprs; ++k) {
    Expr e = k % 5 == 4 ? gen.boolean(4) : gen.integer(1 + k % 5);
    Expr s = an.simplify(e);
    EXPECT_EQ(s->dtype, e->dtype) << str(e);
    ConstIntBound bound = an.const_int_bound(e), simplified_bound = an.const_int_bound(s);
    ModularSet modular = an.modular_set(e), simplified_modular = an.modular_set(s);
    st.nodes_before += count_nodes(e);
    st.nodes_after += count_nodes(s);
    bool counted = false;
    for (int p = 0; p < kPoints; ++p) {
      Env env;
      for (auto& d : domains)
        env[d.var.get()] = std::uniform_int_distribution<int64_t>(d.min, d.min + d.extent - 1)(point_rng);
      auto want = eval(e, env);
      if (!want) continue;  // the original overflows here: outside the simplifier's contract
      ++st.points;
      if (!counted) ++st.exprs, counted = true;
      auto got = eval(s, env);
      bool ok = got && *got == *want;
      bool in_bound = *want >= bound.min && *want <= bound.max && *want >= simplified_bound.min &&
                      *want <= simplified_bound.max;
      bool in_set = in_modular_set(*want, modular) && in_modular_set(*want, simplified_modular);
      st.value_mismatches += !ok;
      st.bound_misses += !in_bound;
      st.modular_misses += !in_set;
      if ((!ok || !in_bound || !in_set) && reported++ < 10) {
        std::string where;
        for (auto& d : domains) where += " " + d.var->name + "=" + std::to_string(env[d.var.get()]);
        ADD_FAILURE() << "expr " << str(e) << "\n  simplified " << str(s) << "\n  at" << where << ": want "
                      << *want << ", got " << (got ? std::to_string(*got) : "<no value>") << ", bound ["
                      << bound.min << ", " << bound.max << "], modular " << modular.coeff << "*k+"
                      << modular.base;
      }
    }
  }
  return st;
}

void report(const char* name, const RandomStats& st) {
  std::printf("%s: %lld expressions, %lld points checked; %lld mismatches; nodes %lld -> %lld\n", name,
              (long long)st.exprs, (long long)st.points, (long long)st.value_mismatches,
              (long long)st.nodes_before, (long long)st.nodes_after);
}

TEST(ArithRandom, SmallSignedRanges) {
  std::vector<Domain> domains = {{make_var("a"), -8, 17}, {make_var("b"), 0, 16},
                                 {make_var("c"), -3, 8},  {make_var("d"), 5, 1}};
  RandomStats st =
      check_random_exprs(20240611u, domains, 6000, {1, 2, 3, 4, 8, 16, 5, -1, -2, -3, -4, -8, 7, 32});
  report("randomised arith (small ranges)", st);
  EXPECT_GE(st.exprs, 5000);
  EXPECT_EQ(st.value_mismatches, 0);
  EXPECT_EQ(st.bound_misses, 0);
  EXPECT_EQ(st.modular_misses, 0);
  EXPECT_LT(st.nodes_after, st.nodes_before);
}

TEST(ArithRandom, TileLikeRanges) {
  // Block, thread and tile indices with the divisors of tiled code.
  std::vector<Domain> domains = {{make_var("bx"), 0, 64}, {make_var("tx"), 0, 128},
                                 {make_var("j"), 0, 4},   {make_var("s"), -50, 100}};
  RandomStats st =
      check_random_exprs(77u, domains, 3000, {2, 4, 8, 16, 32, 64, 128, -4, -32, 3, 6, 1, -1, 96});
  report("randomised arith (tile-like ranges)", st);
  EXPECT_GE(st.exprs, 2500);
  EXPECT_EQ(st.value_mismatches, 0);
  EXPECT_EQ(st.bound_misses, 0);
  EXPECT_EQ(st.modular_misses, 0);
}

TEST(ArithRandom, WithBitOperations) {
  // & | ^ ~ << >> among the arithmetic, over signed ranges (negative values included).
  std::vector<Domain> domains = {{make_var("a"), -40, 81}, {make_var("b"), 0, 64},
                                 {make_var("c"), -5, 9},   {make_var("d"), 0, 1 << 20}};
  RandomStats st = check_random_exprs(4242u, domains, 6000, {1, 2, 4, 8, 16, 3, -2, -8, 32}, true);
  report("randomised arith (bit operations)", st);
  EXPECT_GE(st.exprs, 4000);
  EXPECT_EQ(st.value_mismatches, 0);
  EXPECT_EQ(st.bound_misses, 0);
  EXPECT_EQ(st.modular_misses, 0);
}

}  // namespace
}  // namespace tl::arith
