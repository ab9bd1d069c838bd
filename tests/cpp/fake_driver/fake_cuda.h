// What the stand-in driver (fake_cuda.cc) records of a cuTensorMapEncodeTiled call, as the
// driver received it (innermost dimension first).
#pragma once
#include <cstdint>

struct FakeEncodeCall {
  uintptr_t map_address = 0;
  int data_type = -1;
  uint32_t rank = 0;
  uintptr_t address = 0;
  uint64_t dims[5] = {};
  uint64_t strides[4] = {};
  uint32_t box[5] = {};
  uint32_t element_strides[5] = {};
  int interleave = -1, swizzle = -1, l2_promotion = -1, oob_fill = -1;
};
