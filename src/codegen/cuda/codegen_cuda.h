// CUDA C++ from a function lowered to thread-level IR (docs/gpu_lowering.md,
// "Thread-level IR"). The source has device code only and compiles with NVRTC and nvcc.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/function.h"
#include "runtime/cuda/tensor_map_spec.h"

namespace tl {

// What another C++ GPU dialect spells differently from CUDA (codegen/hip): the generator
// below is shared, and asks its dialect at each of these points. Null in the options: CUDA.
class GpuDialect {
 public:
  virtual ~GpuDialect() = default;
  // The target's name in diagnostics ("hip") and the language's ("HIP").
  virtual std::string target_name() const = 0;
  virtual std::string language() const = 0;
  // The device header the source includes ("tl/hip/tl_hip.h").
  virtual std::string header() const = 0;
  // The C++ type of a 16- or 8-bit float dtype; fails for one the dialect lacks.
  virtual std::string storage_type(DataType t, Span span) const = 0;
  // The function converting a float (or a double, from_double) to the storage type `to`,
  // and a storage float `from` to float.
  virtual std::string to_storage_fn(DataType to, bool from_double) const = 0;
  virtual std::string to_float_fn(DataType from) const = 0;
  // value ^ lane_mask within groups of width lanes (value of dtype t).
  virtual std::string shfl_xor(const std::string& value, const std::string& mask, const std::string& width,
                               DataType t) const = 0;
  // The most static shared memory a kernel may declare.
  virtual int64_t static_shared_limit() const = 0;
  // Called where the generator would emit an NVIDIA instruction (feature: "cp.async",
  // "wgmma", ...): fails when the dialect has no equivalent.
  virtual void require(const std::string& feature, Span span) const = 0;
};

struct CudaCodegenOptions {
  // Target architecture ("sm_80", "sm_90a", ...): gates instructions (cp.async needs
  // sm_80) and is named in the source's header comment.
  std::string arch = "sm_80";
  // Emit __launch_bounds__(threads per block), which lets ptxas budget registers for it.
  bool launch_bounds = true;
  // Another dialect of GPU C++ (HIP); null for CUDA.
  const GpuDialect* dialect = nullptr;
};

// One parameter of a generated kernel. Every kernel of a function has the same list:
// the function's parameters in order (a buffer as a pointer to its element type, a
// scalar by value in its dtype), then the shape variables that are not also scalar
// parameters (tl::shape_vars order), each passed as int64_t, then the kernel's TMA tensor
// maps in the order it declares them (each a 128-byte CUtensorMap the runtime encodes at
// launch for the global buffer it describes; runtime/cuda/tensor_map.h).
struct CudaKernelParam {
  enum class Kind { Buffer, Scalar, ShapeVar, TensorMap };
  Kind kind;
  std::string name;  // the IR name (buffer or variable); a tensor map: the kernel parameter's name
  DataType dtype;    // buffer: element dtype; scalar: its dtype; shape variable: int64;
                     // tensor map: the described buffer's dtype
  Var var;           // scalar or shape variable; a buffer's data variable
  int param_index;   // index into PrimFunc::params (for a tensor map, of the buffer it
                     // describes), -1 for a shape variable
  TensorMapSpec tma = {};  // tensor map only: box and swizzle (tma.dtype == dtype)
};

struct CudaKernelInfo {
  std::string name;  // the extern "C" entry: "<func>_kernel", or "<func>_kernel<k>" when several
  // Grid extents x, y, z (1 where the kernel has fewer dimensions), as expressions over the
  // scalar parameters and shape variables only (host-level lets are substituted), for the
  // runtime to evaluate at launch.
  std::array<Expr, 3> grid;
  std::array<int64_t, 3> block = {1, 1, 1};
  // Bytes of the kernel's dynamic shared memory: the end of the furthest `shared.dyn`
  // allocation (attr "offset" + its size in bytes); allocations without "offset" are placed
  // after those with one, in program order, each 128-byte aligned. The launch passes this
  // value (and opts in above 48 KiB).
  int64_t dynamic_shared_bytes = 0;
  int64_t static_shared_bytes = 0;  // sum of the `shared` arrays, for reports
  std::vector<CudaKernelParam> params;
  // The kernel waits for the previous kernel of its stream by T.pdl_sync: launched with
  // programmatic stream serialization, so that it may start while that one finishes.
  bool programmatic_launch = false;
  // The kernel calls T.sync_grid: launched cooperatively (all its blocks resident at once).
  bool cooperative_launch = false;
};

// Throws CompileError: Unsupported for constructs the target cannot express (sub-byte or
// vector dtypes, symbolic shared sizes, ...), Internal for tile-level constructs that should
// have been lowered (T.Parallel, T.Pipelined, tile operators).
std::string codegen_cuda(const PrimFunc& lowered, const CudaCodegenOptions& opts = {});

// The kernels codegen_cuda(lowered) defines, in order, with what the runtime needs to launch them.
std::vector<CudaKernelInfo> cuda_kernel_infos(const PrimFunc& lowered);

}  // namespace tl
