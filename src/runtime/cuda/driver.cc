#include "runtime/cuda/driver.h"

#include <map>
#include <mutex>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/dynlib.h"

namespace tl {
namespace {

struct DriverState {
  DynamicLibrary library;
  CudaDriverApi api;
  std::string error;  // why the driver is unusable; empty when usable
};

bool bind_all(const DynamicLibrary& lib, CudaDriverApi& api, std::string* missing) {
  bool ok = true;
  auto bind = [&](auto& fn, const char* name) {
    if (!lib.bind(fn, name)) {
      ok = false;
      *missing += (missing->empty() ? "" : ", ") + std::string(name);
    }
  };
  bind(api.cuInit, "cuInit");
  bind(api.cuDriverGetVersion, "cuDriverGetVersion");
  bind(api.cuGetErrorName, "cuGetErrorName");
  bind(api.cuGetErrorString, "cuGetErrorString");
  bind(api.cuDeviceGetCount, "cuDeviceGetCount");
  bind(api.cuDeviceGet, "cuDeviceGet");
  bind(api.cuDeviceGetName, "cuDeviceGetName");
  bind(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  bind(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  bind(api.cuCtxGetCurrent, "cuCtxGetCurrent");
  bind(api.cuCtxSetCurrent, "cuCtxSetCurrent");
  bind(api.cuCtxGetDevice, "cuCtxGetDevice");
  bind(api.cuCtxSynchronize, "cuCtxSynchronize");
  bind(api.cuModuleLoadData, "cuModuleLoadData");
  bind(api.cuModuleUnload, "cuModuleUnload");
  bind(api.cuModuleGetFunction, "cuModuleGetFunction");
  bind(api.cuFuncSetAttribute, "cuFuncSetAttribute");
  bind(api.cuFuncGetAttribute, "cuFuncGetAttribute");
  bind(api.cuLaunchKernel, "cuLaunchKernel");
  bind(api.cuStreamSynchronize, "cuStreamSynchronize");
  // cuda.h maps these names to their _v2 symbols (64-bit sizes and pointers).
  bind(api.cuMemAlloc, "cuMemAlloc_v2");
  bind(api.cuMemFree, "cuMemFree_v2");
  bind(api.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  bind(api.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  return ok;
}

std::string raw_error_text(const CudaDriverApi& api, cu::Result result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName && api.cuGetErrorName(result, &name) != cu::kSuccess) name = nullptr;
  if (api.cuGetErrorString && api.cuGetErrorString(result, &text) != cu::kSuccess) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

// Loaded and initialised once; never unloaded, because modules and contexts may still be in
// use by static objects and other threads at exit.
const DriverState& driver_state() {
  static const DriverState* state = [] {
    auto* s = new DriverState();
    std::vector<std::string> candidates;
    std::string override_path = env_or_empty("TILELANG_CUDA_DRIVER_PATH");
    if (!override_path.empty()) candidates.push_back(override_path);
    candidates.push_back("libcuda.so.1");
    candidates.push_back("libcuda.so");
    if (!s->library.open(candidates)) {
      s->error = "the CUDA driver (libcuda.so.1) cannot be loaded; " + s->library.attempts();
      return s;
    }
    std::string missing;
    if (!bind_all(s->library, s->api, &missing)) {
      s->error = "the CUDA driver at '" + s->library.path() + "' lacks: " + missing;
      return s;
    }
    s->library.bind(s->api.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");  // optional
    s->library.bind(s->api.cuLaunchKernelEx, "cuLaunchKernelEx");              // optional
    cu::Result rc = s->api.cuInit(0);
    if (rc != cu::kSuccess) {
      s->error = "cuInit failed: " + raw_error_text(s->api, rc);
      return s;
    }
    int count = 0;
    rc = s->api.cuDeviceGetCount(&count);
    if (rc != cu::kSuccess)
      s->error = "cuDeviceGetCount failed: " + raw_error_text(s->api, rc);
    else if (count <= 0)
      s->error = "the CUDA driver reports no device";
    return s;
  }();
  return *state;
}

}  // namespace

bool cuda_device_available(std::string* reason) noexcept {
  try {
    const DriverState& state = driver_state();
    if (reason) *reason = state.error;
    return state.error.empty();
  } catch (const std::exception& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

const CudaDriverApi& cuda_driver() {
  const DriverState& state = driver_state();
  if (!state.error.empty())
    fail(ErrorKind::Unsupported, {}, "no usable CUDA device: " + state.error,
         "CUDA kernels run on a machine with an NVIDIA GPU and its driver; set "
         "TILELANG_CUDA_DRIVER_PATH if libcuda.so.1 is installed outside the loader's path");
  return state.api;
}

cu::TensorMapEncodeTiledFn cuda_tensor_map_encoder() {
  const CudaDriverApi& api = cuda_driver();
  if (!api.cuTensorMapEncodeTiled) {
    int version = 0;
    api.cuDriverGetVersion(&version);
    fail(ErrorKind::Unsupported, {},
         "the CUDA driver at '" + driver_state().library.path() + "' (version " + std::to_string(version) +
             ") lacks cuTensorMapEncodeTiled, which kernels using TMA tensor maps need",
         "TMA needs a driver of CUDA 12.0 or later (and a Hopper or newer GPU); update the driver, or "
         "point TILELANG_CUDA_DRIVER_PATH at a newer libcuda.so.1");
  }
  return api.cuTensorMapEncodeTiled;
}

std::string cuda_error_text(cu::Result result) {
  const DriverState& state = driver_state();
  return raw_error_text(state.api, result);
}

void cuda_check(cu::Result result, const std::string& what) {
  if (result != cu::kSuccess) fail(ErrorKind::Internal, {}, what + " failed: " + cuda_error_text(result));
}

int cuda_driver_version() {
  const CudaDriverApi& api = cuda_driver();
  int version = 0;
  cuda_check(api.cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

int cuda_device_count() {
  const CudaDriverApi& api = cuda_driver();
  int count = 0;
  cuda_check(api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

namespace {
cu::Device device_handle(const CudaDriverApi& api, int ordinal) {
  cu::Device device = 0;
  cuda_check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  return device;
}
}  // namespace

int cuda_device_attribute(int device, cu::DeviceAttribute attribute) {
  const CudaDriverApi& api = cuda_driver();
  int value = 0;
  cuda_check(api.cuDeviceGetAttribute(&value, attribute, device_handle(api, device)),
             "cuDeviceGetAttribute(" + std::to_string(int(attribute)) + ")");
  return value;
}

CudaDeviceInfo cuda_device_info(int device) {
  const CudaDriverApi& api = cuda_driver();
  CudaDeviceInfo info;
  char name[256] = {};
  cuda_check(api.cuDeviceGetName(name, int(sizeof name) - 1, device_handle(api, device)), "cuDeviceGetName");
  info.name = name;
  info.major = cuda_device_attribute(device, cu::kDeviceComputeCapabilityMajor);
  info.minor = cuda_device_attribute(device, cu::kDeviceComputeCapabilityMinor);
  info.multiprocessors = cuda_device_attribute(device, cu::kDeviceMultiprocessorCount);
  info.max_shared_memory_per_block_optin =
      cuda_device_attribute(device, cu::kDeviceMaxSharedMemoryPerBlockOptin);
  info.arch = arch_for_compute_capability(info.major, info.minor);
  return info;
}

std::string arch_for_compute_capability(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  // Hopper's wgmma/setmaxnreg and Blackwell's tcgen05 exist only in the "a" targets.
  if ((major == 9 || major == 10) && minor == 0) arch += "a";
  return arch;
}

std::string device_arch(int device) {
  return arch_for_compute_capability(cuda_device_attribute(device, cu::kDeviceComputeCapabilityMajor),
                                     cuda_device_attribute(device, cu::kDeviceComputeCapabilityMinor));
}

cu::Context cuda_primary_context(int device) {
  const CudaDriverApi& api = cuda_driver();
  static std::mutex mutex;
  static std::map<int, cu::Context> retained;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = retained.find(device);
  if (it != retained.end()) return it->second;
  cu::Context context = nullptr;
  cuda_check(api.cuDevicePrimaryCtxRetain(&context, device_handle(api, device)),
             "cuDevicePrimaryCtxRetain(device " + std::to_string(device) + ")");
  retained[device] = context;
  return context;
}

cu::Context cuda_ensure_context(int device) {
  const CudaDriverApi& api = cuda_driver();
  cu::Context current = nullptr;
  cuda_check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current) return current;
  cu::Context primary = cuda_primary_context(device);
  cuda_check(api.cuCtxSetCurrent(primary), "cuCtxSetCurrent");
  return primary;
}

}  // namespace tl
