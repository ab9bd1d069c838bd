// Small integer helpers shared by the analyses: Python-style division, gcd, wrapping to a
// dtype's width, and the dtype's value range.
#pragma once
#include <cstdint>
#include <limits>

#include "arith/analyzer.h"
#include "ir/dtype.h"

namespace tl::arith {

inline constexpr int64_t kPosInf = ConstIntBound::kPosInf;
inline constexpr int64_t kNegInf = ConstIntBound::kNegInf;

// Floor division and its remainder (sign of the divisor), as Python computes them.
// b != 0, and not (a == INT64_MIN && b == -1).
inline int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t floormod_int(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Non-negative greatest common divisor; gcd(0, x) = |x|. Returns 0 for gcd(0, 0), and
// saturates |INT64_MIN| to INT64_MAX (never reached by the small numbers of index math).
inline int64_t gcd_int(int64_t a, int64_t b) {
  auto magnitude = [](int64_t v) -> uint64_t { return v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v); };
  uint64_t x = magnitude(a), y = magnitude(b);
  while (y != 0) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x > uint64_t(kPosInf) ? kPosInf : int64_t(x);
}

// The two's complement value of v in t's width, sign-extended for signed types and zero-extended for
// unsigned ones (uint64 keeps its bit pattern in the int64). Bools become 0 or 1.
inline int64_t wrap_to(DataType t, int64_t v) {
  if (t.is_bool()) return v != 0;
  if (t.bits >= 64 || t.bits == 0) return v;
  uint64_t mask = (uint64_t(1) << t.bits) - 1;
  uint64_t u = uint64_t(v) & mask;
  if (t.is_int() && (u >> (t.bits - 1))) u |= ~mask;
  return int64_t(u);
}

// The signed representative of v modulo 2^bits: how linear forms store coefficients, so that
// x - y keeps a coefficient of -1 even for unsigned types.
inline int64_t wrap_signed(DataType t, int64_t v) {
  return wrap_to(DataType::Int(t.bits == 0 ? 64 : t.bits), v);
}

// Index arithmetic is done in signed types of at least 32 bits, where (as in C) overflow does
// not happen in a valid program. Only for those types do we reason with mathematical integers
// (moving terms across comparisons, splitting divisions). Narrow and unsigned types wrap.
inline bool assumes_no_overflow(DataType t) { return t.is_int() && t.bits >= 32 && t.lanes == 1; }

// Scalar integer (or bool) types the analyses understand.
inline bool is_scalar_int(DataType t) { return (t.is_integer() || t.is_bool()) && t.lanes == 1; }

// Every value t can hold; unbounded for non-integers.
inline ConstIntBound dtype_range(DataType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_int() && t.bits < 64) return {-(int64_t(1) << (t.bits - 1)), (int64_t(1) << (t.bits - 1)) - 1};
  if (t.is_uint() && t.bits < 64) return {0, int64_t((uint64_t(1) << t.bits) - 1)};
  if (t.is_uint()) return {0, kPosInf};
  return {kNegInf, kPosInf};
}

}  // namespace tl::arith
