// The CUDA code generator on hand-built thread-level IR: key lines of the generated source,
// the kernel descriptions for the runtime, rejections, and (where the tools exist) nvcc
// compiling every source for sm_80 and sm_90a, cuobjdump finding cp.async's LDGSTS, and,
// on a machine with a GPU, the kernels run against values computed here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/codegen_cuda.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "target/target.h"
#include "transform/check_block_budget.h"

namespace tl {
namespace {

namespace fs = std::filesystem;

// ================================================================ tools

// The project's include/ directory (where tl/cuda/tl_cuda.h lives).
std::string include_dir() {
#ifdef TL_TEST_INCLUDE_DIR
  return TL_TEST_INCLUDE_DIR;
#else
  std::vector<fs::path> starts = {fs::absolute(fs::path(__FILE__)).parent_path(), fs::current_path()};
  for (fs::path dir : starts) {
    for (; !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / "include" / "tl" / "cuda" / "tl_cuda.h")) return (dir / "include").string();
      if (dir == dir.parent_path()) break;
    }
  }
  return "include";
#endif
}

bool is_executable(const fs::path& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

// A CUDA tool (nvcc, cuobjdump): $CUDA_HOME/bin, /usr/local/cuda/bin, then PATH; "" if absent.
std::string find_cuda_tool(const std::string& name) {
  std::vector<fs::path> candidates;
  if (name == "nvcc")
    if (const char* p = std::getenv("TILELANG_NVCC_PATH")) candidates.emplace_back(p);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var)) candidates.push_back(fs::path(home) / "bin" / name);
  candidates.push_back(fs::path("/usr/local/cuda/bin") / name);
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty()) candidates.push_back(fs::path(dir) / name);
  }
  for (auto& c : candidates)
    if (is_executable(c)) return c.string();
  return "";
}

const fs::path& scratch_dir() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("tl_codegen_cuda_test_" + std::to_string(getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Runs a shell command with its output in `log`; returns the exit status.
int run_command(const std::string& command, const fs::path& log) {
  int status = std::system((command + " > " + quote(log.string()) + " 2>&1").c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Compiles source to a cubin for arch; returns the cubin's path ("" after reporting failure).
std::string nvcc_cubin(const std::string& source, const std::string& name, const std::string& arch) {
  std::string nvcc = find_cuda_tool("nvcc");
  fs::path cu = scratch_dir() / (name + "_" + arch + ".cu");
  fs::path cubin = scratch_dir() / (name + "_" + arch + ".cubin");
  fs::path log = scratch_dir() / (name + "_" + arch + ".log");
  std::ofstream(cu) << source;
  std::string cmd = quote(nvcc) + " -cubin -std=c++17 -arch=" + arch + " -I" + quote(include_dir()) + " -o " +
                    quote(cubin.string()) + " " + quote(cu.string());
  int rc = run_command(cmd, log);
  if (rc != 0) {
    ADD_FAILURE() << "nvcc failed for " << arch << " (exit " << rc << "):\n"
                  << read_text(log) << "\n--- source ---\n"
                  << source;
    return "";
  }
  return cubin.string();
}

// nvcc compiles the source for both architectures CI checks (the test is skipped from here
// on without nvcc; the source checks before it have run).
#define EXPECT_NVCC_COMPILES(source, name)                                                        \
  do {                                                                                            \
    if (find_cuda_tool("nvcc").empty()) GTEST_SKIP() << "nvcc not found: compile checks skipped"; \
    EXPECT_NE(nvcc_cubin(source, name, "sm_80"), "");                                             \
    EXPECT_NE(nvcc_cubin(source, name, "sm_90a"), "");                                            \
  } while (0)

bool gpu_present() {
  if (std::getenv("TL_TEST_NO_GPU")) return false;
  return fs::exists("/dev/nvidia0") || fs::exists("/dev/nvidiactl");
}

// Host-side helpers for the GPU checks (compiled by nvcc with the kernel).
const char* kHarnessPrelude = R"(
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)
template <typename T> T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  cudaMalloc(&d, h.size() * sizeof(T));
  cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}
template <typename T> std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}
)";

// On a machine with a GPU: compiles kernel source + main_body into a program and runs it;
// the program returns 0 and prints "PASS" when the results agree.
void expect_runs_on_gpu(const std::string& source, const std::string& main_body, const std::string& name) {
  std::string nvcc = find_cuda_tool("nvcc");
  if (nvcc.empty() || !gpu_present()) {
    std::cout << "[ SKIPPED ] no GPU (or no nvcc): run check skipped\n";
    return;
  }
  fs::path cu = scratch_dir() / (name + "_run.cu"), exe = scratch_dir() / (name + "_run");
  fs::path log = scratch_dir() / (name + "_run.log");
  std::ofstream(cu) << source << kHarnessPrelude << "int main() {\n" << main_body << "\n}\n";
  std::string cmd = quote(nvcc) + " -std=c++17 -arch=native -I" + quote(include_dir()) + " -o " +
                    quote(exe.string()) + " " + quote(cu.string());
  int rc = run_command(cmd, log);
  ASSERT_EQ(rc, 0) << "nvcc failed:\n" << read_text(log) << "\n--- source ---\n" << source;
  rc = run_command(quote(exe.string()), log);
  std::string out = read_text(log);
  EXPECT_EQ(rc, 0) << out << "\n--- source ---\n" << source;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
}

// ================================================================ IR building helpers

const DataType kF32 = DataType::Float(32), kF16 = DataType::Float(16), kI32 = DataType::Int(32);

Expr ld(const Buffer& b, std::vector<Expr> idx) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx));
}
Stmt st(const Buffer& b, Expr value, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, std::move(value), std::move(idx));
}
Stmt loop(const Var& v, Expr extent, ForKind kind, Stmt body) {
  return std::make_shared<ForNode>(v, make_int(0, v->dtype), std::move(extent), kind, std::move(body));
}
Stmt when(Expr cond, Stmt then_case) {
  return std::make_shared<IfThenElseNode>(std::move(cond), then_case, nullptr);
}
Stmt eval(Expr e) { return std::make_shared<EvaluateNode>(std::move(e)); }
Stmt alloc(const Buffer& b, Stmt body, Attrs attrs = {}) {
  return std::make_shared<AllocateNode>(b, std::move(body), std::move(attrs));
}
Expr call(DataType t, const std::string& op, std::vector<Expr> args) {
  return std::make_shared<CallNode>(t, op, std::move(args));
}
Stmt sync() { return eval(call(DataType::Void(), "sync_threads", {})); }
Param buf_param(const Buffer& b) { return Param{b->data, b}; }
Param scalar_param(const Var& v) { return Param{v, nullptr}; }

// A kernel over blocks `bx` (1-D grid) and `threads` threads tx.
Stmt kernel1d(const Var& bx, Expr grid, const Var& tx, int64_t threads, Stmt body) {
  return std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{std::move(grid)},
                                      std::vector<Var>{tx}, std::vector<int64_t>{threads}, std::move(body));
}

PrimFunc make_func(const std::string& name, std::vector<Param> params, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = name;
  f->params = std::move(params);
  f->body = std::move(body);
  return f;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
#define EXPECT_CONTAINS(source, needle) \
  EXPECT_TRUE(contains(source, needle)) << "missing: " << needle << "\n" << source

// ================================================================ kernels

// C[i] = A[i] + B[i] with i = bx * 256 + tx, guarded for the tail; n is a shape variable.
PrimFunc vector_add() {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {n}, scope::kGlobal);
  Buffer C = make_buffer("C", kF32, {n}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr i = add(mul(bx, make_int(256)), tx);
  Stmt body = when(lt(i, n), st(C, add(ld(A, {i}), ld(B, {i})), {i}));
  Expr grid = floordiv(add(n, make_int(255)), make_int(256));
  return make_func("vector_add", {buf_param(A), buf_param(B), buf_param(C)},
                   kernel1d(bx, grid, tx, 256, body));
}

TEST(CodegenCUDA, VectorAddSignatureAndGuard) {
  std::string src = codegen_cuda(vector_add(), {"sm_90a", true});
  EXPECT_CONTAINS(src, "#include \"tl/cuda/tl_cuda.h\"");
  EXPECT_CONTAINS(
      src,
      "extern \"C\" __global__ void __launch_bounds__(256) vector_add_kernel(const float* __restrict__ A, "
      "const float* __restrict__ B, float* __restrict__ C, const int64_t n_i64) {");
  EXPECT_CONTAINS(src, "const int32_t n = (int32_t)n_i64;");
  EXPECT_CONTAINS(src, "const int32_t bx = (int32_t)blockIdx.x;");
  EXPECT_CONTAINS(src, "const int32_t tx = (int32_t)threadIdx.x;");
  EXPECT_CONTAINS(src, "if (bx * 256 + tx < n) {");
  EXPECT_CONTAINS(src, "C[bx * 256 + tx] = A[bx * 256 + tx] + B[bx * 256 + tx];");
  EXPECT_FALSE(contains(codegen_cuda(vector_add(), {"sm_90a", false}), "__launch_bounds__"));
  EXPECT_NVCC_COMPILES(src, "vector_add");
  expect_runs_on_gpu(src, R"(
  const int n = 1000;
  std::vector<float> a(n + 24), b(n + 24), c(n + 24, -7.0f);
  for (int i = 0; i < n + 24; ++i) { a[i] = 0.5f * i; b[i] = 3.0f - i; }
  float *da = to_device(a), *db = to_device(b), *dc = to_device(c);
  vector_add_kernel<<<(n + 255) / 256, 256>>>(da, db, dc, (int64_t)n);
  CHECK(cudaDeviceSynchronize());
  auto out = to_host(dc, n + 24);
  for (int i = 0; i < n + 24; ++i)
    if (out[i] != (i < n ? a[i] + b[i] : -7.0f)) { std::printf("bad %d: %g\n", i, out[i]); return 1; }
  std::printf("PASS\n");
  return 0;)",
                     "vector_add");
}

TEST(CodegenCUDA, KernelInfoForTheRuntime) {
  PrimFunc f = vector_add();
  auto infos = cuda_kernel_infos(f);
  ASSERT_EQ(infos.size(), 1u);
  const CudaKernelInfo& k = infos[0];
  EXPECT_EQ(k.name, "vector_add_kernel");
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(k.dynamic_shared_bytes, 0);
  auto* g = as<BinaryNode>(k.grid[0]);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->op, BinaryOp::FloorDiv);
  EXPECT_EQ(*const_int(k.grid[1]), 1);
  EXPECT_EQ(*const_int(k.grid[2]), 1);
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[0].kind, CudaKernelParam::Kind::Buffer);
  EXPECT_EQ(k.params[2].name, "C");
  EXPECT_EQ(k.params[3].kind, CudaKernelParam::Kind::ShapeVar);
  EXPECT_EQ(k.params[3].dtype, DataType::Int(64));
  EXPECT_EQ(k.params[3].param_index, -1);
}

// Row sums of A[M, 128]: a shared tree step to 64 and 32, then a warp shuffle reduction.
PrimFunc block_reduce() {
  const int64_t M = 40;
  Buffer A = make_buffer("A", kF32, {make_int(M), make_int(128)}, scope::kGlobal);
  Buffer Out = make_buffer("Out", kF32, {make_int(M)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF32, {make_int(128)}, scope::kShared);
  Buffer v = make_buffer("v", kF32, {make_int(1)}, scope::kLocalVar);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr zero = make_int(0);
  std::vector<Stmt> warp = {st(v, add(ld(S, {tx}), ld(S, {add(tx, make_int(32))})), {zero})};
  for (int mask : {16, 8, 4, 2, 1})
    warp.push_back(
        st(v, add(ld(v, {zero}), call(kF32, "shfl_xor", {ld(v, {zero}), make_int(mask), make_int(32)})),
           {zero}));
  warp.push_back(when(binary(BinaryOp::EQ, tx, zero), st(Out, ld(v, {zero}), {bx})));
  Stmt body = alloc(
      S, make_seq({st(S, ld(A, {bx, tx}), {tx}), sync(),
                   when(lt(tx, make_int(64)), st(S, add(ld(S, {tx}), ld(S, {add(tx, make_int(64))})), {tx})),
                   sync(), when(lt(tx, make_int(32)), alloc(v, make_seq(warp)))}));
  return make_func("block_reduce", {buf_param(A), buf_param(Out)}, kernel1d(bx, make_int(M), tx, 128, body));
}

TEST(CodegenCUDA, BlockReductionSharedAndShuffle) {
  std::string src = codegen_cuda(block_reduce(), {});
  EXPECT_CONTAINS(src, "__shared__ alignas(16) float S[128];");
  EXPECT_CONTAINS(src, "S[tx] = A[bx * 128 + tx];");
  EXPECT_CONTAINS(src, "__syncthreads();");
  EXPECT_CONTAINS(src, "float v = 0.0f;");
  EXPECT_CONTAINS(src, "v = v + __shfl_xor_sync(0xffffffffu, v, 16, 32);");
  EXPECT_NVCC_COMPILES(src, "block_reduce");
  expect_runs_on_gpu(src, R"(
  const int M = 40;
  std::vector<float> a(M * 128), want(M, 0.0f);
  for (int i = 0; i < M * 128; ++i) { a[i] = float((i * 7) % 13) - 6.0f; want[i / 128] += a[i]; }
  float *da = to_device(a), *dout = to_device(std::vector<float>(M, -1.0f));
  block_reduce_kernel<<<M, 128>>>(da, dout);
  CHECK(cudaDeviceSynchronize());
  auto out = to_host(dout, M);
  for (int r = 0; r < M; ++r)
    if (out[r] != want[r]) { std::printf("row %d: %g != %g\n", r, out[r], want[r]); return 1; }
  std::printf("PASS\n");
  return 0;)",
                     "block_reduce");
}

// Y = X * 2 + 1 in fp32, Z = X * X rounded to fp16, W = sigmoid(X) in fp16.
TEST(CodegenCUDA, Float16ToFloat32) {
  Var n = make_var("n");
  Buffer X = make_buffer("X", kF16, {n}, scope::kGlobal);
  Buffer Y = make_buffer("Y", kF32, {n}, scope::kGlobal);
  Buffer Z = make_buffer("Z", kF16, {n}, scope::kGlobal);
  Buffer W = make_buffer("W", kF16, {n}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr i = add(mul(bx, make_int(128)), tx);
  Expr x = ld(X, {i});
  Stmt body = when(lt(i, n), make_seq({st(Y, add(mul(cast(kF32, x), make_float(2.0)), make_float(1.0)), {i}),
                                       st(Z, mul(x, x), {i}), st(W, tl::call("sigmoid", {x}), {i})}));
  PrimFunc f = make_func("half_io", {buf_param(X), buf_param(Y), buf_param(Z), buf_param(W)},
                         kernel1d(bx, floordiv(add(n, make_int(127)), make_int(128)), tx, 128, body));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "const __half* __restrict__ X");
  EXPECT_CONTAINS(src, "Y[bx * 128 + tx] = __half2float(X[bx * 128 + tx]) * 2.0f + 1.0f;");
  EXPECT_CONTAINS(
      src,
      "Z[bx * 128 + tx] = __float2half_rn(__half2float(X[bx * 128 + tx]) * __half2float(X[bx * 128 + tx]));");
  EXPECT_CONTAINS(src, "tl::sigmoid(__half2float(X[bx * 128 + tx]))");
  EXPECT_NVCC_COMPILES(src, "half_io");
  expect_runs_on_gpu(src, R"(
  const int n = 300;
  std::vector<__half> x(n);
  for (int i = 0; i < n; ++i) x[i] = __float2half(0.125f * (i - 150));
  __half* dx = to_device(x);
  float* dy = to_device(std::vector<float>(n));
  __half *dz = to_device(std::vector<__half>(n)), *dw = to_device(std::vector<__half>(n));
  half_io_kernel<<<(n + 127) / 128, 128>>>(dx, dy, dz, dw, (int64_t)n);
  CHECK(cudaDeviceSynchronize());
  auto y = to_host(dy, n);
  auto z = to_host(dz, n);
  for (int i = 0; i < n; ++i) {
    float xv = __half2float(x[i]);
    if (y[i] != xv * 2.0f + 1.0f) { std::printf("y %d\n", i); return 1; }
    if (__half2float(z[i]) != __half2float(__float2half(xv * xv))) { std::printf("z %d\n", i); return 1; }
  }
  std::printf("PASS\n");
  return 0;)",
                     "half_io");
}

// Two dynamic shared buffers: one placed by the lowering (offset 0), one left to codegen.
PrimFunc dyn_shared() {
  Buffer A = make_buffer("A", kF32, {make_int(64), make_int(256)}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {make_int(64), make_int(256)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF32, {make_int(256)}, scope::kSharedDyn);
  Buffer T2 = make_buffer("T", kI32, {make_int(10)}, scope::kSharedDyn);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr rev = sub(make_int(255), tx);
  Stmt body = alloc(
      S,
      alloc(T2, make_seq({st(S, ld(A, {bx, tx}), {tx}), when(lt(tx, make_int(10)), st(T2, tx, {tx})), sync(),
                          st(B, add(ld(S, {rev}), cast(kF32, ld(T2, {make_int(3)}))), {bx, tx})})),
      {{"offset", int64_t(0)}});
  return make_func("dyn_shared", {buf_param(A), buf_param(B)}, kernel1d(bx, make_int(64), tx, 256, body));
}

TEST(CodegenCUDA, DynamicSharedMemory) {
  PrimFunc f = dyn_shared();
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "extern __shared__ __align__(1024) uint8_t tl_dyn_smem[];");
  EXPECT_CONTAINS(src, "float* S = reinterpret_cast<float*>(tl_dyn_smem + 0);");
  EXPECT_CONTAINS(src, "int32_t* T = reinterpret_cast<int32_t*>(tl_dyn_smem + 1024);");
  auto infos = cuda_kernel_infos(f);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].dynamic_shared_bytes, 1024 + 128);  // T rounded up to the alignment
  EXPECT_NVCC_COMPILES(src, "dyn_shared");
  expect_runs_on_gpu(src, R"(
  std::vector<float> a(64 * 256);
  for (int i = 0; i < 64 * 256; ++i) a[i] = float(i % 1000);
  float *da = to_device(a), *db = to_device(std::vector<float>(64 * 256));
  dyn_shared_kernel<<<64, 256, 1152>>>(da, db);
  CHECK(cudaDeviceSynchronize());
  auto b = to_host(db, 64 * 256);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 256; ++c)
      if (b[r * 256 + c] != a[r * 256 + 255 - c] + 3.0f) { std::printf("bad %d %d\n", r, c); return 1; }
  std::printf("PASS\n");
  return 0;)",
                     "dyn_shared");
}

// Each thread copies 8 halves (16 bytes) at once; a second vectorized loop that computes is
// an unrolled loop.
TEST(CodegenCUDA, VectorizedCopy) {
  Buffer A = make_buffer("A", kF16, {make_int(4096)}, scope::kGlobal);
  Buffer B = make_buffer("B", kF16, {make_int(4096)}, scope::kGlobal);
  Buffer R = make_buffer("R", kF16, {make_int(8)}, scope::kLocal);
  Var bx = make_var("bx"), tx = make_var("tx"), v = make_var("v"), w = make_var("w");
  Expr base = mul(add(mul(bx, make_int(128)), tx), make_int(8));
  Stmt copy_in = loop(v, make_int(8), ForKind::Vectorized, st(R, ld(A, {add(base, v)}), {v}));
  Stmt scale = loop(w, make_int(8), ForKind::Vectorized, st(R, mul(ld(R, {w}), make_float(2.0, kF16)), {w}));
  Var u = make_var("u");
  Stmt copy_out = loop(u, make_int(8), ForKind::Vectorized, st(B, ld(R, {u}), {add(base, u)}));
  PrimFunc f = make_func("vec_copy", {buf_param(A), buf_param(B)},
                         kernel1d(bx, make_int(4), tx, 128, alloc(R, make_seq({copy_in, scale, copy_out}))));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "alignas(16) __half R[8];");
  EXPECT_CONTAINS(
      src, "*reinterpret_cast<uint4*>(&R[0]) = *reinterpret_cast<const uint4*>(&A[(bx * 128 + tx) * 8]);");
  EXPECT_CONTAINS(
      src, "*reinterpret_cast<uint4*>(&B[(bx * 128 + tx) * 8]) = *reinterpret_cast<const uint4*>(&R[0]);");
  EXPECT_CONTAINS(src, "#pragma unroll\n  for (int32_t w = 0; w < 8; ++w) {");
  EXPECT_NVCC_COMPILES(src, "vec_copy");
  expect_runs_on_gpu(src, R"(
  std::vector<__half> a(4096);
  for (int i = 0; i < 4096; ++i) a[i] = __float2half(float(i % 512) - 256.0f);
  __half *da = to_device(a), *db = to_device(std::vector<__half>(4096));
  vec_copy_kernel<<<4, 128>>>(da, db);
  CHECK(cudaDeviceSynchronize());
  auto b = to_host(db, 4096);
  for (int i = 0; i < 4096; ++i)
    if (__half2float(b[i]) != 2.0f * __half2float(a[i])) { std::printf("bad %d\n", i); return 1; }
  std::printf("PASS\n");
  return 0;)",
                     "vec_copy");
}

// A tile of 512 floats per block: 16 bytes per thread by cp.async into shared memory,
// commit, wait, barrier, then each thread writes out a neighbour's part.
PrimFunc cp_async_copy() {
  Buffer A = make_buffer("A", kF32, {make_int(8 * 512)}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {make_int(8 * 512)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF32, {make_int(512)}, scope::kShared);
  Var bx = make_var("bx"), tx = make_var("tx"), j = make_var("j");
  Expr t4 = mul(tx, make_int(4));
  Expr src = add(mul(bx, make_int(512)), t4);
  Stmt issue = eval(call(DataType::Void(), "cp_async", {ld(S, {t4}), ld(A, {src}), make_int(16)}));
  Expr other = mul(floormod(add(tx, make_int(1)), make_int(128)), make_int(4));
  Stmt out = loop(j, make_int(4), ForKind::Unrolled,
                  st(B, ld(S, {add(other, j)}), {add(add(mul(bx, make_int(512)), other), j)}));
  Stmt body = alloc(S, make_seq({issue, eval(call(DataType::Void(), "cp_async_commit", {})),
                                 eval(call(DataType::Void(), "cp_async_wait", {make_int(0)})), sync(), out}));
  return make_func("cp_async_copy", {buf_param(A), buf_param(B)}, kernel1d(bx, make_int(8), tx, 128, body));
}

TEST(CodegenCUDA, CpAsyncIntoShared) {
  std::string src = codegen_cuda(cp_async_copy(), {"sm_80", true});
  EXPECT_CONTAINS(src, "tl::cp_async<16>(&S[tx * 4], &A[bx * 512 + tx * 4]);");
  EXPECT_CONTAINS(src, "tl::cp_async_commit();\n  tl::cp_async_wait<0>();\n  __syncthreads();");
  EXPECT_CONTAINS(src, "#pragma unroll");
  EXPECT_NVCC_COMPILES(src, "cp_async_copy");
  expect_runs_on_gpu(src, R"(
  std::vector<float> a(8 * 512);
  for (int i = 0; i < 8 * 512; ++i) a[i] = float(i) * 0.25f;
  float *da = to_device(a), *db = to_device(std::vector<float>(8 * 512));
  cp_async_copy_kernel<<<8, 128>>>(da, db);
  CHECK(cudaDeviceSynchronize());
  auto b = to_host(db, 8 * 512);
  for (int i = 0; i < 8 * 512; ++i) if (b[i] != a[i]) { std::printf("bad %d\n", i); return 1; }
  std::printf("PASS\n");
  return 0;)",
                     "cp_async_copy");
}

TEST(CodegenCUDA, CpAsyncBecomesLdgsts) {
  std::string nvcc = find_cuda_tool("nvcc"), cuobjdump = find_cuda_tool("cuobjdump");
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found";
  if (cuobjdump.empty()) GTEST_SKIP() << "cuobjdump not found";
  std::string cubin = nvcc_cubin(codegen_cuda(cp_async_copy(), {"sm_80", true}), "cp_async_sass", "sm_80");
  ASSERT_NE(cubin, "");
  fs::path log = scratch_dir() / "cp_async_sass.txt";
  ASSERT_EQ(run_command(quote(cuobjdump) + " -sass " + quote(cubin), log), 0) << read_text(log);
  std::string sass = read_text(log);
  EXPECT_CONTAINS(sass, "LDGSTS");
  EXPECT_CONTAINS(sass, "LDGDEPBAR");
}

TEST(CodegenCUDA, CpAsyncNeedsSm80) {
  try {
    codegen_cuda(cp_async_copy(), {"sm_75", true});
    FAIL() << "expected an error";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_TRUE(contains(e.what(), "sm_80")) << e.what();
  }
}

// Global atomics: a float sum, a float max, an int32 min and a float16 sum over all threads.
TEST(CodegenCUDA, Atomics) {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Buffer I = make_buffer("I", kI32, {n}, scope::kGlobal);
  Buffer R = make_buffer("R", kF32, {make_int(2)}, scope::kGlobal);
  Buffer M = make_buffer("M", kI32, {make_int(1)}, scope::kGlobal);
  Buffer H = make_buffer("H", kF16, {make_int(1)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr i = add(mul(bx, make_int(128)), tx);
  auto atomic = [](const std::string& op, Expr dst, Expr value) {
    DataType t = dst->dtype;
    return eval(call(t, op, {std::move(dst), std::move(value)}));
  };
  Stmt body = when(lt(i, n), make_seq({atomic("atomic_add", ld(R, {make_int(0)}), ld(A, {i})),
                                       atomic("atomic_max", ld(R, {make_int(1)}), ld(A, {i})),
                                       atomic("atomic_min", ld(M, {make_int(0)}), ld(I, {i})),
                                       atomic("atomic_add", ld(H, {make_int(0)}), make_float(1.0, kF16))}));
  PrimFunc f = make_func("atomics", {buf_param(A), buf_param(I), buf_param(R), buf_param(M), buf_param(H)},
                         kernel1d(bx, floordiv(add(n, make_int(127)), make_int(128)), tx, 128, body));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "tl::atomic_add(&R[0], A[bx * 128 + tx]);");
  EXPECT_CONTAINS(src, "tl::atomic_max(&R[1], A[bx * 128 + tx]);");
  EXPECT_CONTAINS(src, "tl::atomic_min(&M[0], I[bx * 128 + tx]);");
  EXPECT_CONTAINS(src, "tl::atomic_add(&H[0], __float2half_rn(1.0f));");
  EXPECT_CONTAINS(src, "float* __restrict__ R");  // written through the atomic: not const
  EXPECT_NVCC_COMPILES(src, "atomics");
  expect_runs_on_gpu(src, R"(
  const int n = 1000;
  std::vector<float> a(n);
  std::vector<int> iv(n);
  for (int i = 0; i < n; ++i) { a[i] = float((i * 37) % 101) - 50.0f; iv[i] = (i * 53) % 997 - 400; }
  float want_sum = 0, want_max = -1e30f; int want_min = 1 << 30;
  for (int i = 0; i < n; ++i) { want_sum += a[i]; want_max = a[i] > want_max ? a[i] : want_max;
                                want_min = iv[i] < want_min ? iv[i] : want_min; }
  float *da = to_device(a), *dr = to_device(std::vector<float>{0.0f, -1e30f});
  int *di = to_device(iv), *dm = to_device(std::vector<int>{1 << 30});
  __half* dh = to_device(std::vector<__half>{__float2half(0.0f)});
  atomics_kernel<<<(n + 127) / 128, 128>>>(da, di, dr, dm, dh, (int64_t)n);
  CHECK(cudaDeviceSynchronize());
  auto r = to_host(dr, 2); auto m = to_host(dm, 1); auto h = to_host(dh, 1);
  if (r[0] != want_sum || r[1] != want_max || m[0] != want_min || __half2float(h[0]) != 1000.0f) {
    std::printf("sum %g/%g max %g/%g min %d/%d half %g\n", r[0], want_sum, r[1], want_max, m[0], want_min,
                __half2float(h[0]));
    return 1;
  }
  std::printf("PASS\n");
  return 0;)",
                     "atomics");
}

// Python semantics for // and % on negative int32 and int64 operands.
TEST(CodegenCUDA, FloorDivModOfNegatives) {
  Buffer A = make_buffer("A", kI32, {make_int(64)}, scope::kGlobal);
  Buffer B = make_buffer("B", kI32, {make_int(64)}, scope::kGlobal);
  Buffer Q = make_buffer("Q", kI32, {make_int(64)}, scope::kGlobal);
  Buffer Rm = make_buffer("Rm", kI32, {make_int(64)}, scope::kGlobal);
  Buffer L = make_buffer("L", DataType::Int(64), {make_int(64)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Expr a = ld(A, {tx}), b = ld(B, {tx});
  Stmt body = make_seq({st(Q, floordiv(a, b), {tx}), st(Rm, floormod(a, b), {tx}),
                        st(L, floordiv(cast(DataType::Int(64), a), make_int(-3, DataType::Int(64))), {tx}),
                        // Thread indices are non-negative: plain C operators.
                        st(Q, add(ld(Q, {tx}), floordiv(tx, make_int(8))), {tx})});
  PrimFunc f = make_func("floor_ops", {buf_param(A), buf_param(B), buf_param(Q), buf_param(Rm), buf_param(L)},
                         kernel1d(bx, make_int(1), tx, 64, body));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "Q[tx] = tl::floordiv(A[tx], B[tx]);");
  EXPECT_CONTAINS(src, "Rm[tx] = tl::floormod(A[tx], B[tx]);");
  EXPECT_CONTAINS(src, "L[tx] = tl::floordiv((int64_t)A[tx], (int64_t)-3);");
  EXPECT_CONTAINS(src, "Q[tx] = Q[tx] + tx / 8;");
  EXPECT_NVCC_COMPILES(src, "floor_ops");
  expect_runs_on_gpu(src, R"(
  std::vector<int> a(64), b(64);
  for (int i = 0; i < 64; ++i) { a[i] = i * 3 - 95; b[i] = (i % 7) - 3; if (b[i] == 0) b[i] = 5; }
  int *da = to_device(a), *db = to_device(b);
  int *dq = to_device(std::vector<int>(64)), *dr = to_device(std::vector<int>(64));
  long long* dl = (long long*)to_device(std::vector<long long>(64));
  floor_ops_kernel<<<1, 64>>>(da, db, dq, dr, (int64_t*)dl);
  CHECK(cudaDeviceSynchronize());
  auto q = to_host(dq, 64); auto r = to_host(dr, 64); auto l = to_host(dl, 64);
  for (int i = 0; i < 64; ++i) {
    int fq = a[i] / b[i]; if ((a[i] % b[i] != 0) && ((a[i] < 0) != (b[i] < 0))) --fq;
    int fr = a[i] - fq * b[i];
    long long lq = a[i] / -3; if (a[i] % 3 != 0 && a[i] > 0) --lq;
    if (q[i] != fq + i / 8 || r[i] != fr || l[i] != lq) {
      std::printf("i=%d a=%d b=%d q=%d/%d r=%d/%d l=%lld/%lld\n", i, a[i], b[i], q[i], fq + i / 8, r[i], fr,
                  l[i], lq);
      return 1;
    }
  }
  std::printf("PASS\n");
  return 0;)",
                     "floor_ops");
}

// Two kernels under a host let: names get indices, the let is re-evaluated in the kernel
// that reads it, and the runtime sees the grid with the let substituted.
TEST(CodegenCUDA, SeveralKernelsAndHostLets) {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Var scale = make_var("scale", kF32);
  Var blocks = make_var("blocks");
  Var bx0 = make_var("bx"), tx0 = make_var("tx"), bx1 = make_var("bx"), tx1 = make_var("tx");
  auto idx = [&](const Var& bx, const Var& tx) { return add(mul(bx, make_int(64)), tx); };
  Stmt k0 = kernel1d(bx0, blocks, tx0, 64,
                     when(lt(idx(bx0, tx0), n), st(A, mul(ld(A, {idx(bx0, tx0)}), scale), {idx(bx0, tx0)})));
  Stmt k1 = kernel1d(bx1, blocks, tx1, 64,
                     when(land(lt(bx1, blocks), lt(idx(bx1, tx1), n)),
                          st(A, add(ld(A, {idx(bx1, tx1)}), make_float(1.0)), {idx(bx1, tx1)})));
  Stmt body =
      std::make_shared<LetStmtNode>(blocks, floordiv(add(n, make_int(63)), make_int(64)), make_seq({k0, k1}));
  PrimFunc f = make_func("two_kernels", {buf_param(A), scalar_param(scale)}, body);
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "two_kernels_kernel0(float* __restrict__ A, const float scale, const int64_t n_i64)");
  EXPECT_CONTAINS(src, "two_kernels_kernel1(float* __restrict__ A, const float scale, const int64_t n_i64)");
  size_t second = src.find("two_kernels_kernel1(");
  EXPECT_EQ(src.find("const int32_t blocks = (n + 63) / 64;"), src.find("const int32_t blocks", second))
      << src;
  EXPECT_CONTAINS(src, "if (bx < blocks && bx * 64 + tx < n) {");
  auto infos = cuda_kernel_infos(f);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[1].name, "two_kernels_kernel1");
  ASSERT_EQ(infos[0].params.size(), 3u);
  EXPECT_EQ(infos[0].params[1].kind, CudaKernelParam::Kind::Scalar);
  // The grid no longer mentions the let's variable.
  bool mentions_blocks = false;
  for_each_expr(std::make_shared<EvaluateNode>(infos[0].grid[0]), [&](const ExprNode* e) {
    if (e == blocks.get()) mentions_blocks = true;
  });
  EXPECT_FALSE(mentions_blocks);
  EXPECT_NVCC_COMPILES(src, "two_kernels");
}

// print: one printf with the block and thread indices in front.
TEST(CodegenCUDA, PrintBecomesPrintf) {
  Buffer A = make_buffer("A", kF16, {make_int(4)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Stmt body = eval(call(DataType::Void(), "print",
                        {std::make_shared<StringImmNode>("A[tx] = 100% "), ld(A, {tx}),
                         std::make_shared<StringImmNode>(" ok="), lt(tx, make_int(2))}));
  PrimFunc f = make_func("printer", {buf_param(A)}, kernel1d(bx, make_int(1), tx, 4, body));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(
      src,
      "printf(\"block (%d, %d, %d) thread (%d, %d, %d): A[tx] = 100%% %.9g ok=%s\\n\", (int)blockIdx.x, "
      "(int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z, "
      "(double)__half2float(A[tx]), tl::bool_str(tx < 2));");
  EXPECT_NVCC_COMPILES(src, "printer");
}

// Symbolic strides and a 2-D global buffer: offsets in int64.
TEST(CodegenCUDA, SymbolicShapesUseInt64Offsets) {
  Var m = make_var("m"), k = make_var("k", DataType::Int(64));
  Buffer A = make_buffer("A", kF32, {m, k}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {m}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Stmt body = when(lt(tx, make_int(1)), st(B, ld(A, {bx, make_int(5)}), {bx}));
  PrimFunc f = make_func("strided", {buf_param(A), buf_param(B)}, kernel1d(bx, m, tx, 32, body));
  std::string src = codegen_cuda(f, {});
  EXPECT_CONTAINS(src, "const int64_t k)");
  EXPECT_CONTAINS(src, "const int64_t A_stride0 = k;");
  EXPECT_CONTAINS(src, "B[bx] = A[(int64_t)bx * A_stride0 + 5];");
  EXPECT_NVCC_COMPILES(src, "strided");
}

// ================================================================ rejections

CompileError codegen_error(const PrimFunc& f) {
  try {
    codegen_cuda(f, {});
  } catch (const CompileError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a CompileError";
  return CompileError(ErrorKind::Internal, {}, "none");
}

PrimFunc with_loop(ForKind kind) {
  Buffer A = make_buffer("A", kF32, {make_int(128)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx"), i = make_var("i");
  Stmt body = loop(i, make_int(128), kind, st(A, make_float(0.0), {i}));
  return make_func("leftover", {buf_param(A)}, kernel1d(bx, make_int(1), tx, 32, body));
}

TEST(CodegenCUDA, RejectsParallelAndPipelinedLoops) {
  for (ForKind kind : {ForKind::Parallel, ForKind::Pipelined}) {
    CompileError e = codegen_error(with_loop(kind));
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_TRUE(contains(e.what(), "internal:") && contains(e.what(), "not lowered")) << e.what();
  }
  EXPECT_NO_THROW(codegen_cuda(with_loop(ForKind::Serial), {}));
}

TEST(CodegenCUDA, RejectsTileOpsAndSubByteTypes) {
  Buffer A = make_buffer("A", kF32, {make_int(128)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Stmt fill = std::make_shared<TileOpNode>("fill", std::vector<BufferRegion>{full_region(A)},
                                           std::vector<Expr>{make_float(0.0)}, Attrs{});
  PrimFunc f = make_func("tile_left", {buf_param(A)}, kernel1d(bx, make_int(1), tx, 32, fill));
  EXPECT_EQ(codegen_error(f).kind(), ErrorKind::Internal);

  Buffer P = make_buffer("P", DataType(TypeCode::Float4E2M1, 4), {make_int(128)}, scope::kGlobal);
  PrimFunc g =
      make_func("fp4", {buf_param(P)}, kernel1d(bx, make_int(1), tx, 32, st(P, make_float(0.0), {tx})));
  CompileError e = codegen_error(g);
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(e.what(), "sub-byte")) << e.what();
}

TEST(CodegenCUDA, RejectsOversizedBlocks) {
  Buffer A = make_buffer("A", kF32, {make_int(128)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  PrimFunc f =
      make_func("big", {buf_param(A)}, kernel1d(bx, make_int(1), tx, 2048, st(A, make_float(0.0), {tx})));
  EXPECT_EQ(codegen_error(f).kind(), ErrorKind::Unsupported);
}

// 200 KiB of dynamic shared memory fits a Hopper block but not an Ampere one: the budget
// pass (run at the end of the CUDA pipeline) says so with each buffer's bytes.
TEST(CodegenCUDA, SharedMemoryLimitPerArch) {
  Buffer A = make_buffer("A", kF32, {make_int(128)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF32, {make_int(200 * 256)}, scope::kSharedDyn);
  Var bx = make_var("bx"), tx = make_var("tx");
  Stmt body = alloc(S, make_seq({st(S, ld(A, {tx}), {tx}), sync(), st(A, ld(S, {tx}), {tx})}));
  PrimFunc f = make_func("big_smem", {buf_param(A)}, kernel1d(bx, make_int(1), tx, 128, body));
  EXPECT_NO_THROW(check_block_budget(f, Target::parse("cuda -arch=sm_90a")));
  EXPECT_NO_THROW(codegen_cuda(f, {"sm_90a", true}));
  try {
    check_block_budget(f, Target::parse("cuda -arch=sm_80"));
    FAIL() << "expected an error";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_TRUE(contains(e.what(), "needs 204800 bytes of shared memory per block; sm_80 allows at most 166912"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "S: 51200 float32 = 204800 bytes")) << e.what();
  }
  EXPECT_EQ(cuda_kernel_infos(f)[0].dynamic_shared_bytes, 204800);
}

}  // namespace
}  // namespace tl
