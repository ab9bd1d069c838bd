// The nvcc fallback: compiles CUDA C++ by running nvcc in a child process, for toolkits whose
// NVRTC cannot be used (or to compare against it).
//
// nvcc is searched as: $TILELANG_NVCC_PATH, $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc,
// /usr/local/cuda/bin/nvcc, then each directory of PATH.
#pragma once
#include <string>
#include <vector>

#include "runtime/cuda/nvrtc.h"

namespace tl {

// True when an executable nvcc was found; never throws. On false, *reason says where it looked.
bool nvcc_available(std::string* reason = nullptr) noexcept;
// The absolute path of nvcc; throws CompileError(Unsupported) naming the places searched.
std::string nvcc_path();
// "13.0.88", from `nvcc --version` (computed once per process); throws like nvcc_path.
std::string nvcc_version();

// The nvcc options for these settings (output and source paths excluded), e.g.
// {"-cubin", "-arch=sm_90a", "-std=c++17", "-I/x"}. default_device has no nvcc equivalent
// and is ignored: sources compiled by nvcc must mark device functions themselves.
std::vector<std::string> nvcc_flags(const CudaCompileOptions& options);

// Writes source to a private temporary directory (under $TMPDIR or /tmp) as `name`, runs
// nvcc there and returns the cubin or PTX. Throws CompileError(Unsupported) when nvcc is
// missing, CompileError(Internal) when it fails: the message holds the command line and the
// first 60 lines of its output.
CompiledCuda compile_with_nvcc(const std::string& source, const std::string& name = "kernel.cu",
                               const CudaCompileOptions& options = {});

}  // namespace tl
