// A compiled CUDA image (cubin or PTX) loaded into a context, and its kernels.
#pragma once
#include <array>
#include <string>
#include <utility>

#include "runtime/cuda/driver.h"

namespace tl {

struct CudaFunctionAttributes {
  int registers = 0;            // per thread
  int local_bytes = 0;          // per-thread local memory: register spills and stack arrays
  int static_shared_bytes = 0;  // __shared__ declared in the kernel
  int const_bytes = 0;
  int max_threads_per_block = 0;  // the most this kernel can launch with, given its registers
  int max_dynamic_shared_bytes = 0;
  int ptx_version = 0;     // e.g. 90 for compute_90
  int binary_version = 0;  // e.g. 90 for sm_90
};

using Dim3 = std::array<unsigned, 3>;

// A kernel of a loaded module. Cheap to copy; valid while its CudaModule lives.
class CudaFunction {
 public:
  CudaFunction() = default;

  // Lets launches use up to `bytes` of dynamic shared memory (above 48 KiB a kernel must opt
  // in). Throws CompileError(Unsupported) when the device allows less, Internal otherwise.
  void set_max_dynamic_shared_memory(int bytes) const;
  CudaFunctionAttributes attributes() const;

  // Enqueues the kernel on `stream` (null: the context's default stream); args points to one
  // pointer per kernel parameter, each to the parameter's value. Asynchronous: faults show up
  // when the stream is synchronised. A thread with no current context gets the module's
  // context made current. Throws CompileError(Internal) with the launch shape on failure.
  // cooperative: all blocks resident at once (T.sync_grid); the grid must fit the device.
  // programmatic: launched with programmatic stream serialization (the kernel waits for the
  // previous one by griddepcontrol.wait, T.pdl_sync), where the driver has cuLaunchKernelEx.
  void launch(const Dim3& grid, const Dim3& block, unsigned shared_bytes, void* stream, void** args,
              bool programmatic = false, bool cooperative = false) const;

  cu::Function handle() const { return handle_; }
  const std::string& name() const { return name_; }

 private:
  friend class CudaModule;
  CudaFunction(cu::Function handle, cu::Context context, cu::Device device, std::string name)
      : handle_(handle), context_(context), device_(device), name_(std::move(name)) {}

  cu::Function handle_ = nullptr;
  cu::Context context_ = nullptr;
  cu::Device device_ = 0;
  std::string name_;
};

class CudaModule {
 public:
  // Loads a cubin (ELF bytes) or PTX text into the calling thread's current context; when
  // none is current, into device 0's primary context, made current as the CUDA runtime
  // would. Throws CompileError(Unsupported) without a usable device, Internal when the
  // driver rejects the image (e.g. compiled for another architecture).
  explicit CudaModule(const std::string& image);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  CudaModule(CudaModule&& other) noexcept;
  CudaModule& operator=(CudaModule&& other) noexcept;

  // The kernel `name` (an extern "C" name, or the mangled one); throws CompileError(Internal)
  // when the module has no such kernel.
  CudaFunction function(const std::string& name) const;

  cu::Module handle() const { return module_; }
  cu::Context context() const { return context_; }

 private:
  void unload() noexcept;

  cu::Module module_ = nullptr;
  cu::Context context_ = nullptr;
  cu::Device device_ = 0;
};

}  // namespace tl
