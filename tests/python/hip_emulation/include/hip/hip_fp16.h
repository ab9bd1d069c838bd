// Host stand-in for HIP's hip_fp16.h: __half is an IEEE binary16 value held as g++'s
// _Float16, whose conversions from float and double round to nearest even.
#pragma once

struct __half {
  _Float16 value;
  __half() = default;
  constexpr __half(_Float16 v) : value(v) {}
  __half(float v) : value(static_cast<_Float16>(v)) {}
  __half(double v) : value(static_cast<_Float16>(v)) {}
  operator float() const { return static_cast<float>(value); }
};
static_assert(sizeof(__half) == 2, "__half is two bytes");

inline float __half2float(__half h) { return static_cast<float>(h.value); }
inline __half __float2half_rn(float f) { return __half(static_cast<_Float16>(f)); }
