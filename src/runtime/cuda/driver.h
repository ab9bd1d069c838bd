// The CUDA driver API, loaded at run time from libcuda.so.1 (never linked), so that the
// package installs and imports on machines without a GPU or driver.
//
// Search order: $TILELANG_CUDA_DRIVER_PATH, then libcuda.so.1 and libcuda.so through the
// loader's search path (where the driver installs itself).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

// The driver's opaque handle types, under the tags cuda.h gives them, so that handles from
// other CUDA code (a torch stream, a context) can be passed in as they are.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;

namespace tl {
namespace cu {

using Result = int;  // CUresult
using Device = int;  // CUdevice
using Context = CUctx_st*;
using Module = CUmod_st*;
using Function = CUfunc_st*;
using Stream = CUstream_st*;
using DevicePtr = unsigned long long;  // CUdeviceptr

constexpr Result kSuccess = 0;
constexpr Result kErrorDeinitialized = 4;
constexpr Result kErrorNoDevice = 100;
constexpr Result kErrorInvalidContext = 201;
constexpr Result kErrorCooperativeLaunchTooLarge = 720;

// CUdevice_attribute values used here.
enum DeviceAttribute : int {
  kDeviceMaxThreadsPerBlock = 1,
  kDeviceMultiprocessorCount = 16,
  kDeviceComputeCapabilityMajor = 75,
  kDeviceComputeCapabilityMinor = 76,
  kDeviceMaxSharedMemoryPerBlockOptin = 97,
};

// CUfunction_attribute values used here.
enum FunctionAttribute : int {
  kFuncMaxThreadsPerBlock = 0,
  kFuncSharedSizeBytes = 1,
  kFuncConstSizeBytes = 2,
  kFuncLocalSizeBytes = 3,
  kFuncNumRegs = 4,
  kFuncPtxVersion = 5,
  kFuncBinaryVersion = 6,
  kFuncMaxDynamicSharedSizeBytes = 8,
};

// CUtensorMapDataType values used here (TMA moves bytes: signed and 8-bit float types travel
// as the unsigned type of their width).
enum TensorMapDataType : int {
  kTensorMapUInt8 = 0,
  kTensorMapUInt16 = 1,
  kTensorMapUInt32 = 2,
  kTensorMapInt32 = 3,
  kTensorMapUInt64 = 4,
  kTensorMapInt64 = 5,
  kTensorMapFloat16 = 6,
  kTensorMapFloat32 = 7,
  kTensorMapFloat64 = 8,
  kTensorMapBFloat16 = 9,
};
// CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion and
// CUtensorMapFloatOOBfill values used here.
enum TensorMapInterleave : int { kTensorMapInterleaveNone = 0 };
enum TensorMapSwizzle : int {
  kTensorMapSwizzleNone = 0,
  kTensorMapSwizzle32B = 1,
  kTensorMapSwizzle64B = 2,
  kTensorMapSwizzle128B = 3,
};
enum TensorMapL2Promotion : int { kTensorMapL2Promotion256B = 3 };
enum TensorMapFloatOobFill : int { kTensorMapFloatOobFillNone = 0 };  // out-of-bounds reads are zero

// cuTensorMapEncodeTiled; the map is CUtensorMap (128 bytes, 64-byte aligned), the enums are
// passed as the ints they are.
using TensorMapEncodeTiledFn = Result (*)(void* tensor_map, int data_type, uint32_t rank, void* global_address,
                                          const uint64_t* global_dim, const uint64_t* global_strides,
                                          const uint32_t* box_dim, const uint32_t* element_strides,
                                          int interleave, int swizzle, int l2_promotion, int oob_fill);

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and CUlaunchAttribute, CUDA
// 12): programmatic stream serialization (T.pdl_sync kernels) and cooperative launches
// (T.sync_grid kernels).
constexpr int kLaunchAttributeCooperative = 2;
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
struct LaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
    int cooperative;
  } value;
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  Stream stream;
  LaunchAttribute* attrs;
  unsigned num_attrs;
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
static_assert(sizeof(LaunchConfig) == 56, "CUlaunchConfig is 56 bytes on 64-bit hosts");
using LaunchKernelExFn = Result (*)(const LaunchConfig* config, Function function, void** params, void** extra);

}  // namespace cu

// The driver entry points this project calls, with the signatures of cuda.h. Members that
// cuda.h maps to versioned symbols are bound to those (cuMemAlloc -> cuMemAlloc_v2, ...).
struct CudaDriverApi {
  cu::Result (*cuInit)(unsigned flags) = nullptr;
  cu::Result (*cuDriverGetVersion)(int* version) = nullptr;
  cu::Result (*cuGetErrorName)(cu::Result error, const char** name) = nullptr;
  cu::Result (*cuGetErrorString)(cu::Result error, const char** text) = nullptr;
  cu::Result (*cuDeviceGetCount)(int* count) = nullptr;
  cu::Result (*cuDeviceGet)(cu::Device* device, int ordinal) = nullptr;
  cu::Result (*cuDeviceGetName)(char* name, int length, cu::Device device) = nullptr;
  cu::Result (*cuDeviceGetAttribute)(int* value, int attribute, cu::Device device) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRetain)(cu::Context* context, cu::Device device) = nullptr;
  cu::Result (*cuCtxGetCurrent)(cu::Context* context) = nullptr;
  cu::Result (*cuCtxSetCurrent)(cu::Context context) = nullptr;
  cu::Result (*cuCtxGetDevice)(cu::Device* device) = nullptr;
  cu::Result (*cuCtxSynchronize)() = nullptr;
  cu::Result (*cuModuleLoadData)(cu::Module* module, const void* image) = nullptr;
  cu::Result (*cuModuleUnload)(cu::Module module) = nullptr;
  cu::Result (*cuModuleGetFunction)(cu::Function* function, cu::Module module, const char* name) = nullptr;
  cu::Result (*cuFuncSetAttribute)(cu::Function function, int attribute, int value) = nullptr;
  cu::Result (*cuFuncGetAttribute)(int* value, int attribute, cu::Function function) = nullptr;
  cu::Result (*cuLaunchKernel)(cu::Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                               cu::Stream stream, void** params, void** extra) = nullptr;
  cu::Result (*cuStreamSynchronize)(cu::Stream stream) = nullptr;
  cu::Result (*cuMemAlloc)(cu::DevicePtr* pointer, size_t bytes) = nullptr;
  cu::Result (*cuMemFree)(cu::DevicePtr pointer) = nullptr;
  cu::Result (*cuMemcpyHtoD)(cu::DevicePtr dst, const void* src, size_t bytes) = nullptr;
  cu::Result (*cuMemcpyDtoH)(void* dst, cu::DevicePtr src, size_t bytes) = nullptr;
  // Optional (CUDA 12.0 and later): null when the driver lacks it; see cuda_tensor_map_encoder().
  cu::TensorMapEncodeTiledFn cuTensorMapEncodeTiled = nullptr;
  // Optional (CUDA 12.0 and later): null when the driver lacks it; kernels that would use it
  // (programmatic launches) are then launched as usual, in stream order.
  cu::LaunchKernelExFn cuLaunchKernelEx = nullptr;
};

// True when the driver loads, cuInit succeeds and at least one device exists. Never throws;
// on false, *reason (when given) says why (library not found, the cuInit error, no device).
bool cuda_device_available(std::string* reason = nullptr) noexcept;

// The loaded and initialised driver. Throws CompileError(Unsupported) with the reason when
// cuda_device_available() is false. Loaded once per process and never unloaded.
const CudaDriverApi& cuda_driver();

// cuTensorMapEncodeTiled of the loaded driver. A driver without it still loads (it runs every
// kernel that uses no tensor map); asking for it then throws CompileError(Unsupported) naming
// the driver, as does the lack of a usable driver.
cu::TensorMapEncodeTiledFn cuda_tensor_map_encoder();

// "CUDA_ERROR_INVALID_VALUE (invalid argument)"; works without a driver ("CUDA error 1").
std::string cuda_error_text(cu::Result result);
// Throws CompileError(Internal, "<what> failed: <cuda_error_text>") unless result is success.
void cuda_check(cu::Result result, const std::string& what);

int cuda_driver_version();  // e.g. 13000 for CUDA 13.0
int cuda_device_count();
int cuda_device_attribute(int device, cu::DeviceAttribute attribute);

struct CudaDeviceInfo {
  std::string name;  // "NVIDIA H200"
  int major = 0, minor = 0;
  int multiprocessors = 0;
  int max_shared_memory_per_block_optin = 0;  // bytes a block may use after opting in
  std::string arch;                           // device_arch()
};
CudaDeviceInfo cuda_device_info(int device);

// The compile target for a compute capability: "sm_90a" for 9.0 and "sm_100a" for 10.0 (the
// architecture-specific variants that enable wgmma / tcgen05), else "sm_<major><minor>".
std::string arch_for_compute_capability(int major, int minor);
// arch_for_compute_capability of a device: "sm_90a" on an H100/H200.
std::string device_arch(int device);

// The primary context of a device, retained on first use and kept for the life of the
// process (as the CUDA runtime does), so that it is shared with torch and others.
cu::Context cuda_primary_context(int device);
// The calling thread's current context; when there is none, makes device's primary context
// current first, as the CUDA runtime would.
cu::Context cuda_ensure_context(int device = 0);

}  // namespace tl
