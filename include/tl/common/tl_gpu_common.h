// Device code both GPU headers share (tl/cuda/tl_cuda.h, tl/hip/tl_hip.h): Python-style
// integer division, min/max, math wrappers, atomics by compare-and-swap, the block order of
// T.use_swizzle and printing. CUDA and HIP spell all of it alike. The including header
// defines TL_DEVICE, memcpy, atomicCAS on 4- and 8-byte words, and tl::detail::to_compute /
// from_compute for its storage float types first.
#pragma once

namespace tl {

// ------------------------------------------------------------------ integer and float division

// Python semantics: the quotient rounds toward -inf, the remainder takes the divisor's sign.
// A zero divisor gives 0 for both, as numpy does (and as the CPU back end does, where the
// hardware would trap), and so does a remainder by -1; the most negative value divided by
// -1 wraps. Narrower integers promote to the int32 overloads; both operands must have one
// type.
#define TL_GPU_SIGNED_FLOOR(T, U)                                                          \
  TL_DEVICE T tl_wrapping_neg(T a) { return static_cast<T>(static_cast<U>(0) - static_cast<U>(a)); } \
  TL_DEVICE T truncdiv(T a, T b) {                                                          \
    return b == 0 ? static_cast<T>(0) : b == static_cast<T>(-1) ? tl_wrapping_neg(a) : static_cast<T>(a / b); \
  }                                                                                         \
  TL_DEVICE T truncmod(T a, T b) {                                                          \
    return b == 0 || b == static_cast<T>(-1) ? static_cast<T>(0) : static_cast<T>(a % b);   \
  }                                                                                         \
  TL_DEVICE T floordiv(T a, T b) {                                                          \
    if (b == 0) return static_cast<T>(0);                                                   \
    if (b == static_cast<T>(-1)) return tl_wrapping_neg(a);                                 \
    T q = a / b;                                                                            \
    return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;                \
  }                                                                                         \
  TL_DEVICE T floormod(T a, T b) {                                                          \
    if (b == 0 || b == static_cast<T>(-1)) return static_cast<T>(0);                        \
    T r = a % b;                                                                            \
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;                    \
  }
#define TL_GPU_UNSIGNED_FLOOR(T)                                                                       \
  TL_DEVICE T truncdiv(T a, T b) { return b == 0 ? static_cast<T>(0) : static_cast<T>(a / b); }         \
  TL_DEVICE T truncmod(T a, T b) { return b == 0 ? static_cast<T>(0) : static_cast<T>(a % b); }         \
  TL_DEVICE T floordiv(T a, T b) { return truncdiv(a, b); }                                             \
  TL_DEVICE T floormod(T a, T b) { return truncmod(a, b); }
TL_GPU_SIGNED_FLOOR(int, unsigned int)
TL_GPU_SIGNED_FLOOR(long, unsigned long)
TL_GPU_SIGNED_FLOOR(long long, unsigned long long)
TL_GPU_UNSIGNED_FLOOR(unsigned int)
TL_GPU_UNSIGNED_FLOOR(unsigned long)
TL_GPU_UNSIGNED_FLOOR(unsigned long long)
#undef TL_GPU_SIGNED_FLOOR
#undef TL_GPU_UNSIGNED_FLOOR
TL_DEVICE float floordiv(float a, float b) { return floorf(a / b); }
TL_DEVICE double floordiv(double a, double b) { return floor(a / b); }
TL_DEVICE float floormod(float a, float b) { return a - floorf(a / b) * b; }
TL_DEVICE double floormod(double a, double b) { return a - floor(a / b) * b; }

// As on the CPU: a NaN first operand is returned as is.
template <typename T>
TL_DEVICE T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
TL_DEVICE T max(T a, T b) {
  return a < b ? b : a;
}

// ------------------------------------------------------------------ math

#define TL_GPU_UNARY(name, expr_f, expr_d)        \
  TL_DEVICE float name(float x) { return expr_f; } \
  TL_DEVICE double name(double x) { return expr_d; }

TL_GPU_UNARY(exp, expf(x), ::exp(x))
TL_GPU_UNARY(exp2, exp2f(x), ::exp2(x))
TL_GPU_UNARY(exp10, exp10f(x), ::exp10(x))
TL_GPU_UNARY(log, logf(x), ::log(x))
TL_GPU_UNARY(log2, log2f(x), ::log2(x))
TL_GPU_UNARY(log10, log10f(x), ::log10(x))
TL_GPU_UNARY(log1p, log1pf(x), ::log1p(x))
TL_GPU_UNARY(sqrt, sqrtf(x), ::sqrt(x))
TL_GPU_UNARY(rsqrt, rsqrtf(x), ::rsqrt(x))
TL_GPU_UNARY(tanh, tanhf(x), ::tanh(x))
TL_GPU_UNARY(sigmoid, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + ::exp(-x)))
TL_GPU_UNARY(sin, sinf(x), ::sin(x))
TL_GPU_UNARY(cos, cosf(x), ::cos(x))
TL_GPU_UNARY(tan, tanf(x), ::tan(x))
TL_GPU_UNARY(erf, erff(x), ::erf(x))
TL_GPU_UNARY(floor, floorf(x), ::floor(x))
TL_GPU_UNARY(ceil, ceilf(x), ::ceil(x))
// Round half to even, as numpy.round does.
TL_GPU_UNARY(round, rintf(x), ::rint(x))
TL_GPU_UNARY(trunc, truncf(x), ::trunc(x))
TL_GPU_UNARY(acos, acosf(x), ::acos(x))
TL_GPU_UNARY(asin, asinf(x), ::asin(x))
TL_GPU_UNARY(atan, atanf(x), ::atan(x))
TL_GPU_UNARY(sinh, sinhf(x), ::sinh(x))
TL_GPU_UNARY(cosh, coshf(x), ::cosh(x))
TL_GPU_UNARY(asinh, asinhf(x), ::asinh(x))
TL_GPU_UNARY(acosh, acoshf(x), ::acosh(x))
TL_GPU_UNARY(atanh, atanhf(x), ::atanh(x))
TL_GPU_UNARY(nearbyint, rintf(x), ::rint(x))  // half to even
#undef TL_GPU_UNARY

#define TL_GPU_BINARY(name, expr_f, expr_d)                 \
  TL_DEVICE float name(float x, float y) { return expr_f; } \
  TL_DEVICE double name(double x, double y) { return expr_d; }
TL_GPU_BINARY(atan2, atan2f(x, y), ::atan2(x, y))
TL_GPU_BINARY(copysign, copysignf(x, y), ::copysign(x, y))
TL_GPU_BINARY(hypot, hypotf(x, y), ::hypot(x, y))
TL_GPU_BINARY(nextafter, nextafterf(x, y), ::nextafter(x, y))
TL_GPU_BINARY(ldexp, ldexpf(x, int(y)), ::ldexp(x, int(y)))  // x * 2^y, y an integer value
#undef TL_GPU_BINARY
TL_DEVICE float fma(float x, float y, float z) { return fmaf(x, y, z); }
TL_DEVICE double fma(double x, double y, double z) { return ::fma(x, y, z); }

TL_DEVICE float pow(float x, float y) { return powf(x, y); }
TL_DEVICE double pow(double x, double y) { return ::pow(x, y); }
TL_DEVICE float fmod(float x, float y) { return fmodf(x, y); }
TL_DEVICE double fmod(double x, double y) { return ::fmod(x, y); }

TL_DEVICE float abs(float x) { return fabsf(x); }
TL_DEVICE double abs(double x) { return ::fabs(x); }
template <typename T>
TL_DEVICE T abs(T x) {
  return x < T(0) ? T(-x) : x;  // unsigned types never take the first branch
}
// Written out so they do not depend on which math headers NVRTC provides.
TL_DEVICE bool isnan(float x) { return x != x; }
TL_DEVICE bool isnan(double x) { return x != x; }
TL_DEVICE bool isinf(float x) { return fabsf(x) == __int_as_float(0x7f800000); }
TL_DEVICE bool isinf(double x) { return ::fabs(x) == __longlong_as_double(0x7ff0000000000000LL); }
TL_DEVICE bool isfinite(float x) { return !isnan(x) && !isinf(x); }
TL_DEVICE bool isfinite(double x) { return !isnan(x) && !isinf(x); }
// T.popcount / T.clz: tl_cuda.h and tl_hip.h.

// ------------------------------------------------------------------ atomics

// Each returns the element's previous value. Types the hardware adds natively use its
// instruction; the rest (max/min of floats, 8- and 16-bit integers, fp8) a compare-and-swap
// loop on the 4- or 8-byte word, or on the aligned 4-byte word holding a 1- or 2-byte element.
// All are relaxed, as CUDA's and HIP's atomics are (fenced below for other memory orders).
namespace detail {

template <typename To, typename From>
TL_DEVICE To bits_as(From from) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// The unsigned type atomicCAS takes for an element of n bytes (4 or 8), and the bits of a
// 1- or 2-byte element inside its word.
template <int n> struct cas_word;
template <> struct cas_word<4> { using type = unsigned int; };
template <> struct cas_word<8> { using type = unsigned long long; };
template <int n> struct sub_word;
template <> struct sub_word<1> { using type = unsigned char; };
template <> struct sub_word<2> { using type = unsigned short; };

template <typename T, typename Combine>
TL_DEVICE T atomic_update(T* address, Combine combine) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "element size");
  if constexpr (sizeof(T) < 4) {
    // HIP has no 16-bit compare-and-swap: 1- and 2-byte elements update their aligned word.
    using Bits = typename sub_word<int(sizeof(T))>::type;
    constexpr unsigned int kMask = sizeof(T) == 1 ? 0xffu : 0xffffu;
    unsigned long long addr = reinterpret_cast<unsigned long long>(address);
    unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~3ull);
    unsigned int shift = unsigned(addr & 3u) * 8u;
    unsigned int old = *word, assumed;
    T current;
    do {
      assumed = old;
      current = bits_as<T>(static_cast<Bits>(assumed >> shift));
      unsigned int next = bits_as<Bits>(combine(current));
      unsigned int desired = (assumed & ~(kMask << shift)) | (next << shift);
      if (desired == assumed) break;
      old = atomicCAS(word, assumed, desired);
    } while (old != assumed);
    return current;
  } else {
    using Word = typename cas_word<int(sizeof(T))>::type;
    Word* word = reinterpret_cast<Word*>(address);
    Word old = *word, assumed;
    do {
      assumed = old;
      Word desired = bits_as<Word>(combine(bits_as<T>(assumed)));
      if (desired == assumed) break;
      old = atomicCAS(word, assumed, desired);
    } while (old != assumed);
    return bits_as<T>(assumed);
  }
}

}  // namespace detail

template <typename T>
TL_DEVICE T atomic_add(T* address, T value) {
  return detail::atomic_update(address, [value](T old) {
    return detail::from_compute<T>(detail::to_compute(old) + detail::to_compute(value));
  });
}
template <typename T>
TL_DEVICE T atomic_max(T* address, T value) {
  return detail::atomic_update(
      address, [value](T old) { return detail::to_compute(old) < detail::to_compute(value) ? value : old; });
}
template <typename T>
TL_DEVICE T atomic_min(T* address, T value) {
  return detail::atomic_update(
      address, [value](T old) { return detail::to_compute(value) < detail::to_compute(old) ? value : old; });
}

// T.atomic_*(..., memory_order=...): the relaxed atomic between device-scope fences, as
// (atomic_fence_before<O>(), atomic_fence_after<O>(atomic_add(...))). O numbers the order
// as C++ does: 0 relaxed, 1 consume, 2 acquire, 3 release, 4 acq_rel, 5 seq_cst. Release
// fences before the atomic, acquire after; __threadfence() is sequentially consistent at
// device scope, so it serves every order.
template <int Order>
TL_DEVICE void atomic_fence_before() {
  if constexpr (Order >= 3) __threadfence();
}
template <int Order, typename T>
TL_DEVICE T atomic_fence_after(T previous) {
  if constexpr (Order == 1 || Order == 2 || Order == 4 || Order == 5) __threadfence();
  return previous;
}

// T.atomic_load / T.atomic_store: a volatile (strong, relaxed) access of the element's
// bits between the same fences: acquire (and consume, seq_cst) after a load, release (and
// seq_cst) before a store, seq_cst on both sides.
namespace detail {
template <int Bytes> struct bits_of;
template <> struct bits_of<1> { using type = uint8_t; };
template <> struct bits_of<2> { using type = uint16_t; };
template <> struct bits_of<4> { using type = uint32_t; };
template <> struct bits_of<8> { using type = unsigned long long; };
}  // namespace detail
template <int Order, typename T>
TL_DEVICE T atomic_load(const T* address) {
  using B = typename detail::bits_of<sizeof(T)>::type;
  if constexpr (Order == 5) __threadfence();
  B bits = *reinterpret_cast<const volatile B*>(address);
  if constexpr (Order == 1 || Order == 2 || Order == 5) __threadfence();
  return detail::bits_as<T>(bits);
}
template <int Order, typename T>
TL_DEVICE void atomic_store(T* address, T value) {
  using B = typename detail::bits_of<sizeof(T)>::type;
  if constexpr (Order == 3 || Order == 5) __threadfence();
  *reinterpret_cast<volatile B*>(address) = detail::bits_as<B>(value);
  if constexpr (Order == 5) __threadfence();
}
// T.atomic_or of a 32- or 64-bit integer element; the previous value.
template <typename T>
TL_DEVICE T atomic_or(T* address, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "T.atomic_or takes a 32- or 64-bit integer");
  if constexpr (sizeof(T) == 4)
    return T(atomicOr(reinterpret_cast<unsigned int*>(address), static_cast<unsigned int>(value)));
  else
    return T(atomicOr(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value)));
}


// ------------------------------------------------------------------ block order

// T.use_swizzle: block ids run panel by panel. With kByCols false, kPanel consecutive rows
// of blocks (y) form a panel walked column by column (x), so the blocks resident at once
// share a few rows of one operand and a few columns of the other in L2; the last panel may
// be shorter. kByCols swaps the roles of x and y. A bijection on the grid.
template <int kPanel, bool kByCols>
TL_DEVICE void rasterize(int& x, int& y) {
  const unsigned int gx = kByCols ? gridDim.y : gridDim.x, gy = kByCols ? gridDim.x : gridDim.y;
  const unsigned int id = blockIdx.x + blockIdx.y * gridDim.x;
  const unsigned int per_panel = kPanel * gx, panel = id / per_panel, offset = id % per_panel;
  const unsigned int rows = min(static_cast<unsigned int>(kPanel), gy - panel * kPanel);
  const int across = static_cast<int>(offset / rows), down = static_cast<int>(panel * kPanel + offset % rows);
  x = kByCols ? down : across;
  y = kByCols ? across : down;
}


// ------------------------------------------------------------------ printing

// The IR prints bools as Python does.
TL_DEVICE const char* bool_str(bool value) { return value ? "True" : "False"; }

}  // namespace tl
