// The HIP dialect of the CUDA generator (codegen/cuda/codegen_cuda.cc, class GpuDialect).
#include "codegen/hip/codegen_hip.h"

#include "ir/error.h"

namespace tl {
namespace {

class HipDialect : public GpuDialect {
 public:
  std::string target_name() const override { return "hip"; }
  std::string language() const override { return "HIP"; }
  std::string header() const override { return "tl/hip/tl_hip.h"; }

  std::string storage_type(DataType t, Span span) const override {
    if (t.code == TypeCode::BFloat) return "tl::bfloat16_t";
    if (t.code == TypeCode::Float) return "__half";
    // CDNA 3's float8 formats are the FNUZ variants (no negative zero, another bias), not
    // the OCP e4m3/e5m2 the IR means; converting in software is not done yet.
    fail(ErrorKind::Unsupported, span, "dtype " + t.str() + " is not supported on target hip",
         "use float16 or bfloat16 (or target=\"cuda\" for float8)");
  }
  std::string to_storage_fn(DataType to, bool from_double) const override {
    // HIP has no __double2half: the header rounds doubles once, through _Float16.
    if (to.code == TypeCode::BFloat) return "tl::to_bfloat16";
    return from_double ? "tl::to_half" : "__float2half_rn";
  }
  std::string to_float_fn(DataType from) const override {
    return from.code == TypeCode::Float ? "__half2float" : "tl::to_float";
  }
  std::string shfl_xor(const std::string& value, const std::string& mask, const std::string& width,
                       DataType t) const override {
    // HIP's shuffles have no lane mask; the header's overloads cover 8- and 16-bit types,
    // which HIP's __shfl_xor does not take.
    return "tl::shfl_xor(" + value + ", " + mask + ", " + width + ")";
  }
  // A kernel's LDS: static declarations count against the same 64 KiB.
  int64_t static_shared_limit() const override { return 64 * 1024; }

  void require(const std::string& feature, Span span) const override {
    // cp.async is lowered to plain loads and stores into LDS (the header's cp_async): the
    // software pipeline's schedule stays correct, its copies are synchronous.
    if (feature == "cp.async") return;
    // MFMA / WMMA through the header's wrappers of the compiler's builtins.
    if (feature == "AMD matrix instructions") return;
    fail(ErrorKind::Unsupported, span, feature + " is an NVIDIA instruction; target hip has no equivalent",
         "this construct needs target=\"cuda\"; on hip write the copy or product with T.copy / T.gemm, "
         "which lower to plain loads and SIMT multiply-adds");
  }
};

const HipDialect kHip;

}  // namespace

std::string codegen_hip(const PrimFunc& lowered, const HipCodegenOptions& opts) {
  if (!lowered) fail(ErrorKind::Internal, {}, "internal: codegen_hip called without a function");
  CudaCodegenOptions cuda;
  cuda.arch = opts.arch;
  cuda.launch_bounds = opts.launch_bounds;
  cuda.dialect = &kHip;
  return codegen_cuda(lowered, cuda);
}

}  // namespace tl
