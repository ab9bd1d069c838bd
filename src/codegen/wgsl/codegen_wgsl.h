// WGSL code generation for the WebGPU back end, from the same thread-level IR the CUDA code
// generator reads (transform/pipeline/webgpu.cc). One T.Kernel becomes one compute entry
// point: buffer parameters are storage buffers (binding i = the i-th buffer parameter),
// scalars and dynamic dimensions one uniform struct (binding = number of buffers), shared
// buffers workgroup arrays, fragments and locals function-scope arrays.
//
// Indices are 32-bit (WGSL has no 64-bit integers in core). Types: f32, i32, u32, bool, and
// f16 when the adapter has shader-f16; anything else is rejected with
// "not supported on webgpu: ...", as are T.print and 8/16-bit integers. T.atomic_add/max/min
// work on float32, int32 and uint32 buffers (float32 by compare-exchange on its bits).
//
// Shuffles (reductions across threads) become subgroupShuffleXor when the function was
// lowered for a subgroup size; see WgslKernel::status_binding for how that is checked.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/function.h"

namespace tl {

struct WgslOptions {
  bool has_f16 = false;  // the adapter offers shader-f16
  // The subgroup size the kernel was lowered for ("webgpu -subgroup=N"); 0 for none.
  int subgroup = 0;
};

struct WgslKernel {
  std::string source;
  std::string entry = "main";
  std::vector<Expr> grid;                      // workgroups per dimension (of shape variables)
  std::array<int64_t, 3> workgroup_size{1, 1, 1};
  int64_t workgroup_bytes = 0;                 // workgroup memory the kernel declares
  struct Buffer {
    int param_index;
    std::string name;
    DataType dtype;
    bool written;
  };
  std::vector<Buffer> buffers;  // binding i
  struct Uniform {
    int param_index;  // -1 for a dynamic dimension
    std::string name;
    DataType dtype;   // i32, u32 or f32 in the struct
  };
  std::vector<Uniform> uniforms;  // fields of the uniform struct, 4 bytes each, in order
  // When the kernel uses subgroup operations (of WgslOptions::subgroup lanes): the binding
  // of a 4-byte status word, zero before the dispatch, that comes back nonzero when the
  // adapter's subgroups were not that size or not in thread order (results then invalid);
  // -1 otherwise.
  int status_binding = -1;
};

// Throws CompileError(Unsupported) for what WGSL or this back end cannot express.
WgslKernel codegen_wgsl(const PrimFunc& f, const WgslOptions& options);

}  // namespace tl
