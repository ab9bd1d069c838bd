#include "runtime/cuda/cuda_module.h"

#include <utility>

#include "ir/error.h"

namespace tl {
namespace {

std::string dims_text(const Dim3& d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
}

int function_attribute(const CudaDriverApi& api, cu::Function function, cu::FunctionAttribute attribute,
                       const std::string& name) {
  int value = 0;
  cuda_check(api.cuFuncGetAttribute(&value, attribute, function),
             "cuFuncGetAttribute(" + std::to_string(int(attribute)) + ") of kernel '" + name + "'");
  return value;
}

int device_attribute(const CudaDriverApi& api, cu::Device device, cu::DeviceAttribute attribute) {
  int value = 0;
  if (api.cuDeviceGetAttribute(&value, attribute, device) != cu::kSuccess) return -1;
  return value;
}

}  // namespace

void CudaFunction::set_max_dynamic_shared_memory(int bytes) const {
  const CudaDriverApi& api = cuda_driver();
  cu::Result rc = api.cuFuncSetAttribute(handle_, cu::kFuncMaxDynamicSharedSizeBytes, bytes);
  if (rc == cu::kSuccess) return;
  // Explain the usual cause (more than the device allows) with the numbers.
  int optin = device_attribute(api, device_, cu::kDeviceMaxSharedMemoryPerBlockOptin);
  int static_bytes = 0;
  api.cuFuncGetAttribute(&static_bytes, cu::kFuncSharedSizeBytes, handle_);
  if (optin >= 0 && bytes + static_bytes > optin)
    fail(ErrorKind::Unsupported, {},
         "kernel '" + name_ + "' asks for " + std::to_string(bytes) +
             " bytes of dynamic shared memory (plus " + std::to_string(static_bytes) +
             " static); the device allows " + std::to_string(optin) + " per block",
         "use smaller tiles or fewer pipeline stages");
  cuda_check(rc, "setting the dynamic shared memory of kernel '" + name_ + "' to " + std::to_string(bytes));
}

CudaFunctionAttributes CudaFunction::attributes() const {
  const CudaDriverApi& api = cuda_driver();
  CudaFunctionAttributes a;
  a.registers = function_attribute(api, handle_, cu::kFuncNumRegs, name_);
  a.local_bytes = function_attribute(api, handle_, cu::kFuncLocalSizeBytes, name_);
  a.static_shared_bytes = function_attribute(api, handle_, cu::kFuncSharedSizeBytes, name_);
  a.const_bytes = function_attribute(api, handle_, cu::kFuncConstSizeBytes, name_);
  a.max_threads_per_block = function_attribute(api, handle_, cu::kFuncMaxThreadsPerBlock, name_);
  a.max_dynamic_shared_bytes = function_attribute(api, handle_, cu::kFuncMaxDynamicSharedSizeBytes, name_);
  a.ptx_version = function_attribute(api, handle_, cu::kFuncPtxVersion, name_);
  a.binary_version = function_attribute(api, handle_, cu::kFuncBinaryVersion, name_);
  return a;
}

void CudaFunction::launch(const Dim3& grid, const Dim3& block, unsigned shared_bytes, void* stream,
                          void** args, bool programmatic, bool cooperative) const {
  const CudaDriverApi& api = cuda_driver();
  if (cooperative && !api.cuLaunchKernelEx)
    fail(ErrorKind::Unsupported, {}, "kernel '" + name_ + "' calls T.sync_grid, whose cooperative launch needs "
                                     "cuLaunchKernelEx (a CUDA 12 driver); this driver lacks it",
         "update the NVIDIA driver");
  auto enqueue = [&] {
    if ((programmatic || cooperative) && api.cuLaunchKernelEx) {
      cu::LaunchAttribute attributes[2] = {};
      unsigned count = 0;
      if (programmatic) {
        attributes[count].id = cu::kLaunchAttributeProgrammaticStreamSerialization;
        attributes[count++].value.programmatic_stream_serialization_allowed = 1;
      }
      if (cooperative) {
        attributes[count].id = cu::kLaunchAttributeCooperative;
        attributes[count++].value.cooperative = 1;
      }
      cu::LaunchConfig config{grid[0],  grid[1],     grid[2], block[0], block[1], block[2], shared_bytes,
                              static_cast<cu::Stream>(stream), attributes, count};
      return api.cuLaunchKernelEx(&config, handle_, args, nullptr);
    }
    return api.cuLaunchKernel(handle_, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes,
                              static_cast<cu::Stream>(stream), args, nullptr);
  };
  cu::Result rc = enqueue();
  if (rc == cu::kErrorInvalidContext) {
    // A thread that never touched CUDA has no current context: adopt the module's, as the
    // CUDA runtime adopts the primary context. Checked only on failure to keep launches cheap.
    cu::Context current = nullptr;
    if (api.cuCtxGetCurrent(&current) == cu::kSuccess && current == nullptr &&
        api.cuCtxSetCurrent(context_) == cu::kSuccess)
      rc = enqueue();
  }
  if (rc == cu::kErrorCooperativeLaunchTooLarge)
    fail(ErrorKind::Unsupported, {},
         "kernel '" + name_ + "' calls T.sync_grid, so all its blocks must be resident at once; its grid " +
             dims_text(grid) + " of blocks of " + dims_text(block) + " threads and " + std::to_string(shared_bytes) +
             " bytes of dynamic shared memory is more than the device holds (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)",
         "launch at most (multiprocessors x blocks per multiprocessor) blocks and loop over the work in each "
         "(T.Persistent)");
  if (rc != cu::kSuccess)
    cuda_check(rc, "launching kernel '" + name_ + "' with grid " + dims_text(grid) + ", block " +
                       dims_text(block) + ", " + std::to_string(shared_bytes) +
                       " bytes of dynamic shared memory");
}

CudaModule::CudaModule(const std::string& image) {
  const CudaDriverApi& api = cuda_driver();
  if (image.empty()) fail(ErrorKind::Internal, {}, "cannot load an empty CUDA image");
  context_ = cuda_ensure_context(0);
  cuda_check(api.cuCtxGetDevice(&device_), "cuCtxGetDevice");
  // c_str(): PTX must be NUL-terminated; a cubin carries its own size in its ELF header.
  cu::Result rc = api.cuModuleLoadData(&module_, image.c_str());
  if (rc != cu::kSuccess) {
    module_ = nullptr;
    int major = device_attribute(api, device_, cu::kDeviceComputeCapabilityMajor);
    int minor = device_attribute(api, device_, cu::kDeviceComputeCapabilityMinor);
    bool is_cubin = image.compare(0, 4, "\177ELF") == 0;
    fail(ErrorKind::Internal, {},
         "cuModuleLoadData failed: " + cuda_error_text(rc) + " (a " + (is_cubin ? "cubin" : "PTX image") +
             " of " + std::to_string(image.size()) + " bytes; the device is " +
             arch_for_compute_capability(major, minor) + ")",
         "a cubin loads only on the architecture it was compiled for; compile for device_arch()");
  }
}

CudaModule::~CudaModule() { unload(); }

CudaModule::CudaModule(CudaModule&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)),
      context_(std::exchange(other.context_, nullptr)),
      device_(other.device_) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  if (this != &other) {
    unload();
    module_ = std::exchange(other.module_, nullptr);
    context_ = std::exchange(other.context_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void CudaModule::unload() noexcept {
  if (!module_) return;
  // Errors are ignored: at process exit the driver may already be shut down.
  if (cuda_device_available()) {
    const CudaDriverApi& api = cuda_driver();
    cu::Context current = nullptr;
    bool switched = api.cuCtxGetCurrent(&current) == cu::kSuccess && current != context_ &&
                    api.cuCtxSetCurrent(context_) == cu::kSuccess;
    api.cuModuleUnload(module_);
    if (switched) api.cuCtxSetCurrent(current);
  }
  module_ = nullptr;
}

CudaFunction CudaModule::function(const std::string& name) const {
  const CudaDriverApi& api = cuda_driver();
  if (!module_) fail(ErrorKind::Internal, {}, "kernel lookup in a CUDA module that is not loaded");
  cu::Function handle = nullptr;
  cu::Result rc = api.cuModuleGetFunction(&handle, module_, name.c_str());
  if (rc != cu::kSuccess)
    fail(ErrorKind::Internal, {},
         "kernel '" + name + "' not found in the CUDA module: " + cuda_error_text(rc),
         "kernels are looked up by their symbol name; declare them extern \"C\"");
  return CudaFunction(handle, context_, device_, name);
}

}  // namespace tl
