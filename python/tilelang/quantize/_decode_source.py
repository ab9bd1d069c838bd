"""The C++ text shared by the decode functions of get_lop3_intrin_group and
get_mxfp_intrin_group: one source that compiles as CUDA (nvcc, NVRTC), HIP and host C++
(the cpu target), so the same function can be checked on the CPU.

* Fields are read byte by byte (little-endian), so the packed input needs no alignment.
* The plain path computes each output in double and converts it once to the output type,
  so every result is the exactly rounded value of the formula its docstring states.
* On NVIDIA devices (sm_53 and newer) float16 outputs take a fast path: lop3 puts two
  fields into the mantissas of the two halves of a register holding 1024.0 each, one
  sub.f16x2 removes the 1024 (and the signed bias), and mul/fma.f16x2 apply the scale and
  zero point. It rounds exactly as the plain path does (each f16x2 step is one correctly
  rounded operation on exact operands, the same steps the plain path rounds at). Defining
  TLQ_PORTABLE_DECODE before the source forces the plain path everywhere.
"""

CORE = r"""
#ifndef TLQ_DECODE_CORE
#define TLQ_DECODE_CORE

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TLQ_FN __device__ __forceinline__
#define TLQ_MEMBER __device__ __forceinline__
#else
#define TLQ_FN static inline
#define TLQ_MEMBER inline
#endif

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 530) && !defined(TLQ_PORTABLE_DECODE)
#define TLQ_PTX_F16 1
#else
#define TLQ_PTX_F16 0
#endif

namespace tlq {

template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };

// The little-endian value of n (1 to 4) bytes.
TLQ_FN unsigned int load_le(const unsigned char* p, int n) {
  unsigned int v = 0u;
  for (int i = 0; i < n; ++i) v |= static_cast<unsigned int>(p[i]) << (8 * i);
  return v;
}

// Conversions between the element types of generated code and float / double.
template <typename T> struct conv {
  static TLQ_MEMBER float to_float(const T& v) { return static_cast<float>(v); }
  static TLQ_MEMBER T from_double(double v) { return static_cast<T>(v); }
};
#if defined(__CUDACC__)
template <> struct conv<__half> {
  static TLQ_MEMBER float to_float(const __half& v) { return __half2float(v); }
  static TLQ_MEMBER __half from_double(double v) { return __double2half(v); }
};
template <> struct conv<__nv_bfloat16> {
  static TLQ_MEMBER float to_float(const __nv_bfloat16& v) { return __bfloat162float(v); }
  static TLQ_MEMBER __nv_bfloat16 from_double(double v) { return __double2bfloat16(v); }
};
#endif

// x rounded to the precision of T (the value a T holding x has).
template <typename T> TLQ_FN double round_to(double x) {
  return static_cast<double>(conv<T>::to_float(conv<T>::from_double(x)));
}

// Values of a field: unsigned, or signed (offset binary: v - 2^(bits-1); 1-bit fields
// stand for -1 and +1, 2v - 1).
template <int BITS, bool SIGNED> TLQ_FN int field_value(unsigned int v) {
  return !SIGNED ? static_cast<int>(v) : (BITS == 1 ? 2 * static_cast<int>(v) - 1
                                                    : static_cast<int>(v) - (1 << (BITS - 1)));
}

// Field e of the layout for 16-bit float outputs: 8 fields per group of BITS bytes, field
// j of a group at bit (j % 2) * 4 * BITS + (j / 2) * BITS, so that fields 2i and 2i + 1
// lie 4 * BITS bits apart (interleave_weight(..., "float16")).
template <int BITS> TLQ_FN unsigned int float_layout_field(const unsigned char* src, int e) {
  const int g = e >> 3, j = e & 7;
  const unsigned int w = load_le(src + g * BITS, BITS);
  return (w >> ((j & 1) * 4 * BITS + (j >> 1) * BITS)) & ((1u << BITS) - 1u);
}

// Field e of the layout for int8 outputs (interleave_weight(..., "int8")): field j of a
// 32-bit word in byte j % 4 at bit (j / 4) * BITS; 1-bit fields come 16 to a 16-bit half
// word, field j at bit j / 4 + 4 * (2 * (j % 2) + (j % 4) / 2).
template <int BITS> TLQ_FN unsigned int int8_layout_field(const unsigned char* src, int e) {
  if (BITS == 1) {
    const int g = e >> 4, j = e & 15;
    const unsigned int w = load_le(src + 2 * g, 2);
    return (w >> ((j >> 2) + 4 * (2 * (j & 1) + ((j & 3) >> 1)))) & 1u;
  }
  const int per_word = 32 / BITS, g = e / per_word, j = e % per_word;
  const unsigned int w = load_le(src + 4 * g, 4);
  return (w >> ((j & 3) * 8 + (j >> 2) * BITS)) & ((1u << BITS) - 1u);
}

enum { ZEROS_NONE = 0, ZEROS_ORIGINAL = 1, ZEROS_RESCALE = 2, ZEROS_QUANTIZED = 3 };

#if TLQ_PTX_F16
// (a & b) | c in one instruction: 0xEA is the truth table of that function for the
// operand patterns a = 0xF0, b = 0xCC, c = 0xAA.
TLQ_FN unsigned int and_or(unsigned int a, unsigned int b, unsigned int c) {
  unsigned int d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
TLQ_FN unsigned int sub_f16x2(unsigned int a, unsigned int b) {
  unsigned int d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
TLQ_FN unsigned int mul_f16x2(unsigned int a, unsigned int b) {
  unsigned int d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
TLQ_FN unsigned int fma_f16x2(unsigned int a, unsigned int b, unsigned int c) {
  unsigned int d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
TLQ_FN unsigned int f16_bits(float x) { return static_cast<unsigned int>(__half_as_ushort(__float2half_rn(x))); }

// A group of 8 fields (BITS bytes) as one word with fields 2i and 2i + 1 at bits BITS * i
// and 16 + BITS * i.
template <int BITS> TLQ_FN unsigned int pair_word(const unsigned char* g) {
  if (BITS == 4) return load_le(g, 4);
  if (BITS == 2) {
    const unsigned int x = load_le(g, 2);
    return (x & 0x00FFu) | ((x & 0xFF00u) << 8);
  }
  const unsigned int x = g[0];
  return (x & 0x0Fu) | ((x & 0xF0u) << 12);
}

template <int BITS, bool SIGNED, bool SCALE, int ZEROS>
TLQ_FN void decode_f16_fast(const unsigned char* src, __half* out, int N, float s_l, float s_r, float z_l,
                            float z_r) {
  const unsigned int mask = ((1u << BITS) - 1u) * 0x00010001u;
  const unsigned int magic = 0x64006400u;  // 1024.0 in both halves; a field ORed into the mantissa adds to it
  const unsigned int bias = (SIGNED && BITS > 1) ? (0x6400u | (1u << (BITS - 1))) * 0x00010001u : magic;
  const unsigned int sl = f16_bits(s_l) * 0x00010001u, sr = f16_bits(s_r) * 0x00010001u;
  const unsigned int zl = f16_bits(z_l) * 0x00010001u, zr = f16_bits(z_r) * 0x00010001u;
  for (int g = 0; g < N / 8; ++g) {
    const unsigned int w = pair_word<BITS>(src + g * BITS);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = g * 8 + 2 * i;
      unsigned int h = sub_f16x2(and_or(w >> (BITS * i), mask, magic), bias);  // exact
      if (SIGNED && BITS == 1) h = fma_f16x2(h, 0x40004000u, 0xBC00BC00u);   // 2v - 1, exact
      if (SCALE) {
        const bool right = e >= N / 2;
        const unsigned int s2 = right ? sr : sl, z2 = right ? zr : zl;
        if (ZEROS == ZEROS_ORIGINAL || ZEROS == ZEROS_QUANTIZED) h = mul_f16x2(sub_f16x2(h, z2), s2);
        else if (ZEROS == ZEROS_RESCALE) h = fma_f16x2(h, s2, z2 ^ 0x80008000u);
        else h = mul_f16x2(h, s2);
      }
      out[e] = __ushort_as_half(static_cast<unsigned short>(h & 0xFFFFu));
      out[e + 1] = __ushort_as_half(static_cast<unsigned short>(h >> 16));
    }
  }
}
#endif  // TLQ_PTX_F16

// Decodes N fields of the float layout into out. Each output is
//   v * s            (SCALE, no zeros),   round(v - z) * s   (ZEROS_ORIGINAL),
//   v * s - z        (ZEROS_RESCALE),     (v - z) * s        (ZEROS_QUANTIZED, z an integer)
// rounded once to the output type (round() is a rounding to it too), with s and z the
// left values for the first N / 2 outputs and the right ones for the rest, s and z
// (except a quantized zero) rounded to the output type first.
template <int BITS, bool SIGNED, bool SCALE, int ZEROS, typename T1, typename T2>
TLQ_FN void decode_float(const T1* in, T2* out, int N, float s_l, float s_r, float z_l, float z_r) {
  const unsigned char* src = reinterpret_cast<const unsigned char*>(in);
#if TLQ_PTX_F16
  if (same_type<T2, __half>::value && N % 8 == 0) {
    decode_f16_fast<BITS, SIGNED, SCALE, ZEROS>(src, reinterpret_cast<__half*>(out), N, s_l, s_r, z_l, z_r);
    return;
  }
#endif
  for (int e = 0; e < N; ++e) {
    double r = static_cast<double>(field_value<BITS, SIGNED>(float_layout_field<BITS>(src, e)));
    if (SCALE) {
      const bool right = e >= N / 2;
      const double s = round_to<T2>(right ? s_r : s_l);
      const double z = ZEROS == ZEROS_QUANTIZED ? static_cast<double>(right ? z_r : z_l)
                                                : round_to<T2>(right ? z_r : z_l);
      if (ZEROS == ZEROS_ORIGINAL) r = round_to<T2>(r - z) * s;
      else if (ZEROS == ZEROS_RESCALE) r = r * s - z;
      else if (ZEROS == ZEROS_QUANTIZED) r = (r - z) * s;
      else r = r * s;
    }
    out[e] = conv<T2>::from_double(r);
  }
}

template <int BITS, bool SIGNED, typename T1, typename T2>
TLQ_FN void decode_int8(const T1* in, T2* out, int N) {
  const unsigned char* src = reinterpret_cast<const unsigned char*>(in);
  for (int e = 0; e < N; ++e) out[e] = static_cast<T2>(field_value<BITS, SIGNED>(int8_layout_field<BITS>(src, e)));
}

// 2-bit fields to packed int4 (two per byte, the first in the low nibble). Field j of each
// 32-bit word of 16 fields is at bit 4 * (j % 8) + 2 * (j / 8). A signed field is a 2-bit
// two's-complement value, sign-extended to 4 bits.
template <bool SIGNED, typename T1, typename T2>
TLQ_FN void decode_i2_to_int4(const T1* in, T2* out, int N) {
  const unsigned char* src = reinterpret_cast<const unsigned char*>(in);
  unsigned char* dst = reinterpret_cast<unsigned char*>(out);
  for (int e = 0; e < N; e += 2) {
    unsigned int nib[2] = {0u, 0u};
    for (int k = 0; k < 2 && e + k < N; ++k) {
      const int f = e + k, g = f >> 4, j = f & 15;
      unsigned int v = (load_le(src + 4 * g, 4) >> (4 * (j & 7) + 2 * (j >> 3))) & 3u;
      if (SIGNED && (v & 2u)) v |= 0xCu;
      nib[k] = v;
    }
    dst[e >> 1] = static_cast<unsigned char>(nib[0] | (nib[1] << 4));
  }
}

// A value of a zero point or scale argument, as float.
template <typename T> TLQ_FN float value_of(const T* p) { return conv<T>::to_float(*p); }

// FP4 E2M1 (sign, 2 exponent bits, 1 mantissa bit): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
TLQ_FN double e2m1_value(unsigned int code) {
  const unsigned int e = (code >> 1) & 3u, m = code & 1u;
  const double mag = e == 0u ? 0.5 * m : static_cast<double>(1u << (e - 1u)) * (1.0 + 0.5 * m);
  return (code & 8u) ? -mag : mag;
}
template <typename T> struct e2m1_out {
  static TLQ_MEMBER T make(unsigned int code) { return conv<T>::from_double(e2m1_value(code)); }
};
#if defined(__CUDACC__)
// bfloat16 / float16 bit patterns built directly: exponent e + bias - 1 for a normal code,
// 0.5 for the subnormal code 0b001.
template <> struct e2m1_out<__nv_bfloat16> {
  static TLQ_MEMBER __nv_bfloat16 make(unsigned int code) {
    const unsigned int e = (code >> 1) & 3u, m = code & 1u;
    const unsigned int mag = e ? (((e + 126u) << 7) | (m << 6)) : (m ? 0x3F00u : 0u);
    return __ushort_as_bfloat16(static_cast<unsigned short>(((code & 8u) << 12) | mag));
  }
};
template <> struct e2m1_out<__half> {
  static TLQ_MEMBER __half make(unsigned int code) {
    const unsigned int e = (code >> 1) & 3u, m = code & 1u;
    const unsigned int mag = e ? (((e + 14u) << 10) | (m << 9)) : (m ? 0x3800u : 0u);
    return __ushort_as_half(static_cast<unsigned short>(((code & 8u) << 12) | mag));
  }
};
#endif

// The E2M1 code of field p (0 to 3) of a twiddled pair of bytes v = first << 8 | second:
// (sign, e1, e0, m) at bits (15, 8, 7, 6), (12, 5, 4, 3), (9, 2, 1, 0) and (14, 11, 10, 13).
TLQ_FN unsigned int twiddled_code(unsigned int v, int p) {
  unsigned int s, e1, e0, m;
  if (p < 3) {
    s = 15 - 3 * p; e1 = 8 - 3 * p; e0 = 7 - 3 * p; m = 6 - 3 * p;
  } else {
    s = 14; e1 = 11; e0 = 10; m = 13;
  }
  return (((v >> s) & 1u) << 3) | (((v >> e1) & 1u) << 2) | (((v >> e0) & 1u) << 1) | ((v >> m) & 1u);
}

}  // namespace tlq
#endif  // TLQ_DECODE_CORE
"""
