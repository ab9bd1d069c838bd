// Host stand-in for HIP's hip_runtime.h: generated HIP kernels compile with g++ as plain C++
// and run one block at a time, each thread of the block on a std::thread (tl_emu/launch.h).
//
// - __shared__ is `static`: the block's threads share it, and blocks run one after another.
//   The dynamic LDS array is tl_dyn_smem below (the generated `extern __shared__` declaration
//   is compiled as a plain `extern` one).
// - threadIdx / blockIdx / blockDim / gridDim are per thread.
// - __syncthreads() is a barrier over the block's threads; cross-lane operations (shuffles and
//   the matrix-core builtins of tl_emu/matrix_cores.h) are collectives over the wavefront:
//   every lane deposits its value, the wavefront meets at a barrier, each lane reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#ifndef TL_EMU_WAVE_SIZE
#error "compile with -DTL_EMU_WAVE_SIZE=64 (CDNA) or 32 (RDNA)"
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
inline constexpr int warpSize = TL_EMU_WAVE_SIZE;

// The vector types the generated code moves data with (HIP's are vector-typed structs of
// the same size and alignment).
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };

// The dynamic LDS of the block running now, sized for the largest (gfx950's 160 KiB).
inline constexpr size_t kDynamicSharedBytes = 160 * 1024;
extern "C" {
alignas(1024) inline unsigned char tl_dyn_smem[kDynamicSharedBytes];
}

namespace tl_emu {

constexpr int kWaveSize = TL_EMU_WAVE_SIZE;

// One wavefront's meeting point: a barrier over its lanes and each lane's deposit.
struct Wave {
  explicit Wave(int lanes) : lanes(lanes), barrier(lanes) {}
  int lanes;
  std::barrier<> barrier;
  // Sized for the widest operands: WMMA's 32-byte A and B, MFMA 32x32's 64-byte accumulators.
  alignas(16) unsigned char a[kWaveSize][32], b[kWaveSize][32], c[kWaveSize][64], d[kWaveSize][64];
  uint64_t value[kWaveSize];
};

struct Block {
  explicit Block(int threads) : threads(threads), sync(threads), votes(0) {
    for (int first = 0; first < threads; first += kWaveSize)
      waves.push_back(std::make_unique<Wave>(std::min(kWaveSize, threads - first)));
  }
  int threads;
  std::barrier<> sync;
  std::vector<std::unique_ptr<Wave>> waves;
  std::atomic<int> votes;  // __syncthreads_count: the threads whose predicate holds
};

// The calling thread's block, wavefront and lane.
struct Lane {
  Block* block = nullptr;
  Wave* wave = nullptr;
  int id = 0;
};
inline thread_local Lane self;

// The first inconsistency an emulated operation found (a device would compute garbage);
// the launcher reports it.
inline std::mutex error_mutex;
inline std::string first_error;
inline void fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(error_mutex);
  if (first_error.empty()) first_error = what;
}

}  // namespace tl_emu

inline void __syncthreads() { tl_emu::self.block->sync.arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

namespace tl_emu {
// Every lane deposits its value, then reads lane source(self) of its wavefront.
template <typename T, typename Source>
T exchange(T var, const char* name, Source source_of) {
  static_assert(sizeof(T) <= 8, "shuffles move 4- and 8-byte values");
  Wave& w = *self.wave;
  const int lane = self.id;
  std::memcpy(&w.value[lane], &var, sizeof(T));
  w.barrier.arrive_and_wait();
  int source = source_of(lane);
  if (source < 0 || source >= w.lanes)
    fail(std::string(name) + " reads lane " + std::to_string(source) + " of a wavefront of " + std::to_string(w.lanes) +
         " lanes");
  T out;
  std::memcpy(&out, &w.value[source < 0 || source >= w.lanes ? lane : source], sizeof(T));
  w.barrier.arrive_and_wait();  // nobody deposits the next value before all have read this one
  return out;
}
}  // namespace tl_emu

// HIP's shuffles, within self's group of width lanes (a source past the group gives self's
// own value, as HIP's implementation does): __shfl_xor reads lane self ^ lane_mask,
// __shfl lane src_lane of the group, __shfl_down self + delta, __shfl_up self - delta.
template <typename T>
T __shfl_xor(T var, int lane_mask, int width = TL_EMU_WAVE_SIZE) {
  return tl_emu::exchange(var, "__shfl_xor", [&](int lane) {
    int source = lane ^ lane_mask;
    return source >= ((lane + width) & ~(width - 1)) ? lane : source;
  });
}
template <typename T>
T __shfl(T var, int src_lane, int width = TL_EMU_WAVE_SIZE) {
  return tl_emu::exchange(var, "__shfl", [&](int lane) { return (lane & ~(width - 1)) + (src_lane & (width - 1)); });
}
template <typename T>
T __shfl_down(T var, unsigned delta, int width = TL_EMU_WAVE_SIZE) {
  return tl_emu::exchange(var, "__shfl_down", [&](int lane) {
    int source = lane + int(delta);
    return (source & ~(width - 1)) != (lane & ~(width - 1)) ? lane : source;
  });
}
template <typename T>
T __shfl_up(T var, unsigned delta, int width = TL_EMU_WAVE_SIZE) {
  return tl_emu::exchange(var, "__shfl_up", [&](int lane) {
    int source = lane - int(delta);
    return source < (lane & ~(width - 1)) ? lane : source;
  });
}

// HIP's votes over the wavefront (every lane deposits its predicate, then each reads all)
// and the block barriers that count the threads whose predicate holds.
inline unsigned long long __ballot(int predicate) {
  tl_emu::Wave& w = *tl_emu::self.wave;
  w.value[tl_emu::self.id] = predicate != 0;
  w.barrier.arrive_and_wait();
  unsigned long long bits = 0;
  for (int lane = 0; lane < w.lanes; ++lane) bits |= (unsigned long long)(w.value[lane] != 0) << lane;
  w.barrier.arrive_and_wait();
  return bits;
}
inline int __any(int predicate) { return __ballot(predicate) != 0; }
inline int __all(int predicate) {
  int lanes = tl_emu::self.wave->lanes;
  return __ballot(predicate) == (lanes == 64 ? ~0ull : (1ull << lanes) - 1);
}
inline void __builtin_amdgcn_wave_barrier() { tl_emu::self.wave->barrier.arrive_and_wait(); }
inline int __syncthreads_count(int predicate) {
  tl_emu::Block& b = *tl_emu::self.block;
  b.sync.arrive_and_wait();  // the previous count is read by everyone
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) b.votes = 0;
  b.sync.arrive_and_wait();
  if (predicate) ++b.votes;
  b.sync.arrive_and_wait();
  return b.votes.load();
}
inline int __syncthreads_and(int predicate) { return __syncthreads_count(predicate) == tl_emu::self.block->threads; }
inline int __syncthreads_or(int predicate) { return __syncthreads_count(predicate) != 0; }

// ------------------------------------------------------------------ bits and math

inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

// ------------------------------------------------------------------ atomics

template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <typename T>
T atomicOr(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_or(value);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;  // the previous value, whether or not it was replaced
}
template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (old < value && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}

#include "tl_emu/matrix_cores.h"
