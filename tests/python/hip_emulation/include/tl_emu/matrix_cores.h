// The matrix-core builtins tl/hip/tl_hip.h calls (clang's __builtin_amdgcn_mfma_* and
// __builtin_amdgcn_wmma_*), emulated as wavefront collectives: each lane deposits its A, B
// and C registers, one lane computes D = A B + C for the whole wavefront, and each lane takes
// its D registers back.
//
// Where each matrix element lives is written here from AMD's documentation of the register
// layouts (the AMD Matrix Instruction Calculator's "matrix element to register mapping",
// the CDNA 2 / CDNA 3 and RDNA 3 ISA guides), not from the compiler's layout code, so that a
// run checks the generated kernels against the ISA. "item" is a value's index in the lane's
// registers counted in elements: the k-th 16-bit value of a lane is bits [16*(k%2)+15 : 16*(k%2)]
// of its register k/2, the k-th 8-bit value bits [8*(k%4)+7 : 8*(k%4)] of register k/4.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace tl_emu {

struct Slot {
  int lane, item;
};

// An instruction's shape and where A[i][k], B[k][j] and C/D[i][j] live.
struct MatrixShape {
  const char* name;
  int m, n, k;
  Slot (*a)(int i, int k);
  Slot (*b)(int k, int j);
  Slot (*d)(int i, int j);
  int copies;  // WMMA on wave32: lanes 16-31 hold a second copy of lanes 0-15's A and B
};

// CDNA (wave64), one block, no CBSZ / ABID / BLGP. With K_L values of A (and of B) per lane:
// A[i][k] is item k % K_L of lane M * floor(k / K_L) + i, B[k][j] item k % K_L of lane
// N * floor(k / K_L) + j. 32 x 32 accumulators: C/D[i][j] is GPR 4 * floor(i / 8) + (i % 4)
// of lane 32 * floor(i / 4) % 64 + j; 16 x 16: GPR i % 4 of lane 16 * floor(i / 4) + j.
template <int M, int KL>
Slot cdna_a(int i, int k) { return {M * (k / KL) + i, k % KL}; }
template <int N, int KL>
Slot cdna_b(int k, int j) { return {N * (k / KL) + j, k % KL}; }
inline Slot cdna_d32(int i, int j) { return {(32 * (i / 4)) % 64 + j, 4 * (i / 8) + i % 4}; }
inline Slot cdna_d16(int i, int j) { return {16 * (i / 4) + j, i % 4}; }

// v_mfma_f32_32x32x2f32 and v_mfma_f32_16x16x4f32: one float32 of A (and of B) per lane.
inline constexpr MatrixShape kMfma32x32x2{"v_mfma_f32_32x32x2f32", 32, 32, 2, cdna_a<32, 1>, cdna_b<32, 1>, cdna_d32, 1};
inline constexpr MatrixShape kMfma16x16x4{"v_mfma_f32_16x16x4f32", 16, 16, 4, cdna_a<16, 1>, cdna_b<16, 1>, cdna_d16, 1};
// v_mfma_f32_32x32x8f16, _32x32x8bf16_1k, v_mfma_i32_32x32x8i8: 4 values per lane.
inline constexpr MatrixShape kMfma32x32x8{"v_mfma_*_32x32x8", 32, 32, 8, cdna_a<32, 4>, cdna_b<32, 4>, cdna_d32, 1};
// v_mfma_f32_16x16x16f16, _16x16x16bf16_1k, v_mfma_i32_16x16x16i8: 4 values per lane.
inline constexpr MatrixShape kMfma16x16x16{"v_mfma_*_16x16x16", 16, 16, 16, cdna_a<16, 4>, cdna_b<16, 4>, cdna_d16, 1};
// CDNA 3's v_mfma_i32_32x32x16_i8 and v_mfma_i32_16x16x32_i8: 8 int8 per lane (a register pair).
inline constexpr MatrixShape kMfma32x32x16{"v_mfma_i32_32x32x16_i8", 32, 32, 16, cdna_a<32, 8>, cdna_b<32, 8>,
                                           cdna_d32, 1};
inline constexpr MatrixShape kMfma16x16x32{"v_mfma_i32_16x16x32_i8", 16, 16, 32, cdna_a<16, 8>, cdna_b<16, 8>,
                                           cdna_d16, 1};

// RDNA 3 (wave32) v_wmma_*_16x16x16_*: A[i][k] is item k of lanes i and i + 16, B[k][j] item
// k of lanes j and j + 16; C/D[i][j] (32-bit) is GPR floor(i / 2) of lane 16 * (i % 2) + j.
inline Slot rdna3_a(int i, int k) { return {i, k}; }
inline Slot rdna3_b(int k, int j) { return {j, k}; }
inline Slot rdna3_d(int i, int j) { return {16 * (i % 2) + j, i / 2}; }
inline constexpr MatrixShape kWmma16x16x16{"v_wmma_*_16x16x16", 16, 16, 16, rdna3_a, rdna3_b, rdna3_d, 2};

// How the values of A and B are read.
enum class Input { f16, bf16, i8, u8, f32 };

inline double input_value(const unsigned char* lane, int item, Input in) {
  switch (in) {
    case Input::f16: {
      _Float16 h;
      std::memcpy(&h, lane + 2 * item, 2);
      return static_cast<double>(h);
    }
    case Input::bf16: {
      uint16_t bits;
      std::memcpy(&bits, lane + 2 * item, 2);
      uint32_t wide = uint32_t(bits) << 16;
      float f;
      std::memcpy(&f, &wide, 4);
      return f;
    }
    case Input::f32: {
      float f;
      std::memcpy(&f, lane + 4 * item, 4);
      return f;
    }
    case Input::i8:
      return static_cast<int8_t>(lane[item]);
    case Input::u8:
      return lane[item];
  }
  return 0;
}

inline int input_bytes(Input in) { return in == Input::f32 ? 4 : in == Input::f16 || in == Input::bf16 ? 2 : 1; }

// D = A B + C over the deposits of the wavefront. Float products accumulate in float in k
// order (each f16 / bf16 product is exact in float); integer ones wrap to 32 bits, or
// saturate with clamp.
template <typename Acc>
void multiply(Wave& w, const MatrixShape& s, Input in_a, Input in_b, bool clamp) {
  if (w.lanes != kWaveSize) fail(std::string(s.name) + " in a partial wavefront");
  for (int copy = 1; copy < s.copies; ++copy) {
    for (int lane = 0; lane < 16; ++lane) {
      if (std::memcmp(w.a[lane], w.a[lane + 16 * copy], s.k * input_bytes(in_a)) != 0 ||
          std::memcmp(w.b[lane], w.b[lane + 16 * copy], s.k * input_bytes(in_b)) != 0) {
        fail(std::string(s.name) + ": lane " + std::to_string(lane + 16 * copy) +
             "'s A or B is not a copy of lane " + std::to_string(lane) + "'s");
      }
    }
  }
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      const Slot cd = s.d(i, j);
      Acc c;
      std::memcpy(&c, w.c[cd.lane] + sizeof(Acc) * cd.item, sizeof(Acc));
      Acc out;
      if constexpr (std::is_floating_point_v<Acc>) {
        float sum = c;
        for (int k = 0; k < s.k; ++k) {
          const Slot a = s.a(i, k), b = s.b(k, j);
          sum += static_cast<float>(input_value(w.a[a.lane], a.item, in_a)) *
                 static_cast<float>(input_value(w.b[b.lane], b.item, in_b));
        }
        out = sum;
      } else {
        int64_t sum = c;
        for (int k = 0; k < s.k; ++k) {
          const Slot a = s.a(i, k), b = s.b(k, j);
          sum += static_cast<int64_t>(input_value(w.a[a.lane], a.item, in_a)) *
                 static_cast<int64_t>(input_value(w.b[b.lane], b.item, in_b));
        }
        if (clamp) sum = std::clamp<int64_t>(sum, INT32_MIN, INT32_MAX);
        out = static_cast<Acc>(static_cast<uint32_t>(sum));
      }
      std::memcpy(w.d[cd.lane] + sizeof(Acc) * cd.item, &out, sizeof(Acc));
    }
  }
}

// The collective: deposit, meet, one lane computes, meet, take D.
template <typename CVec, typename AVec, typename BVec>
CVec matrix_op(const MatrixShape& s, Input in_a, Input in_b, const AVec& a, const BVec& b, const CVec& c,
               bool clamp = false) {
  static_assert(sizeof(AVec) <= sizeof(Wave::a[0]) && sizeof(CVec) <= sizeof(Wave::c[0]), "operand sizes");
  using Acc = std::remove_cvref_t<decltype(c[0])>;
  Wave& w = *self.wave;
  const int lane = self.id;
  // The register counts the instruction documents: m*n accumulators, m*k A and k*n B values
  // (times the copies) spread over the wavefront.
  if (sizeof(CVec) != sizeof(Acc) * (s.m * s.n / kWaveSize) ||
      sizeof(AVec) != size_t(input_bytes(in_a)) * (s.m * s.k * s.copies / kWaveSize) ||
      sizeof(BVec) != size_t(input_bytes(in_b)) * (s.k * s.n * s.copies / kWaveSize)) {
    fail(std::string(s.name) + ": operand or accumulator vectors of the wrong size");
  }
  std::memcpy(w.a[lane], &a, sizeof(AVec));
  std::memcpy(w.b[lane], &b, sizeof(BVec));
  std::memcpy(w.c[lane], &c, sizeof(CVec));
  w.barrier.arrive_and_wait();
  if (lane == 0) multiply<Acc>(w, s, in_a, in_b, clamp);
  w.barrier.arrive_and_wait();
  CVec d;
  std::memcpy(&d, w.d[lane], sizeof(CVec));
  return d;
}

inline void no_modifiers(const char* name, int cbsz, int abid, int blgp) {
  if (cbsz || abid || blgp) fail(std::string(name) + ": CBSZ / ABID / BLGP modifiers are not emulated");
}

}  // namespace tl_emu

// The builtins, under clang's names and argument lists.
#define TL_EMU_MFMA(name, shape, input)                                                    \
  template <typename AVec, typename CVec>                                                  \
  CVec __builtin_amdgcn_##name(AVec a, AVec b, CVec c, int cbsz, int abid, int blgp) {     \
    tl_emu::no_modifiers(#name, cbsz, abid, blgp);                                         \
    return tl_emu::matrix_op(shape, input, input, a, b, c);                                       \
  }
TL_EMU_MFMA(mfma_f32_32x32x2f32, tl_emu::kMfma32x32x2, tl_emu::Input::f32)
TL_EMU_MFMA(mfma_f32_16x16x4f32, tl_emu::kMfma16x16x4, tl_emu::Input::f32)
TL_EMU_MFMA(mfma_f32_32x32x8f16, tl_emu::kMfma32x32x8, tl_emu::Input::f16)
TL_EMU_MFMA(mfma_f32_16x16x16f16, tl_emu::kMfma16x16x16, tl_emu::Input::f16)
TL_EMU_MFMA(mfma_f32_32x32x8bf16_1k, tl_emu::kMfma32x32x8, tl_emu::Input::bf16)
TL_EMU_MFMA(mfma_f32_16x16x16bf16_1k, tl_emu::kMfma16x16x16, tl_emu::Input::bf16)
TL_EMU_MFMA(mfma_i32_32x32x8i8, tl_emu::kMfma32x32x8, tl_emu::Input::i8)
TL_EMU_MFMA(mfma_i32_16x16x16i8, tl_emu::kMfma16x16x16, tl_emu::Input::i8)
TL_EMU_MFMA(mfma_i32_32x32x16_i8, tl_emu::kMfma32x32x16, tl_emu::Input::i8)
TL_EMU_MFMA(mfma_i32_16x16x32_i8, tl_emu::kMfma16x16x32, tl_emu::Input::i8)
#undef TL_EMU_MFMA

template <typename AVec, typename CVec>
CVec __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(AVec a, AVec b, CVec c) {
  static_assert(sizeof(AVec) && TL_EMU_WAVE_SIZE == 32, "the _w32 WMMA builtins run on wave32");
  return tl_emu::matrix_op(tl_emu::kWmma16x16x16, tl_emu::Input::f16, tl_emu::Input::f16, a, b, c);
}
template <typename AVec, typename CVec>
CVec __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(AVec a, AVec b, CVec c) {
  static_assert(sizeof(AVec) && TL_EMU_WAVE_SIZE == 32, "the _w32 WMMA builtins run on wave32");
  return tl_emu::matrix_op(tl_emu::kWmma16x16x16, tl_emu::Input::bf16, tl_emu::Input::bf16, a, b, c);
}
// The sign flags say whether A's and B's bytes are signed; clamp saturates the sums.
template <typename AVec, typename CVec>
CVec __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(bool a_signed, AVec a, bool b_signed, AVec b, CVec c, bool clamp) {
  static_assert(sizeof(AVec) && TL_EMU_WAVE_SIZE == 32, "the _w32 WMMA builtins run on wave32");
  using tl_emu::Input;
  return tl_emu::matrix_op(tl_emu::kWmma16x16x16, a_signed ? Input::i8 : Input::u8, b_signed ? Input::i8 : Input::u8,
                           a, b, c, clamp);
}
