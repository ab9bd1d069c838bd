// Expression constructors with the DSL's type rules: operands are promoted to a common
// dtype (a Python literal takes the other side's type, int meets float -> float, the wider
// width wins), comparisons give bool. Constants fold here so the parser's output stays small.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tl {

Expr binary(BinaryOp op, Expr a, Expr b, Span span = {});
Expr logical_not(Expr a, Span span = {});
// ~a: the bitwise complement of an integer (a BitXor with all-ones), the logical not of a bool.
// The bitwise operators (BinaryOp::BitAnd ... ShiftRight) go through binary(): on two bools
// & | ^ are the logical and, or and xor (!=); an integer operand is required otherwise (a
// float, or a bool meeting an integer, is a type error), and a constant shift amount must be
// in [0, bits of the type).
Expr bitwise_not(Expr a, Span span = {});
Expr select(Expr cond, Expr t, Expr f, Span span = {});
Expr cast(DataType t, Expr v, Span span = {});
Expr neg(Expr a, Span span = {});

inline Expr add(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::Add, std::move(a), std::move(b), s); }
inline Expr sub(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::Sub, std::move(a), std::move(b), s); }
inline Expr mul(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::Mul, std::move(a), std::move(b), s); }
inline Expr floordiv(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::FloorDiv, std::move(a), std::move(b), s); }
inline Expr floormod(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::FloorMod, std::move(a), std::move(b), s); }
inline Expr min(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::Min, std::move(a), std::move(b), s); }
inline Expr max(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::Max, std::move(a), std::move(b), s); }
inline Expr lt(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::LT, std::move(a), std::move(b), s); }
inline Expr land(Expr a, Expr b, Span s = {}) { return binary(BinaryOp::And, std::move(a), std::move(b), s); }

// A call to a math intrinsic with the result dtype of its first float argument.
Expr call(const std::string& op, std::vector<Expr> args, Span span = {});
// The largest / smallest finite value of t, and +inf for floats.
Expr max_value(DataType t, Span span = {});
Expr min_value(DataType t, Span span = {});
Expr infinity(DataType t, Span span = {});

// Type of the result when a and b meet in arithmetic.
DataType promote(const Expr& a, const Expr& b);

// The all-ones value of integer type t (-1 for signed types, the maximum for unsigned ones).
int64_t all_ones_value(DataType t);
// x op y for a bitwise op on integer constants of type t (values as IntImmNode holds them:
// sign-extended for signed types, zero-extended for unsigned ones, uint64 as its bit pattern),
// with C's semantics on t; >> of a negative value is arithmetic. Nothing for a shift amount
// outside [0, bits of t).
std::optional<int64_t> fold_bitwise(BinaryOp op, DataType t, int64_t x, int64_t y);

}  // namespace tl
