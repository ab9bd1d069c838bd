// TMA tensor maps: every check encode_tensor_map makes before it needs a driver (so these
// run anywhere), the Unsupported error without a driver, a TMA kernel compiled for sm_90a,
// and, on a Hopper GPU, maps that a kernel reads tiles through (strided and partial tiles,
// 2-D and 3-D), compared with the host.
#include "expect_error.h"
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda/tensor_map.h"

namespace tl {
namespace {

using testing::contains;
using testing::expect_compile_error;

// A valid map: a 1024 x 512 float16 tensor in 64 x 64 boxes with the 128-byte swizzle.
struct Case {
  TensorMapSpec spec{DataType::Float(16), {64, 64}, 128};
  uint64_t address = 0x7f0000000000;
  std::vector<int64_t> shape{1024, 512};
  std::vector<int64_t> strides{512, 1};
};

// Encodes c and returns the error; fails the test when it is not of `kind` or its message
// lacks `part`. Each error must carry a hint.
CompileError encode_error(const Case& c, ErrorKind kind, const std::string& part) {
  CompileError e = expect_compile_error([&] { encode_tensor_map(c.spec, c.address, c.shape, c.strides); });
  EXPECT_EQ(e.kind(), kind) << e.what();
  EXPECT_TRUE(contains(e.what(), part)) << e.what();
  EXPECT_FALSE(e.hint().empty()) << e.what();
  return e;
}

TEST(TensorMapChecks, RankIsOneToFive) {
  Case c;
  c.shape = {};
  c.strides = {};
  c.spec.box = {};
  encode_error(c, ErrorKind::Shape, "1 to 5 dimensions; shape () has 0");
  c.shape = {2, 2, 2, 2, 2, 16};
  c.strides = {512, 256, 128, 64, 16, 1};
  c.spec.box = {1, 1, 1, 1, 1, 16};
  c.spec.swizzle_bytes = 0;
  encode_error(c, ErrorKind::Shape, "has 6");
}

TEST(TensorMapChecks, BoxAndStridesHaveTheShapesRank) {
  Case c;
  c.spec.box = {64};
  encode_error(c, ErrorKind::Shape, "box (64,) has 1 dimensions but the tensor's shape (1024, 512) has 2");
  c = Case();
  c.strides = {1};
  encode_error(c, ErrorKind::Shape, "strides (1,)");
}

TEST(TensorMapChecks, InnermostStrideIsOne) {
  Case c;
  c.strides = {1024, 2};
  encode_error(c, ErrorKind::Unsupported, "innermost dimension contiguous (stride 1)");
}

TEST(TensorMapChecks, OuterStridesAreMultiplesOf16Bytes) {
  Case c;
  c.shape = {1024, 500};
  c.strides = {500, 1};  // 1000 bytes
  c.spec.box = {64, 16};
  c.spec.swizzle_bytes = 32;
  encode_error(c, ErrorKind::Unsupported, "dimension 0 of float16 shape (1024, 500), strides (500, 1) "
                                          "(elements) has stride 500 (1000 bytes)");
  c.shape = {4, 4, 512};
  c.strides = {2052, 512, 1};  // the middle one is fine, the outer one is not
  c.spec.box = {1, 4, 64};
  c.spec.swizzle_bytes = 128;
  encode_error(c, ErrorKind::Unsupported, "dimension 0");
  c.strides = {0, 512, 1};
  encode_error(c, ErrorKind::Unsupported, "has stride 0");
}

TEST(TensorMapChecks, OuterStridesAreBelow2To40Bytes) {
  Case c;
  c.strides = {int64_t(1) << 39, 1};  // 2^40 bytes of float16
  encode_error(c, ErrorKind::Unsupported, "(out of range)");
  c.strides = {(int64_t(1) << 39) - 8, 1};  // just below: passes every check before the driver
  try {
    encode_tensor_map(c.spec, c.address, c.shape, c.strides);
  } catch (const CompileError& e) {
    EXPECT_FALSE(contains(e.what(), "below 2^40")) << e.what();
  }
}

TEST(TensorMapChecks, AddressIs16ByteAligned) {
  Case c;
  c.address = 0x7f0000000008;
  encode_error(c, ErrorKind::Unsupported, "16-byte-aligned global address, got 0x7f0000000008");
}

TEST(TensorMapChecks, BoxExtentsAreOneTo256) {
  Case c;
  c.spec.box = {257, 64};
  encode_error(c, ErrorKind::Shape, "dimension 0 has extent 257, outside 1..256");
  c.spec.box = {0, 64};
  encode_error(c, ErrorKind::Shape, "dimension 0 has extent 0");
  c.spec.box = {64, 512};
  c.spec.swizzle_bytes = 0;
  encode_error(c, ErrorKind::Shape, "dimension 1 has extent 512");
}

TEST(TensorMapChecks, InnermostBoxIsAMultipleOf16Bytes) {
  Case c;
  c.spec.box = {64, 12};  // 24 bytes of float16
  encode_error(c, ErrorKind::Shape, "the innermost dimension is 24 bytes, not a multiple of 16");
  c.spec = {DataType::Float(32), {8, 2}, 0};  // 8 bytes
  c.strides = {1024, 1};
  encode_error(c, ErrorKind::Shape, "8 bytes, not a multiple of 16");
}

TEST(TensorMapChecks, SwizzledBoxFitsTheSwizzle) {
  Case c;
  c.spec.box = {64, 128};  // 256 bytes of float16
  encode_error(c, ErrorKind::Shape, "256 bytes, wider than its 128-byte swizzle");
  c.spec.box = {64, 32};  // 64 bytes
  c.spec.swizzle_bytes = 32;
  CompileError e = encode_error(c, ErrorKind::Shape, "64 bytes, wider than its 32-byte swizzle");
  EXPECT_TRUE(contains(e.hint(), "16 elements")) << e.hint();
  c.spec.swizzle_bytes = 48;
  encode_error(c, ErrorKind::Unsupported, "swizzle of 48 bytes does not exist");
}

TEST(TensorMapChecks, DtypeIsOneTmaMoves) {
  for (DataType t : {DataType::Bool(), DataType(TypeCode::Float4E2M1, 4), DataType(TypeCode::Float, 16, 2),
                     DataType::Handle(), DataType(TypeCode::Int, 4)}) {
    Case c;
    c.spec.dtype = t;
    encode_error(c, ErrorKind::Unsupported, "cannot describe elements of dtype " + t.str());
  }
}

TEST(TensorMapChecks, GlobalExtentsAreOneTo2To32) {
  Case c;
  c.shape = {1024, 0};
  encode_error(c, ErrorKind::Shape, "dimension 1 is outside 1..2^32");
  c.shape = {(int64_t(1) << 32) + 1, 512};
  encode_error(c, ErrorKind::Shape, "dimension 0 is outside 1..2^32");
}

// The spec alone can be checked when the kernel is generated.
TEST(TensorMapChecks, SpecIsCheckedWithoutATensor) {
  EXPECT_NO_THROW(check_tensor_map_spec({DataType::BFloat16(), {128, 64}, 128}));
  EXPECT_NO_THROW(check_tensor_map_spec({DataType::Float(32), {256, 4}, 0}));
  EXPECT_NO_THROW(check_tensor_map_spec({DataType(TypeCode::Float8E4M3, 8), {1, 2, 3, 4, 128}, 128}));
  EXPECT_EQ(expect_compile_error([] { check_tensor_map_spec({DataType::Float(16), {64, 8, 4}, 32}); }).kind(),
            ErrorKind::Shape);  // 8 bytes innermost
  EXPECT_EQ(expect_compile_error([] { check_tensor_map_spec({DataType::Float(16), {}, 0}); }).kind(),
            ErrorKind::Shape);
}

// Every supported dtype passes the checks (it fails later, at the driver, or succeeds on a GPU).
TEST(TensorMapChecks, EverySupportedDtypePasses) {
  for (const char* name : {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "uint16",
                           "int32", "uint32", "int64", "uint64", "float8_e4m3", "float8_e5m2"}) {
    DataType t = DataType::parse(name);
    EXPECT_NO_THROW(check_tensor_map_spec({t, {8, 128 / t.bytes()}, 128})) << name;
  }
}

TEST(TensorMapDriver, WithoutADriverEncodingIsUnsupported) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  Case c;
  CompileError e = expect_compile_error([&] { encode_tensor_map(c.spec, c.address, c.shape, c.strides); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  EXPECT_TRUE(contains(e.what(), "no usable CUDA device")) << e.what();
}

// ---- a TMA kernel ----------------------------------------------------------------------

// Each block loads one box of a rows x cols float tensor through the map (innermost
// coordinate first, as PTX takes them) and writes it to a padded copy of the tensor, whose
// rows are tile_cols * gridDim.x wide: out-of-bounds elements arrive as zeros.
const char* kTmaSource = R"(
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

__device__ void wait_for(unsigned bar) {
  asm volatile("{\n .reg .pred p;\n WAIT:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
               " @!p bra WAIT;\n}\n" :: "r"(bar) : "memory");
}

template <int Rank>
__device__ void load_box(const TensorMap& map, float* tile, int x, int y, int z, unsigned bytes) {
  __shared__ alignas(8) unsigned long long barrier;
  unsigned bar = unsigned(__cvta_generic_to_shared(&barrier));
  unsigned dst = unsigned(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
    if (Rank == 2)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                   " [%0], [%1, {%2, %3}], [%4];"
                   :: "r"(dst), "l"(&map), "r"(x), "r"(y), "r"(bar) : "memory");
    else
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                   " [%0], [%1, {%2, %3, %4}], [%5];"
                   :: "r"(dst), "l"(&map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
  }
  __syncthreads();
  wait_for(bar);
}

// box rows x cols; out is (gridDim.y * rows) x (gridDim.x * cols).
extern "C" __global__ void tma_tile_2d(const __grid_constant__ TensorMap map, float* out, int rows, int cols) {
  __shared__ alignas(128) float tile[64 * 64];
  load_box<2>(map, tile, blockIdx.x * cols, blockIdx.y * rows, 0, rows * cols * 4);
  int width = gridDim.x * cols;
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x)
    out[(blockIdx.y * rows + i / cols) * width + blockIdx.x * cols + i % cols] = tile[i];
}

// box planes x rows x cols; out is (gridDim.z * planes) x (gridDim.y * rows) x (gridDim.x * cols).
extern "C" __global__ void tma_tile_3d(const __grid_constant__ TensorMap map, float* out, int planes, int rows,
                                       int cols) {
  __shared__ alignas(128) float tile[64 * 64];
  load_box<3>(map, tile, blockIdx.x * cols, blockIdx.y * rows, blockIdx.z * planes, planes * rows * cols * 4);
  int width = gridDim.x * cols, height = gridDim.y * rows;
  for (int i = threadIdx.x; i < planes * rows * cols; i += blockDim.x) {
    int p = i / (rows * cols), r = i / cols % rows, c = i % cols;
    out[((blockIdx.z * planes + p) * height + blockIdx.y * rows + r) * width + blockIdx.x * cols + c] = tile[i];
  }
}
)";

TEST(TensorMapKernel, CompilesForSm90a) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  CudaCompileOptions options;
  options.arch = "sm_90a";
  options.output = CudaBinaryKind::Ptx;
  std::string ptx = compile_with_nvrtc(kTmaSource, "tma.cu", options).binary;
  EXPECT_TRUE(contains(ptx, "cp.async.bulk.tensor.2d")) << ptx.substr(0, 2000);
  EXPECT_TRUE(contains(ptx, ".param .align 64 .b8 tma_tile_2d_param_0[128]")) << ptx.substr(0, 2000);
  options.output = CudaBinaryKind::Cubin;
  EXPECT_FALSE(compile_with_nvrtc(kTmaSource, "tma.cu", options).binary.empty());
}

// ---- on a Hopper GPU -------------------------------------------------------------------

class DeviceFloats {
 public:
  explicit DeviceFloats(size_t count) : bytes_(count * sizeof(float)) {
    cuda_check(cuda_driver().cuMemAlloc(&pointer_, bytes_), "cuMemAlloc");
  }
  ~DeviceFloats() { cuda_driver().cuMemFree(pointer_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  void upload(const std::vector<float>& v) {
    cuda_check(cuda_driver().cuMemcpyHtoD(pointer_, v.data(), bytes_), "cuMemcpyHtoD");
  }
  std::vector<float> download() {
    std::vector<float> v(bytes_ / sizeof(float));
    cuda_check(cuda_driver().cuMemcpyDtoH(v.data(), pointer_, bytes_), "cuMemcpyDtoH");
    return v;
  }
  uint64_t address() const { return pointer_; }
  cu::DevicePtr* slot() { return &pointer_; }

 private:
  cu::DevicePtr pointer_ = 0;
  size_t bytes_;
};

class TensorMapGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA GPU: " << why;
    if (cuda_device_info(0).major < 9) GTEST_SKIP() << "TMA needs compute capability 9.0 or newer";
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
    CudaCompileOptions options;
    options.arch = device_arch(0);
    module_ = std::make_unique<CudaModule>(compile_with_nvrtc(kTmaSource, "tma.cu", options).binary);
  }
  std::unique_ptr<CudaModule> module_;
};

// A tensor whose element at flat index i is i + 1 (so zeros mark out-of-bounds reads).
std::vector<float> iota_plus_one(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i + 1);
  return v;
}

TEST_F(TensorMapGpu, EncodesMapsOfEveryRank) {
  DeviceFloats t(1 << 20);
  std::array<uint8_t, kTensorMapBytes> map =
      encode_tensor_map({DataType::Float(32), {64, 32}, 128}, t.address(), {1024, 512}, {512, 1});
  bool any = false;
  for (uint8_t b : map) any |= b != 0;
  EXPECT_TRUE(any);
  EXPECT_NO_THROW(encode_tensor_map({DataType::BFloat16(), {256}, 0}, t.address(), {4096}, {1}));
  EXPECT_NO_THROW(encode_tensor_map({DataType::Float(64), {1, 2}, 0}, t.address(), {4, 2}, {2, 1}));
  EXPECT_NO_THROW(encode_tensor_map({DataType(TypeCode::Float8E4M3, 8), {1, 2, 2, 8, 128}, 128}, t.address(),
                                    {2, 4, 4, 16, 256}, {65536, 16384, 4096, 256, 1}));
}

// 100 x 72 floats stored with rows of 80 (a strided view), read in 32 x 16 boxes: the
// partial last row and column of boxes read zeros past the tensor's edge.
TEST_F(TensorMapGpu, TwoDimensionalBoxesOfAStridedTensor) {
  const int rows = 100, cols = 72, pitch = 80, box_r = 32, box_c = 16;
  std::vector<float> host = iota_plus_one(size_t(rows) * pitch);
  DeviceFloats in(host.size());
  in.upload(host);
  std::array<uint8_t, kTensorMapBytes> map =
      encode_tensor_map({DataType::Float(32), {box_r, box_c}, 0}, in.address(), {rows, cols}, {pitch, 1});
  const int gx = (cols + box_c - 1) / box_c, gy = (rows + box_r - 1) / box_r;
  const int width = gx * box_c, height = gy * box_r;
  DeviceFloats out(size_t(width) * height);
  int r = box_r, c = box_c;
  void* args[] = {map.data(), out.slot(), &r, &c};
  module_->function("tma_tile_2d").launch({unsigned(gx), unsigned(gy), 1}, {128, 1, 1}, 0, nullptr, args);
  cuda_check(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<float> got = out.download();
  size_t wrong = 0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      float want = y < rows && x < cols ? host[size_t(y) * pitch + x] : 0.0f;
      wrong += got[size_t(y) * width + x] != want;
    }
  EXPECT_EQ(wrong, 0u);
}

// 3-D: 5 x 20 x 24 floats with planes 512 floats apart and rows 32, in 2 x 8 x 8 boxes.
TEST_F(TensorMapGpu, ThreeDimensionalBoxes) {
  const int planes = 5, rows = 20, cols = 24, plane_stride = 512, row_stride = 32;
  const int box_p = 2, box_r = 8, box_c = 8;
  std::vector<float> host = iota_plus_one(size_t(planes) * plane_stride);
  DeviceFloats in(host.size());
  in.upload(host);
  // The 32-byte swizzle reorders 16-byte chunks in shared memory, which the kernel does not
  // undo: the swizzled map must encode, the unswizzled one is read.
  EXPECT_NO_THROW(encode_tensor_map({DataType::Float(32), {box_p, box_r, box_c}, 32}, in.address(),
                                    {planes, rows, cols}, {plane_stride, row_stride, 1}));
  std::array<uint8_t, kTensorMapBytes> map =
      encode_tensor_map({DataType::Float(32), {box_p, box_r, box_c}, 0}, in.address(), {planes, rows, cols},
                        {plane_stride, row_stride, 1});
  const int gx = cols / box_c, gy = (rows + box_r - 1) / box_r, gz = (planes + box_p - 1) / box_p;
  const int width = gx * box_c, height = gy * box_r, depth = gz * box_p;
  DeviceFloats out(size_t(width) * height * depth);
  int p = box_p, r = box_r, c = box_c;
  void* args[] = {map.data(), out.slot(), &p, &r, &c};
  module_->function("tma_tile_3d")
      .launch({unsigned(gx), unsigned(gy), unsigned(gz)}, {128, 1, 1}, 0, nullptr, args);
  cuda_check(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<float> got = out.download();
  size_t wrong = 0;
  for (int z = 0; z < depth; ++z)
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) {
        float want = z < planes && y < rows ? host[size_t(z) * plane_stride + size_t(y) * row_stride + x] : 0.0f;
        wrong += got[(size_t(z) * height + y) * width + x] != want;
      }
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace tl
