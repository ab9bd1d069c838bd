// The CUDA runtime pieces: the dlopen wrapper, NVRTC and nvcc compiles (need a toolkit, not a
// GPU), the driver's availability report, and, on a machine with a GPU, loading a compiled
// kernel, launching it and checking its results and attributes. Tests skip, with the
// reason, when the toolkit or the device they need is missing.
#include "expect_error.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/dynlib.h"
#include "runtime/cuda/nvcc.h"
#include "runtime/cuda/nvrtc.h"

namespace tl {
namespace {

const char* kAddSource = R"(extern "C" __global__ void add(float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
)";

// The error is on line 3: NVRTC and nvcc both report it as "bad_kernel.cu(3): error: ...".
const char* kBadSource = R"(extern "C" __global__ void bad(float* a) {
  int i = threadIdx.x;
  a[i] = i +;
}
)";

bool starts_with_elf_magic(const std::string& bytes) {
  return bytes.size() > 4 && std::memcmp(bytes.data(), "\177ELF", 4) == 0;
}

using testing::contains;
using testing::expect_compile_error;

#define SKIP_WITHOUT_NVRTC()                                      \
  do {                                                            \
    std::string why;                                              \
    if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why; \
  } while (0)

#define SKIP_WITHOUT_NVCC()                                     \
  do {                                                          \
    std::string why;                                            \
    if (!nvcc_available(&why)) GTEST_SKIP() << "nvcc: " << why; \
  } while (0)

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    std::string why;                                                          \
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA GPU: " << why; \
  } while (0)

// ---- dynlib ---------------------------------------------------------------------------

TEST(DynamicLibrary, ReportsEveryCandidateTried) {
  DynamicLibrary lib;
  EXPECT_FALSE(lib.open({"/nonexistent-dir/libtl_missing.so", "libtl_missing_library.so.7"}));
  EXPECT_FALSE(lib.loaded());
  EXPECT_EQ(lib.symbol("strlen"), nullptr);
  std::string tried = lib.attempts();
  EXPECT_TRUE(contains(tried, "/nonexistent-dir/libtl_missing.so (no such file)")) << tried;
  EXPECT_TRUE(contains(tried, "libtl_missing_library.so.7 (")) << tried;
}

TEST(DynamicLibrary, LoadsTheFirstCandidateThatExists) {
  DynamicLibrary lib;
  ASSERT_TRUE(lib.open({"/nonexistent-dir/libc.so.6", "libc.so.6"})) << lib.attempts();
  EXPECT_EQ(lib.path(), "libc.so.6");
  size_t (*length)(const char*) = nullptr;
  ASSERT_TRUE(lib.bind(length, "strlen"));
  EXPECT_EQ(length("tile"), 4u);
  EXPECT_EQ(lib.symbol("tl_no_such_symbol_here"), nullptr);
  DynamicLibrary moved = std::move(lib);
  EXPECT_TRUE(moved.loaded());
  EXPECT_FALSE(lib.loaded());
}

TEST(DynamicLibrary, CandidatesAreDirectoriesThenBareNames) {
  std::vector<std::string> expected = {"/a/x.so", "/a/y.so", "/b/x.so", "/b/y.so", "x.so", "y.so"};
  EXPECT_EQ(library_candidates({"/a", "", "/b/", "/a"}, {"x.so", "y.so"}), expected);
}

// ---- architectures and flags -------------------------------------------------------------

TEST(CudaArch, ParsesTheUsualSpellings) {
  CudaArch a = parse_cuda_arch("sm_90a");
  EXPECT_EQ(a.number, 90);
  EXPECT_EQ(a.suffix, "a");
  EXPECT_EQ(parse_cuda_arch("compute_80").number, 80);
  EXPECT_EQ(parse_cuda_arch("100a").number, 100);
  EXPECT_EQ(parse_cuda_arch("SM_86").suffix, "");
  EXPECT_EQ(cuda_arch_name(a, CudaBinaryKind::Cubin), "sm_90a");
  EXPECT_EQ(cuda_arch_name(a, CudaBinaryKind::Ptx), "compute_90a");
  for (const char* bad : {"ampere", "sm_", "sm_90x", "", "sm_90aa"})
    EXPECT_EQ(expect_compile_error([&] { parse_cuda_arch(bad); }).kind(), ErrorKind::Unsupported) << bad;
}

TEST(CudaArch, ArchSpecificTargetsForHopperAndBlackwell) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100a");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
  EXPECT_EQ(arch_for_compute_capability(12, 0), "sm_120");
}

TEST(CudaFlags, NvrtcDefaults) {
  CudaCompileOptions options;
  options.arch = "sm_90a";
  std::vector<std::string> expected = {"--gpu-architecture=sm_90a", "-std=c++17", "-default-device"};
  EXPECT_EQ(nvrtc_flags(options), expected);
  options.output = CudaBinaryKind::Ptx;
  options.fast_math = true;
  options.include_dirs = {"/inc"};
  options.extra_flags = {"-lineinfo"};
  expected = {"--gpu-architecture=compute_90a",
              "-std=c++17",
              "-default-device",
              "--use_fast_math",
              "--include-path=/inc",
              "-lineinfo"};
  EXPECT_EQ(nvrtc_flags(options), expected);
}

TEST(CudaFlags, NvccDefaults) {
  CudaCompileOptions options;
  options.arch = "sm_80";
  std::vector<std::string> expected = {"-cubin", "-arch=sm_80", "-std=c++17"};
  EXPECT_EQ(nvcc_flags(options), expected);
  options.output = CudaBinaryKind::Ptx;
  options.include_dirs = {"/inc"};
  expected = {"-ptx", "-arch=compute_80", "-std=c++17", "-I/inc"};
  EXPECT_EQ(nvcc_flags(options), expected);
}

TEST(CudaLog, KeepsTheFirstLines) {
  EXPECT_EQ(first_log_lines("a\nb\nc\n", 2), "a\nb\n... (1 more lines)\n");
  EXPECT_EQ(first_log_lines("a\nb", 5), "a\nb\n");
}

// ---- NVRTC -------------------------------------------------------------------------------

TEST(Nvrtc, ReportsVersionAndArchitectures) {
  SKIP_WITHOUT_NVRTC();
  std::string version = nvrtc_version();
  EXPECT_NE(version.find('.'), std::string::npos) << version;
  EXPECT_FALSE(nvrtc_library_path().empty());
  std::vector<int> archs = nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
}

TEST(Nvrtc, CompilesCubinsForSm80AndSm90a) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CudaCompileOptions options;
    options.arch = arch;
    CompiledCuda out = compile_with_nvrtc(kAddSource, "add.cu", options);
    EXPECT_TRUE(starts_with_elf_magic(out.binary)) << arch;
    EXPECT_EQ(out.kind, CudaBinaryKind::Cubin);
    EXPECT_EQ(out.arch, arch);
    EXPECT_GT(out.compile_seconds, 0.0);
    EXPECT_EQ(out.compiler, "nvrtc " + nvrtc_version());
  }
}

TEST(Nvrtc, CompilesPtxWhenAsked) {
  SKIP_WITHOUT_NVRTC();
  CudaCompileOptions options;
  options.arch = "sm_80";
  options.output = CudaBinaryKind::Ptx;
  CompiledCuda out = compile_with_nvrtc(kAddSource, "add.cu", options);
  EXPECT_EQ(out.arch, "compute_80");
  EXPECT_TRUE(contains(out.binary, ".entry add")) << out.binary.substr(0, 400);
  EXPECT_TRUE(contains(out.binary, ".target sm_80"));
  EXPECT_NE(out.binary.back(), '\0');
}

// setmaxnreg exists only on sm_90a: the 'a' target must reach the compiler.
TEST(Nvrtc, ArchSpecificFeaturesNeedTheATarget) {
  SKIP_WITHOUT_NVRTC();
  const char* source = R"(extern "C" __global__ void grow() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
}
)";
  CudaCompileOptions options;
  options.arch = "sm_90a";
  EXPECT_TRUE(starts_with_elf_magic(compile_with_nvrtc(source, "grow.cu", options).binary));
  options.arch = "sm_90";
  EXPECT_EQ(expect_compile_error([&] { compile_with_nvrtc(source, "grow.cu", options); }).kind(),
            ErrorKind::Internal);
}

TEST(Nvrtc, SyntaxErrorCarriesTheLog) {
  SKIP_WITHOUT_NVRTC();
  CudaCompileOptions options;
  options.arch = "sm_80";
  CompileError e = expect_compile_error([&] { compile_with_nvrtc(kBadSource, "bad_kernel.cu", options); });
  std::string message = e.what();
  EXPECT_EQ(e.kind(), ErrorKind::Internal);
  EXPECT_TRUE(contains(message, "bad_kernel.cu(3): error")) << message;
  EXPECT_TRUE(contains(message, "--gpu-architecture=sm_80")) << message;
  EXPECT_TRUE(contains(message, "NVRTC_ERROR_COMPILATION")) << message;
}

TEST(Nvrtc, UnsupportedArchitectureIsReportedAsSuch) {
  SKIP_WITHOUT_NVRTC();
  CudaCompileOptions options;
  options.arch = "sm_10";
  CompileError e = expect_compile_error([&] { compile_with_nvrtc(kAddSource, "add.cu", options); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(e.what(), "sm_10")) << e.what();
}

// ---- nvcc --------------------------------------------------------------------------------

TEST(Nvcc, CompilesTheSameKernel) {
  SKIP_WITHOUT_NVCC();
  EXPECT_NE(nvcc_version().find('.'), std::string::npos) << nvcc_version();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CudaCompileOptions options;
    options.arch = arch;
    CompiledCuda out = compile_with_nvcc(kAddSource, "add.cu", options);
    EXPECT_TRUE(starts_with_elf_magic(out.binary)) << arch;
    EXPECT_EQ(out.arch, arch);
    EXPECT_EQ(out.compiler, "nvcc " + nvcc_version());
  }
  CudaCompileOptions ptx;
  ptx.output = CudaBinaryKind::Ptx;
  EXPECT_TRUE(contains(compile_with_nvcc(kAddSource, "add.cu", ptx).binary, ".entry add"));
}

TEST(Nvcc, SyntaxErrorCarriesTheLog) {
  SKIP_WITHOUT_NVCC();
  CompileError e = expect_compile_error([&] { compile_with_nvcc(kBadSource, "bad_kernel.cu", {}); });
  std::string message = e.what();
  EXPECT_EQ(e.kind(), ErrorKind::Internal);
  EXPECT_TRUE(contains(message, "bad_kernel.cu(3): error")) << message;
  EXPECT_TRUE(contains(message, "-arch=sm_80")) << message;
}

// ---- driver ------------------------------------------------------------------------------

TEST(Driver, AvailabilityIsReportedWithoutThrowing) {
  std::string why;
  bool available = false;
  EXPECT_NO_THROW(available = cuda_device_available(&why));
  EXPECT_EQ(cuda_device_available(), available);  // stable, and the reason is optional
  if (available) {
    EXPECT_TRUE(why.empty()) << why;
    EXPECT_NO_THROW(cuda_driver());
    EXPECT_GE(cuda_device_count(), 1);
    return;
  }
  EXPECT_FALSE(why.empty());
  // Without a device, everything that needs one says so, as Unsupported.
  EXPECT_EQ(expect_compile_error([] { cuda_driver(); }).kind(), ErrorKind::Unsupported);
  EXPECT_EQ(expect_compile_error([] { CudaModule module("\177ELF"); }).kind(), ErrorKind::Unsupported);
  EXPECT_EQ(expect_compile_error([] { device_arch(0); }).kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(cuda_error_text(1), "1")) << cuda_error_text(1);
}

// ---- on a GPU ----------------------------------------------------------------------------

// Device memory for the tests, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    cuda_check(cuda_driver().cuMemAlloc(&pointer_, bytes), "cuMemAlloc");
  }
  ~DeviceBuffer() { cuda_driver().cuMemFree(pointer_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* data) {
    cuda_check(cuda_driver().cuMemcpyHtoD(pointer_, data, bytes_), "cuMemcpyHtoD");
  }
  void download(void* data) {
    cuda_check(cuda_driver().cuMemcpyDtoH(data, pointer_, bytes_), "cuMemcpyDtoH");
  }
  cu::DevicePtr* address() { return &pointer_; }

 private:
  cu::DevicePtr pointer_ = 0;
  size_t bytes_;
};

// Compiles for the device with NVRTC, or nvcc when NVRTC is missing; "" with *why set when
// neither is there.
std::string compile_for_device(const std::string& source, CudaBinaryKind kind, std::string* why) {
  CudaCompileOptions options;
  options.arch = device_arch(0);
  options.output = kind;
  std::string nvrtc_why, nvcc_why;
  if (nvrtc_available(&nvrtc_why)) return compile_with_nvrtc(source, "kernel.cu", options).binary;
  if (nvcc_available(&nvcc_why)) return compile_with_nvcc(source, "kernel.cu", options).binary;
  *why = "no CUDA compiler: " + nvrtc_why + "; " + nvcc_why;
  return "";
}

#define COMPILE_FOR_DEVICE_OR_SKIP(var, source, kind) \
  std::string var;                                    \
  do {                                                \
    std::string why;                                  \
    var = compile_for_device(source, kind, &why);     \
    if (var.empty()) GTEST_SKIP() << why;             \
  } while (0)

// Runs add on n elements and returns how many results differ from the host's sums.
size_t run_add(const CudaFunction& add, int n) {
  const size_t count = static_cast<size_t>(n);
  std::vector<float> a(count), b(count), out(count);
  for (int i = 0; i < n; ++i) {
    a[size_t(i)] = 0.5f * float(i % 4093) - 7.0f;
    b[size_t(i)] = 3.0f - 0.25f * float(i % 1021);
  }
  DeviceBuffer da(a.size() * sizeof(float)), db(b.size() * sizeof(float));
  da.upload(a.data());
  db.upload(b.data());
  void* args[] = {da.address(), db.address(), &n};
  unsigned threads = 256;
  add.launch({(unsigned(n) + threads - 1) / threads, 1, 1}, {threads, 1, 1}, 0, nullptr, args);
  cuda_check(cuda_driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  da.download(out.data());
  size_t wrong = 0;
  for (size_t i = 0; i < out.size(); ++i) wrong += out[i] != a[i] + b[i];
  return wrong;
}

TEST(Gpu, DeviceDescribesItself) {
  SKIP_WITHOUT_GPU();
  CudaDeviceInfo info = cuda_device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.major, 7);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GE(info.max_shared_memory_per_block_optin, 48 * 1024);
  EXPECT_EQ(info.arch, device_arch(0));
  EXPECT_EQ(info.arch, arch_for_compute_capability(info.major, info.minor));
  EXPECT_GE(cuda_driver_version(), 11020);
}

TEST(Gpu, AddKernelRunsAndMatches) {
  SKIP_WITHOUT_GPU();
  COMPILE_FOR_DEVICE_OR_SKIP(cubin, kAddSource, CudaBinaryKind::Cubin);
  ASSERT_TRUE(starts_with_elf_magic(cubin));
  CudaModule module(cubin);
  EXPECT_NE(module.context(), nullptr);
  CudaFunction add = module.function("add");
  EXPECT_EQ(add.name(), "add");
  EXPECT_EQ(run_add(add, 1 << 20), 0u);
  EXPECT_EQ(run_add(add, 1000), 0u);  // a partial last block
}

TEST(Gpu, FunctionAttributesAreRead) {
  SKIP_WITHOUT_GPU();
  COMPILE_FOR_DEVICE_OR_SKIP(cubin, kAddSource, CudaBinaryKind::Cubin);
  CudaModule module(cubin);
  CudaFunctionAttributes a = module.function("add").attributes();
  CudaDeviceInfo info = cuda_device_info(0);
  EXPECT_GT(a.registers, 0);
  EXPECT_LT(a.registers, 64);   // a four-line kernel
  EXPECT_EQ(a.local_bytes, 0);  // nothing to spill
  EXPECT_EQ(a.static_shared_bytes, 0);
  EXPECT_GT(a.max_threads_per_block, 0);
  EXPECT_LE(a.max_threads_per_block, 1024);
  EXPECT_EQ(a.binary_version, info.major * 10 + info.minor);
}

TEST(Gpu, PtxIsCompiledByTheDriverOnLoad) {
  SKIP_WITHOUT_GPU();
  COMPILE_FOR_DEVICE_OR_SKIP(ptx, kAddSource, CudaBinaryKind::Ptx);
  ASSERT_FALSE(starts_with_elf_magic(ptx));
  CudaModule module(ptx);
  EXPECT_EQ(run_add(module.function("add"), 4096), 0u);
}

TEST(Gpu, MissingKernelAndBadImagesAreErrors) {
  SKIP_WITHOUT_GPU();
  COMPILE_FOR_DEVICE_OR_SKIP(cubin, kAddSource, CudaBinaryKind::Cubin);
  CudaModule module(cubin);
  CompileError missing = expect_compile_error([&] { module.function("no_such_kernel"); });
  EXPECT_EQ(missing.kind(), ErrorKind::Internal);
  EXPECT_TRUE(contains(missing.what(), "no_such_kernel")) << missing.what();
  CompileError garbage = expect_compile_error([] { CudaModule bad("this is neither PTX nor a cubin"); });
  EXPECT_EQ(garbage.kind(), ErrorKind::Internal);
  EXPECT_TRUE(contains(garbage.what(), "cuModuleLoadData")) << garbage.what();
}

// A cubin runs only on its own major architecture: an sm_80 cubin is refused by a 9.0 device.
TEST(Gpu, CubinForAnotherArchitectureIsRefused) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_NVRTC();
  if (cuda_device_info(0).major == 8) GTEST_SKIP() << "the device runs sm_80 cubins";
  CudaCompileOptions options;
  options.arch = "sm_80";
  std::string cubin = compile_with_nvrtc(kAddSource, "add.cu", options).binary;
  CompileError e = expect_compile_error([&] { CudaModule module(cubin); });
  EXPECT_EQ(e.kind(), ErrorKind::Internal);
  EXPECT_TRUE(contains(e.what(), device_arch(0))) << e.what();
}

TEST(Gpu, DynamicSharedMemoryAboveTheDefaultNeedsOptIn) {
  SKIP_WITHOUT_GPU();
  const char* source = R"(extern "C" __global__ void reverse(float* out, const float* in, int n) {
  extern __shared__ float buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
)";
  COMPILE_FOR_DEVICE_OR_SKIP(cubin, source, CudaBinaryKind::Cubin);
  int optin = cuda_device_info(0).max_shared_memory_per_block_optin;
  if (optin <= 64 * 1024) GTEST_SKIP() << "the device allows only " << optin << " bytes per block";
  CudaModule module(cubin);
  CudaFunction reverse = module.function("reverse");
  int n = 64 * 1024 / int(sizeof(float));  // 64 KiB: above the 48 KiB default
  unsigned bytes = unsigned(n) * sizeof(float);
  const size_t count = static_cast<size_t>(n);
  std::vector<float> in(count), out(count);
  for (int i = 0; i < n; ++i) in[size_t(i)] = float(i);
  DeviceBuffer din(bytes), dout(bytes);
  din.upload(in.data());
  void* args[] = {dout.address(), din.address(), &n};
  EXPECT_EQ(expect_compile_error([&] {
              reverse.launch({1, 1, 1}, {256, 1, 1}, bytes, nullptr, args);
            }).kind(),
            ErrorKind::Internal);
  reverse.set_max_dynamic_shared_memory(int(bytes));
  EXPECT_EQ(reverse.attributes().max_dynamic_shared_bytes, int(bytes));
  reverse.launch({1, 1, 1}, {256, 1, 1}, bytes, nullptr, args);
  cuda_check(cuda_driver().cuCtxSynchronize(), "cuCtxSynchronize");
  dout.download(out.data());
  size_t wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out[size_t(i)] != float(n - 1 - i);
  EXPECT_EQ(wrong, 0u);
  CompileError too_much = expect_compile_error([&] { reverse.set_max_dynamic_shared_memory(optin + 4096); });
  EXPECT_EQ(too_much.kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(too_much.what(), std::to_string(optin))) << too_much.what();
}

// A fresh thread has no current context; launching there adopts the module's.
TEST(Gpu, LaunchFromAThreadWithoutContext) {
  SKIP_WITHOUT_GPU();
  COMPILE_FOR_DEVICE_OR_SKIP(cubin, kAddSource, CudaBinaryKind::Cubin);
  CudaModule module(cubin);
  CudaFunction add = module.function("add");
  size_t wrong = 1;
  std::string error;
  std::thread worker([&] {
    try {
      // Allocation needs a current context too: the launch path is what is tested here,
      // so allocate after the thread has adopted one through a first launch.
      int n = 0;
      cu::DevicePtr none = 0;
      void* args[] = {&none, &none, &n};
      add.launch({1, 1, 1}, {32, 1, 1}, 0, nullptr, args);
      wrong = run_add(add, 1 << 16);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  worker.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace tl
