// Host-side encoding of TMA tensor maps (CUtensorMap, the 128-byte descriptor Hopper's
// cp.async.bulk.tensor reads), through the driver's cuTensorMapEncodeTiled.
//
// A kernel takes the map as a `const __grid_constant__` parameter of 128 bytes; the launch
// copies the bytes returned here into that parameter.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "runtime/cuda/tensor_map_spec.h"

namespace tl {

constexpr int kTensorMapBytes = 128;
constexpr int kTensorMapAlignment = 64;  // what cuTensorMapEncodeTiled asks of its output
constexpr int kTensorMapMaxRank = 5;

// Checks what the kernel fixes (rank 1..5, box extents 1..256, innermost box bytes a multiple
// of 16, swizzle 0/32/64/128 and the innermost box within it, a dtype TMA can move), so that
// a code generator can reject a bad box before any tensor exists. Throws CompileError.
void check_tensor_map_spec(const TensorMapSpec& spec);

// The map of a global tensor at `global_address` with `shape` (elements) and `strides`
// (elements), both outermost first, read in boxes of spec.box. Validates everything the
// driver would (check_tensor_map_spec, box rank == shape rank, innermost stride 1, the other
// strides multiples of 16 bytes below 2^40, the address 16-byte aligned, extents in
// 1..2^32) before it needs a driver, so each mistake is a CompileError naming it; then
// encodes with no interleave, L2 promotion of 256 bytes and out-of-bounds elements read as
// zero. Throws CompileError(Unsupported) without a driver that has cuTensorMapEncodeTiled,
// Internal when the driver refuses the arguments.
std::array<uint8_t, kTensorMapBytes> encode_tensor_map(const TensorMapSpec& spec, uint64_t global_address,
                                                       const std::vector<int64_t>& shape,
                                                       const std::vector<int64_t>& strides);

}  // namespace tl
