// Host stand-in for HIP's hip_bfloat16.h: the upper 16 bits of a float; the conversion from
// float rounds to nearest even and keeps NaNs quiet, as ROCm's does.
#pragma once

#include <cstdint>
#include <cstring>

struct hip_bfloat16 {
  uint16_t data;
  hip_bfloat16() = default;
  explicit hip_bfloat16(float f) : data(round_to_bfloat16(f)) {}
  operator float() const {
    uint32_t bits = uint32_t(data) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }

  static uint16_t round_to_bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};
static_assert(sizeof(hip_bfloat16) == 2, "hip_bfloat16 is two bytes");
