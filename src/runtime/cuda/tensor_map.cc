#include "runtime/cuda/tensor_map.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "ir/error.h"
#include "runtime/cuda/driver.h"

namespace tl {
namespace {

constexpr int64_t kMaxBoxExtent = 256;
constexpr int64_t kMaxGlobalExtent = int64_t(1) << 32;
constexpr int64_t kMaxStrideBytes = int64_t(1) << 40;

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string hex(uint64_t x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(x));
  return buf;
}

// The driver's element type for a dtype; false for what TMA cannot move. TMA copies bytes
// without converting them, so signed and 8-bit float types travel as the unsigned type of
// their width.
bool driver_data_type(DataType t, int* out) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case TypeCode::Float:
      if (t.bits == 16) *out = cu::kTensorMapFloat16;
      else if (t.bits == 32) *out = cu::kTensorMapFloat32;
      else if (t.bits == 64) *out = cu::kTensorMapFloat64;
      else return false;
      return true;
    case TypeCode::BFloat:
      *out = cu::kTensorMapBFloat16;
      return t.bits == 16;
    case TypeCode::Float8E4M3:
    case TypeCode::Float8E5M2:
      *out = cu::kTensorMapUInt8;
      return t.bits == 8;
    case TypeCode::Int:
    case TypeCode::UInt: {
      bool is_signed = t.code == TypeCode::Int;
      if (t.bits == 8) *out = cu::kTensorMapUInt8;
      else if (t.bits == 16) *out = cu::kTensorMapUInt16;
      else if (t.bits == 32) *out = is_signed ? cu::kTensorMapInt32 : cu::kTensorMapUInt32;
      else if (t.bits == 64) *out = is_signed ? cu::kTensorMapInt64 : cu::kTensorMapUInt64;
      else return false;
      return true;
    }
    default:
      return false;
  }
}

int driver_swizzle(int bytes) {
  switch (bytes) {
    case 32: return cu::kTensorMapSwizzle32B;
    case 64: return cu::kTensorMapSwizzle64B;
    case 128: return cu::kTensorMapSwizzle128B;
    default: return cu::kTensorMapSwizzleNone;
  }
}

void check_rank(size_t rank, const std::string& what) {
  if (rank >= 1 && rank <= size_t(kTensorMapMaxRank)) return;
  fail(ErrorKind::Shape, {}, "a TMA tensor map describes 1 to 5 dimensions; " + what,
       "merge or split dimensions so that 1 to 5 remain, or copy this tensor without TMA");
}

void check_dtype(DataType t) {
  int unused = 0;
  if (driver_data_type(t, &unused)) return;
  fail(ErrorKind::Unsupported, {}, "a TMA tensor map cannot describe elements of dtype " + t.str(),
       "TMA moves float16, bfloat16, float32, float64, float8 and 8- to 64-bit integers; copy this "
       "tensor without TMA");
}

void check_box(const TensorMapSpec& spec) {
  const int64_t elem = spec.dtype.bytes();
  for (size_t d = 0; d < spec.box.size(); ++d) {
    int64_t e = spec.box[d];
    if (e < 1 || e > kMaxBoxExtent)
      fail(ErrorKind::Shape, {},
           "TMA box " + list_text(spec.box) + ": dimension " + std::to_string(d) + " has extent " +
               std::to_string(e) + ", outside 1..256",
           "one TMA copy moves at most 256 elements per dimension; split the tile into several copies");
  }
  const int64_t inner_bytes = spec.box.back() * elem;
  if (inner_bytes % 16 != 0)
    fail(ErrorKind::Shape, {},
         "TMA box " + list_text(spec.box) + " of " + spec.dtype.str() + ": the innermost dimension is " +
             std::to_string(inner_bytes) + " bytes, not a multiple of 16",
         "make the innermost box extent a multiple of " + std::to_string(16 / std::max<int64_t>(elem, 1)) +
             " elements of " + spec.dtype.str());
  if (spec.swizzle_bytes != 0 && inner_bytes > spec.swizzle_bytes)
    fail(ErrorKind::Shape, {},
         "TMA box " + list_text(spec.box) + " of " + spec.dtype.str() + ": the innermost dimension is " +
             std::to_string(inner_bytes) + " bytes, wider than its " + std::to_string(spec.swizzle_bytes) +
             "-byte swizzle",
         "with a swizzle the innermost box extent is at most the swizzle width (" +
             std::to_string(spec.swizzle_bytes / elem) + " elements here); use a wider swizzle or split the box");
}

void check_swizzle(int bytes) {
  if (bytes == 0 || bytes == 32 || bytes == 64 || bytes == 128) return;
  fail(ErrorKind::Unsupported, {}, "a TMA swizzle of " + std::to_string(bytes) + " bytes does not exist",
       "the swizzle is 0 (none), 32, 64 or 128 bytes");
}

void check_extents(const std::vector<int64_t>& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] >= 1 && shape[d] <= kMaxGlobalExtent) continue;
    fail(ErrorKind::Shape, {},
         "a TMA tensor map cannot describe shape " + list_text(shape) + ": dimension " + std::to_string(d) +
             " is outside 1..2^32",
         "TMA needs a non-empty tensor with at most 2^32 elements per dimension; copy it without TMA");
  }
}

// The layout the driver can describe: the innermost dimension contiguous, the others at
// positive strides that are multiples of 16 bytes (the alignment of TMA's row addresses).
void check_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, DataType t) {
  const std::string where = "shape " + list_text(shape) + ", strides " + list_text(strides) + " (elements)";
  if (strides.back() != 1)
    fail(ErrorKind::Unsupported, {},
         "a TMA tensor map needs the innermost dimension contiguous (stride 1); " + where,
         "pass a tensor whose last dimension is contiguous (.contiguous())");
  const int64_t elem = t.bytes();
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    int64_t s = strides[d];
    bool in_range = s > 0 && s < kMaxStrideBytes / elem;
    if (in_range && (s * elem) % 16 == 0) continue;
    std::string bytes = in_range ? std::to_string(s * elem) + " bytes" : "out of range";
    fail(ErrorKind::Unsupported, {},
         "a TMA tensor map needs every outer stride to be a positive multiple of 16 bytes below 2^40; "
         "dimension " + std::to_string(d) + " of " + t.str() + " " + where + " has stride " + std::to_string(s) +
             " (" + bytes + ")",
         "pad the rows so that each starts on a 16-byte boundary (an innermost extent that is a multiple of " +
             std::to_string(16 / std::max<int64_t>(elem, 1)) + " elements here), or copy without TMA");
  }
}

void check_address(uint64_t address) {
  if (address % 16 == 0) return;
  fail(ErrorKind::Unsupported, {}, "a TMA tensor map needs a 16-byte-aligned global address, got " + hex(address),
       "pass a tensor that starts on an aligned address (e.g. .clone() of a sliced view)");
}

struct alignas(kTensorMapAlignment) MapStorage {
  uint8_t bytes[kTensorMapBytes];
};

// The driver's arguments, innermost dimension first.
struct DriverArgs {
  int data_type = 0;
  uint32_t rank = 0;
  uint64_t dims[kTensorMapMaxRank] = {};
  uint64_t strides[kTensorMapMaxRank - 1] = {};  // bytes, for dimensions 1..rank-1
  uint32_t box[kTensorMapMaxRank] = {};
  uint32_t element_strides[kTensorMapMaxRank] = {};
};

DriverArgs driver_args(const TensorMapSpec& spec, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides) {
  DriverArgs a;
  driver_data_type(spec.dtype, &a.data_type);
  a.rank = uint32_t(shape.size());
  const size_t n = shape.size();
  for (size_t i = 0; i < n; ++i) {
    a.dims[i] = uint64_t(shape[n - 1 - i]);
    a.box[i] = uint32_t(spec.box[n - 1 - i]);
    a.element_strides[i] = 1;
    if (i > 0) a.strides[i - 1] = uint64_t(strides[n - 1 - i]) * uint64_t(spec.dtype.bytes());
  }
  return a;
}

[[noreturn]] void driver_refused(cu::Result rc, const TensorMapSpec& spec, uint64_t address,
                                 const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  fail(ErrorKind::Internal, {},
       "cuTensorMapEncodeTiled failed: " + cuda_error_text(rc) + "; arguments: dtype " + spec.dtype.str() +
           ", address " + hex(address) + ", shape " + list_text(shape) + ", strides " + list_text(strides) +
           " (elements, outermost first), box " + list_text(spec.box) + ", swizzle " +
           std::to_string(spec.swizzle_bytes) + " bytes",
       "the arguments pass the checks TMA documents; the device may lack TMA (compute capability 9.0 or "
       "newer is needed)");
}

}  // namespace

void check_tensor_map_spec(const TensorMapSpec& spec) {
  check_rank(spec.box.size(), "box " + list_text(spec.box) + " has " + std::to_string(spec.box.size()));
  check_dtype(spec.dtype);
  check_swizzle(spec.swizzle_bytes);
  check_box(spec);
}

std::array<uint8_t, kTensorMapBytes> encode_tensor_map(const TensorMapSpec& spec, uint64_t global_address,
                                                       const std::vector<int64_t>& shape,
                                                       const std::vector<int64_t>& strides) {
  check_rank(shape.size(), "shape " + list_text(shape) + " has " + std::to_string(shape.size()));
  if (spec.box.size() != shape.size())
    fail(ErrorKind::Shape, {},
         "TMA box " + list_text(spec.box) + " has " + std::to_string(spec.box.size()) +
             " dimensions but the tensor's shape " + list_text(shape) + " has " + std::to_string(shape.size()),
         "give one box extent per dimension of the global tensor");
  if (strides.size() != shape.size())
    fail(ErrorKind::Shape, {},
         "a TMA tensor map got shape " + list_text(shape) + " but strides " + list_text(strides),
         "give one stride (in elements) per dimension");
  check_tensor_map_spec(spec);
  check_extents(shape);
  check_strides(shape, strides, spec.dtype);
  check_address(global_address);

  cu::TensorMapEncodeTiledFn encode = cuda_tensor_map_encoder();
  const DriverArgs a = driver_args(spec, shape, strides);
  MapStorage map{};
  auto call = [&] {
    return encode(map.bytes, a.data_type, a.rank, reinterpret_cast<void*>(uintptr_t(global_address)), a.dims,
                  a.strides, a.box, a.element_strides, cu::kTensorMapInterleaveNone,
                  driver_swizzle(spec.swizzle_bytes), cu::kTensorMapL2Promotion256B,
                  cu::kTensorMapFloatOobFillNone);
  };
  cu::Result rc = call();
  if (rc == cu::kErrorInvalidContext) {  // a thread with no current context: as launches do
    cuda_ensure_context();
    rc = call();
  }
  if (rc != cu::kSuccess) driver_refused(rc, spec, global_address, shape, strides);
  std::array<uint8_t, kTensorMapBytes> out;
  std::memcpy(out.data(), map.bytes, kTensorMapBytes);
  return out;
}

}  // namespace tl
