// Compiles CUDA C++ in process with NVRTC, loaded at run time (never linked), so that the
// package works on machines without the CUDA toolkit.
//
// libnvrtc is searched in: $TILELANG_NVRTC_PATH (the library itself or its directory),
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, then the loader's search path;
// under the names libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.11.2.
#pragma once
#include <string>
#include <vector>

namespace tl {

enum class CudaBinaryKind {
  Cubin,  // machine code for one architecture (an ELF image); loads without a JIT step
  Ptx,    // virtual ISA text; the driver compiles it when the module is loaded
};

struct CudaCompileOptions {
  // The target: "sm_80", "sm_90a", "sm_100a", ... The prefix given does not matter: a cubin
  // is compiled for sm_<n>, PTX for compute_<n>. The "a" suffix enables the architecture's
  // specific features (wgmma, setmaxnreg on 9.0); such code runs only on that architecture.
  std::string arch = "sm_80";
  CudaBinaryKind output = CudaBinaryKind::Cubin;
  std::vector<std::string> include_dirs;
  std::string cpp_standard = "c++17";
  // NVRTC only: functions without an execution-space annotation are device functions.
  bool default_device = true;
  bool fast_math = false;
  std::vector<std::string> extra_flags;  // passed last, as given
};

struct CompiledCuda {
  std::string binary;  // the cubin's bytes, or the PTX text (without a terminating NUL)
  CudaBinaryKind kind = CudaBinaryKind::Cubin;
  std::string arch;  // as given to the compiler: "sm_90a", "compute_80"
  std::string log;   // the compiler's messages (warnings), possibly empty
  double compile_seconds = 0;
  std::string compiler;  // "nvrtc 13.0", "nvcc 13.0.88": for cache keys and reports
};

// A parsed target architecture: "sm_90a" -> {90, "a"}.
struct CudaArch {
  int number = 0;
  std::string suffix;  // "", "a" (architecture-specific) or "f" (family-specific)
};

// Accepts "sm_90a", "compute_90a", "90a" (and any case of the prefix' letters);
// throws CompileError(Unsupported) for anything else.
CudaArch parse_cuda_arch(const std::string& arch);
// "sm_90a" for a cubin, "compute_90a" for PTX.
std::string cuda_arch_name(const CudaArch& arch, CudaBinaryKind kind);

// True when libnvrtc loads and has every function used here; never throws. On false,
// *reason (when given) says what was tried.
bool nvrtc_available(std::string* reason = nullptr) noexcept;
// The path (or name) libnvrtc was loaded from. Like every function below, throws
// CompileError(Unsupported) with the candidates tried when libnvrtc cannot be loaded.
std::string nvrtc_library_path();
// "13.0".
std::string nvrtc_version();
// The architectures this NVRTC compiles for, ascending: {75, 80, 86, ..., 90, 100, ...}.
std::vector<int> nvrtc_supported_archs();

// The NVRTC options for these settings, e.g. {"--gpu-architecture=sm_90a", "-std=c++17",
// "-default-device", "--include-path=/x"}; throws like parse_cuda_arch.
std::vector<std::string> nvrtc_flags(const CudaCompileOptions& options);

// Compiles source (named `name` in messages, e.g. "kernel.cu"). Throws
// CompileError(Unsupported) when NVRTC is missing or does not support the architecture, and
// CompileError(Internal) when compilation fails: the message holds the options and the
// first 60 lines of the log.
CompiledCuda compile_with_nvrtc(const std::string& source, const std::string& name = "kernel.cu",
                                const CudaCompileOptions& options = {});

// <root>/include for each CUDA toolkit root that has one ($CUDA_HOME, $CUDA_PATH,
// /usr/local/cuda), for sources that include the toolkit's headers (cuda_fp16.h, ...).
std::vector<std::string> cuda_include_dirs();

// The first max_lines lines of a compiler log, with a count of those left out.
std::string first_log_lines(const std::string& log, int max_lines = 60);

}  // namespace tl
