// encode_tensor_map against a stand-in driver (fake_cuda.cc), so that what reaches
// cuTensorMapEncodeTiled is checked on machines without a GPU: dimensions, strides and box
// reversed to innermost first, strides in bytes, the enum values, the map's alignment, the
// driver's error, the retry without a current context. Built twice: against a driver that has
// cuTensorMapEncodeTiled (FAKE_CUDA_HAS_TMA=1) and one that lacks it, which must still load
// and then make encoding Unsupported.
#include "../expect_error.h"
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "fake_cuda.h"
#include "ir/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/tensor_map.h"

namespace tl {
namespace {

// Chosen before anything loads the driver (it is loaded once per process).
const bool kFakeDriverChosen = setenv("TILELANG_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1) == 0;

using testing::contains;
using testing::expect_compile_error;

// The stand-in's controls, from the library the runtime loaded.
template <typename Fn>
Fn fake(const char* name) {
  cuda_driver();
  void* lib = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(lib, nullptr) << FAKE_CUDA_PATH;
  return reinterpret_cast<Fn>(lib ? dlsym(lib, name) : nullptr);
}

TEST(FakeDriver, LoadsAndReportsADevice) {
  ASSERT_TRUE(kFakeDriverChosen);
  std::string why;
  EXPECT_TRUE(cuda_device_available(&why)) << why;
  EXPECT_EQ(cuda_driver_version(), 11080);
}

#if FAKE_CUDA_HAS_TMA

const FakeEncodeCall& last_encode() { return *fake<const FakeEncodeCall* (*)()>("fake_cuda_last_encode")(); }
int encode_calls() { return fake<int (*)()>("fake_cuda_encode_calls")(); }

TEST(FakeDriverEncode, ArgumentsReachTheDriverInnermostFirst) {
  const uint64_t address = 0x7f0000001000;
  std::array<uint8_t, kTensorMapBytes> map = encode_tensor_map({DataType::BFloat16(), {2, 64, 64}, 128}, address,
                                                               {3, 1000, 4000}, {4096 * 1024, 4096, 1});
  const FakeEncodeCall& c = last_encode();
  EXPECT_EQ(c.rank, 3u);
  EXPECT_EQ(c.address, address);
  EXPECT_EQ(c.data_type, 9);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  EXPECT_EQ(c.dims[0], 4000u);
  EXPECT_EQ(c.dims[1], 1000u);
  EXPECT_EQ(c.dims[2], 3u);
  EXPECT_EQ(c.strides[0], 4096u * 2);         // bytes of dimension 1 (rows)
  EXPECT_EQ(c.strides[1], 4096u * 1024 * 2);  // bytes of dimension 2
  EXPECT_EQ(c.box[0], 64u);
  EXPECT_EQ(c.box[1], 64u);
  EXPECT_EQ(c.box[2], 2u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.element_strides[i], 1u);
  EXPECT_EQ(c.interleave, 0);    // CU_TENSOR_MAP_INTERLEAVE_NONE
  EXPECT_EQ(c.swizzle, 3);       // CU_TENSOR_MAP_SWIZZLE_128B
  EXPECT_EQ(c.l2_promotion, 3);  // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
  EXPECT_EQ(c.oob_fill, 0);      // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
  EXPECT_EQ(c.map_address % 64, 0u);
  for (int i = 0; i < kTensorMapBytes; ++i) EXPECT_EQ(map[size_t(i)], uint8_t(i * 3 + 1)) << i;
}

TEST(FakeDriverEncode, RankOneHasNoStrides) {
  encode_tensor_map({DataType::Float(32), {256}, 0}, 0x1000, {100000}, {1});
  const FakeEncodeCall& c = last_encode();
  EXPECT_EQ(c.rank, 1u);
  EXPECT_EQ(c.dims[0], 100000u);
  EXPECT_EQ(c.box[0], 256u);
  EXPECT_EQ(c.swizzle, 0);
}

TEST(FakeDriverEncode, DtypesAndSwizzlesTakeTheDriversValues) {
  // CUtensorMapDataType: UINT8 0, UINT16 1, UINT32 2, INT32 3, UINT64 4, INT64 5, FLOAT16 6,
  // FLOAT32 7, FLOAT64 8, BFLOAT16 9.
  const std::pair<const char*, int> types[] = {
      {"float16", 6}, {"bfloat16", 9}, {"float32", 7}, {"float64", 8}, {"int8", 0},
      {"uint8", 0},   {"int16", 1},    {"uint16", 1},  {"int32", 3},   {"uint32", 2},
      {"int64", 5},   {"uint64", 4},   {"float8_e4m3", 0}, {"float8_e5m2", 0}};
  for (auto [name, value] : types) {
    DataType t = DataType::parse(name);
    encode_tensor_map({t, {4, 128 / t.bytes()}, 128}, 0x1000, {64, 1024 / t.bytes()}, {1024 / t.bytes(), 1});
    EXPECT_EQ(last_encode().data_type, value) << name;
  }
  for (auto [bytes, value] : {std::pair{0, 0}, {32, 1}, {64, 2}, {128, 3}}) {
    encode_tensor_map({DataType::Int(8), {4, 32}, bytes}, 0x1000, {64, 64}, {64, 1});
    EXPECT_EQ(last_encode().swizzle, value) << bytes;
  }
}

TEST(FakeDriverEncode, ChecksComeBeforeTheDriver) {
  int before = encode_calls();
  EXPECT_EQ(expect_compile_error([] {
              encode_tensor_map({DataType::Float(16), {64, 64}, 128}, 0x1008, {1024, 512}, {512, 1});
            }).kind(),
            ErrorKind::Unsupported);
  EXPECT_EQ(encode_calls(), before);
}

TEST(FakeDriverEncode, DriverErrorIsInternalAndNamesTheArguments) {
  fake<void (*)(int)>("fake_cuda_fail_next_encode")(1);
  CompileError e = expect_compile_error(
      [] { encode_tensor_map({DataType::Float(16), {64, 64}, 128}, 0x7f0000000000, {1024, 512}, {512, 1}); });
  EXPECT_EQ(e.kind(), ErrorKind::Internal);
  for (const char* part : {"cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE (invalid argument)",
                           "dtype float16", "address 0x7f0000000000", "shape (1024, 512)", "strides (512, 1)",
                           "box (64, 64)", "swizzle 128 bytes"})
    EXPECT_TRUE(contains(e.what(), part)) << part << " in: " << e.what();
}

TEST(FakeDriverEncode, AThreadWithoutContextGetsOneAndRetries) {
  fake<void (*)(bool)>("fake_cuda_refuse_without_context")(true);
  fake<void (*)()>("fake_cuda_clear_context")();
  int before = encode_calls();
  EXPECT_NO_THROW(encode_tensor_map({DataType::Float(32), {8, 8}, 0}, 0x1000, {64, 64}, {64, 1}));
  EXPECT_EQ(encode_calls(), before + 2);
  fake<void (*)(bool)>("fake_cuda_refuse_without_context")(false);
}

#else  // a driver without cuTensorMapEncodeTiled

TEST(FakeDriverWithoutTma, EncodingIsUnsupportedAndNamesTheDriver) {
  EXPECT_NO_THROW(cuda_driver());
  CompileError e = expect_compile_error(
      [] { encode_tensor_map({DataType::Float(16), {64, 64}, 128}, 0x7f0000000000, {1024, 512}, {512, 1}); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(e.what(), "lacks cuTensorMapEncodeTiled")) << e.what();
  EXPECT_TRUE(contains(e.what(), FAKE_CUDA_PATH)) << e.what();
  EXPECT_TRUE(contains(e.what(), "version 11080")) << e.what();
  EXPECT_TRUE(contains(e.hint(), "CUDA 12.0")) << e.hint();
}

TEST(FakeDriverWithoutTma, ChecksStillComeFirst) {
  CompileError e = expect_compile_error(
      [] { encode_tensor_map({DataType::Float(16), {64, 300}, 0}, 0x7f0000000000, {1024, 512}, {512, 1}); });
  EXPECT_EQ(e.kind(), ErrorKind::Shape) << e.what();
}

#endif

}  // namespace
}  // namespace tl
