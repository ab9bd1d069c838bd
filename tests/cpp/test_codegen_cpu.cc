// The CPU back end end to end: hand-built loop-level IR -> C++ -> host compiler -> dlopen
// -> run on data, compared with values computed directly here. Also the storage types of
// the device header (against known bit patterns and a brute-force nearest-value search),
// verify_cpu's rejections, and the compiler driver's error reporting.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/codegen_cpu.h"
#include "ir/error.h"
#include "ir/op.h"
#include "runtime/host_compiler.h"
#include "runtime/host_module.h"
#include "tl/cpu/tl_cpu.h"
#include "transform/verify_cpu.h"

namespace tl {
namespace {

// The project's include/ directory (where tl/cpu/tl_cpu.h lives): given at build time,
// or found next to this source file, or above the working directory.
std::string include_dir() {
#ifdef TL_TEST_INCLUDE_DIR
  return TL_TEST_INCLUDE_DIR;
#else
  namespace fs = std::filesystem;
  std::vector<fs::path> starts = {fs::absolute(fs::path(__FILE__)).parent_path(), fs::current_path()};
  for (fs::path dir : starts) {
    for (; !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / "include" / "tl" / "cpu" / "tl_cpu.h")) return (dir / "include").string();
      if (dir == dir.parent_path()) break;
    }
  }
  return "include";
#endif
}

// ================================================================ storage types

uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_fbits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A small float format described by its parameters, decoded with ldexp from the
// definition (independent of the header's bit manipulation).
struct Format {
  int exp_bits, man_bits;
  bool ieee;  // all-ones exponent = inf/NaN; otherwise e4m3fn (only all-ones pattern is NaN)
  int total() const { return 1 + exp_bits + man_bits; }
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  bool is_nan(uint32_t b) const {
    uint32_t e = (b >> man_bits) & ((1u << exp_bits) - 1), m = b & ((1u << man_bits) - 1);
    if (ieee) return e == (1u << exp_bits) - 1 && m != 0;
    return e == (1u << exp_bits) - 1 && m == (1u << man_bits) - 1;
  }
  double value(uint32_t b) const {
    uint32_t s = b >> (exp_bits + man_bits), e = (b >> man_bits) & ((1u << exp_bits) - 1);
    uint32_t m = b & ((1u << man_bits) - 1);
    double mag;
    if (ieee && e == (1u << exp_bits) - 1)
      mag = m ? NAN : INFINITY;
    else if (e == 0)
      mag = std::ldexp(double(m), 1 - bias() - man_bits);
    else
      mag = std::ldexp(1.0 + std::ldexp(double(m), -man_bits), int(e) - bias());
    return s ? -mag : mag;
  }
  // Nearest representable value, ties to an even mantissa, by binary search over the
  // positive codes (their values increase with the code). Past the largest finite value
  // the result is inf (IEEE) or NaN (e4m3fn): the step after the largest value counts as
  // one more candidate, the overflow.
  uint32_t nearest(double x) const {
    uint32_t sign = std::signbit(x) ? 1u << (exp_bits + man_bits) : 0;
    double a = std::fabs(x);
    uint32_t max_code = ieee ? (((1u << exp_bits) - 1) << man_bits) - 1 : (1u << (exp_bits + man_bits)) - 2;
    double max_val = value(max_code);
    double beyond = max_val + std::ldexp(1.0, int(max_code >> man_bits) - bias() - man_bits);
    uint32_t overflow = ieee ? (((1u << exp_bits) - 1) << man_bits) : ((1u << (exp_bits + man_bits)) - 1);
    if (a >= beyond) return sign | overflow;
    if (a > max_val) {  // between max and beyond: a midpoint goes to the even mantissa
      double down = a - max_val, up = beyond - a;
      if (down == up) return sign | ((max_code & 1) ? overflow : max_code);
      return sign | (down < up ? max_code : overflow);
    }
    uint32_t lo = 0, hi = max_code;  // smallest code with value >= a
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (value(mid) >= a)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo == 0 || value(lo) == a) return sign | lo;
    double up = value(lo) - a, down = a - value(lo - 1);
    if (up < down) return sign | lo;
    if (down < up) return sign | (lo - 1);
    return sign | ((lo & 1) ? lo - 1 : lo);
  }
};

const Format kHalf{5, 10, true}, kBf16{8, 7, true}, kE4M3{4, 3, false}, kE5M2{5, 2, true};

TEST(StorageTypes, HalfKnownPatterns) {
  EXPECT_EQ(half_t(1.0f).bits, 0x3c00);
  EXPECT_EQ(half_t(-2.5f).bits, 0xc100);
  EXPECT_EQ(half_t(65504.0f).bits, 0x7bff);
  EXPECT_EQ(half_t(65519.0f).bits, 0x7bff);
  EXPECT_EQ(half_t(65520.0f).bits, 0x7c00);  // the midpoint to 2^16 rounds to even: inf
  EXPECT_EQ(half_t(1e10f).bits, 0x7c00);
  EXPECT_EQ(half_t(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(half_t(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(half_t(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie: to even (zero)
  EXPECT_EQ(half_t(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(half_t(std::ldexp(3.0f, -25)).bits, 0x0002);     // tie 1.5 ulp: to even (2)
  EXPECT_EQ(half_t(std::ldexp(1023.0f, -24)).bits, 0x03ff);  // largest subnormal
  EXPECT_EQ(half_t(std::ldexp(1.0f, -14)).bits, 0x0400);     // smallest normal
  EXPECT_EQ(half_t(0.1f).bits, 0x2e66);
  EXPECT_EQ(half_t(-0.0f).bits, 0x8000);
  EXPECT_EQ(half_t(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);      // tie to even
  EXPECT_EQ(half_t(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);  // tie to even
  uint16_t nan_bits = half_t(NAN).bits;
  EXPECT_EQ(nan_bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan_bits & 0x03ff, 0);
  EXPECT_EQ(half_t(-NAN).bits & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(float(half_t::from_bits(0x7e00))));
  EXPECT_EQ(float(half_t::from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(float(half_t::from_bits(0xc100)), -2.5f);
  EXPECT_EQ(float(half_t::from_bits(0x7c00)), INFINITY);
  EXPECT_EQ(half_t(65504.0).bits, 0x7bff);  // from double, rounded directly
  EXPECT_EQ(half_t(3).bits, 0x4200);
}

TEST(StorageTypes, Bfloat16KnownPatterns) {
  EXPECT_EQ(bfloat16_t(1.0f).bits, 0x3f80);
  EXPECT_EQ(bfloat16_t(-2.5f).bits, 0xc020);
  EXPECT_EQ(bfloat16_t(1.00390625f).bits, 0x3f80);  // 1 + 2^-8: tie, to even
  EXPECT_EQ(bfloat16_t(1.01171875f).bits, 0x3f82);  // 1 + 3 * 2^-8: tie, to even
  EXPECT_EQ(bfloat16_t(1.0078125f).bits, 0x3f81);   // exactly representable
  EXPECT_EQ(bfloat16_t(1.005f).bits, 0x3f81);
  EXPECT_EQ(bfloat16_t(3.3895313892515355e38f).bits, 0x7f7f);
  EXPECT_EQ(bfloat16_t(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflow to inf
  EXPECT_EQ(bfloat16_t(NAN).bits, 0x7fc0);
  EXPECT_EQ(bfloat16_t(-NAN).bits, 0xffc0);
  EXPECT_EQ(bfloat16_t(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(bfloat16_t(std::ldexp(1.0f, -133)).bits, 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(float(bfloat16_t::from_bits(0x4049)), 3.140625f);
}

TEST(StorageTypes, Float8KnownPatterns) {
  EXPECT_EQ(float8_e4m3_t(1.0f).bits, 0x38);
  EXPECT_EQ(float8_e4m3_t(-2.5f).bits, 0xc2);
  EXPECT_EQ(float8_e4m3_t(448.0f).bits, 0x7e);
  EXPECT_EQ(float8_e4m3_t(464.0f).bits, 0x7e);  // midpoint to the NaN pattern: to even (448)
  EXPECT_EQ(float8_e4m3_t(465.0f).bits, 0x7f);  // overflow: NaN (no infinity in e4m3fn)
  EXPECT_EQ(float8_e4m3_t(INFINITY).bits, 0x7f);
  EXPECT_EQ(float8_e4m3_t(-INFINITY).bits, 0xff);
  EXPECT_EQ(float8_e4m3_t(NAN).bits, 0x7f);
  EXPECT_EQ(float8_e4m3_t(std::ldexp(1.0f, -9)).bits, 0x01);
  EXPECT_EQ(float8_e4m3_t(std::ldexp(1.0f, -10)).bits, 0x00);
  EXPECT_EQ(float(float8_e4m3_t::from_bits(0x7e)), 448.0f);
  EXPECT_TRUE(std::isnan(float(float8_e4m3_t::from_bits(0xff))));
  EXPECT_EQ(float(float8_e4m3_t::from_bits(0x78)), 256.0f);  // exponent 15 is a normal binade

  EXPECT_EQ(float8_e5m2_t(1.0f).bits, 0x3c);
  EXPECT_EQ(float8_e5m2_t(57344.0f).bits, 0x7b);
  EXPECT_EQ(float8_e5m2_t(61439.0f).bits, 0x7b);
  EXPECT_EQ(float8_e5m2_t(61440.0f).bits, 0x7c);  // tie to even: inf
  EXPECT_EQ(float8_e5m2_t(-INFINITY).bits, 0xfc);
  EXPECT_EQ(float8_e5m2_t(NAN).bits, 0x7e);
  EXPECT_EQ(float8_e5m2_t(std::ldexp(1.0f, -16)).bits, 0x01);
}

// Every code decodes to its defined value and encodes back to itself.
TEST(StorageTypes, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float h = half_t::from_bits(uint16_t(c)), b = bfloat16_t::from_bits(uint16_t(c));
    if (kHalf.is_nan(c)) {
      EXPECT_TRUE(std::isnan(h));
    } else {
      ASSERT_EQ(double(h), kHalf.value(c)) << c;
      ASSERT_EQ(half_t(h).bits, c);
    }
    if (kBf16.is_nan(c)) {
      EXPECT_TRUE(std::isnan(b));
    } else {
      ASSERT_EQ(double(b), kBf16.value(c)) << c;
      ASSERT_EQ(bfloat16_t(b).bits, c);
    }
  }
  for (uint32_t c = 0; c < 256; ++c) {
    float a = float8_e4m3_t::from_bits(uint8_t(c)), b = float8_e5m2_t::from_bits(uint8_t(c));
    if (kE4M3.is_nan(c)) {
      EXPECT_TRUE(std::isnan(a));
    } else {
      ASSERT_EQ(double(a), kE4M3.value(c)) << c;
      ASSERT_EQ(float8_e4m3_t(a).bits, c);
    }
    if (kE5M2.is_nan(c)) {
      EXPECT_TRUE(std::isnan(b));
    } else {
      ASSERT_EQ(double(b), kE5M2.value(c)) << c;
      ASSERT_EQ(float8_e5m2_t(b).bits, c);
    }
  }
}

// Rounding of arbitrary floats against the brute-force nearest-value reference, with
// values concentrated around the interesting places (ties, subnormals, overflow).
TEST(StorageTypes, RoundingMatchesNearestSearch) {
  std::mt19937 rng(7);
  auto check = [&](const Format& fmt, auto make, const char* what, float max_abs) {
    std::vector<float> samples;
    for (uint32_t c = 0; c<(1u << (fmt.total() - 1)); c += fmt.total()> 8 ? 37 : 1) {
      double v = fmt.value(c);
      if (!std::isfinite(v)) continue;
      double next = fmt.value(c + 1);
      samples.push_back(float(v));
      if (std::isfinite(next)) samples.push_back(float((v + next) / 2));  // exact ties
    }
    std::uniform_real_distribution<float> unit(-1, 1);
    for (int i = 0; i < 3000; ++i) samples.push_back(unit(rng) * max_abs * 1.2f);
    for (int i = 0; i < 3000; ++i) samples.push_back(from_fbits(rng()));
    for (float x : samples) {
      if (std::isnan(x)) continue;
      uint32_t got = make(x);
      uint32_t want = fmt.nearest(double(x));
      ASSERT_EQ(got, want) << what << " x=" << x << " (bits 0x" << std::hex << fbits(x) << ")";
    }
  };
  check(
      kE4M3, [](float x) { return uint32_t(float8_e4m3_t(x).bits); }, "e4m3", 448);
  check(
      kE5M2, [](float x) { return uint32_t(float8_e5m2_t(x).bits); }, "e5m2", 57344);
  check(
      kHalf, [](float x) { return uint32_t(half_t(x).bits); }, "float16", 65504);
  check(
      kBf16, [](float x) { return uint32_t(bfloat16_t(x).bits); }, "bfloat16", 3e38f);

  // From double the 16- and 8-bit IEEE-style formats round once, directly (as numpy and
  // ml_dtypes do); doubles just off a float tie expose a double rounding.
  std::uniform_real_distribution<double> wide(-70000, 70000);
  for (int i = 0; i < 20000; ++i) {
    double x = i % 2 ? wide(rng) : wide(rng) * 1e-6;
    double tie = kHalf.value(kHalf.nearest(x)) + std::ldexp(1.0, -30);
    for (double v : {x, tie}) {
      ASSERT_EQ(half_t(v).bits, kHalf.nearest(v)) << v;
      ASSERT_EQ(float8_e5m2_t(v).bits, kE5M2.nearest(v)) << v;
      ASSERT_EQ(float8_e4m3_t(v).bits, kE4M3.nearest(v)) << v;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own float -> _Float16 conversion is a second, independent reference.
TEST(StorageTypes, HalfMatchesCompilerFloat16) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) {
    float x = from_fbits(uint32_t(u));
    _Float16 ref = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    uint16_t got = half_t(x).bits;
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(float(half_t::from_bits(got))));
      continue;
    }
    ASSERT_EQ(got, want) << "x bits 0x" << std::hex << u;
  }
}
#endif

TEST(DeviceHeader, FloorDivisionAndAtomics) {
  for (int a = -20; a <= 20; ++a) {
    for (int b : {-7, -3, -1, 1, 2, 5}) {
      int q = int(std::floor(double(a) / b));
      EXPECT_EQ(floordiv(a, b), q) << a << " " << b;
      EXPECT_EQ(floormod(a, b), a - q * b) << a << " " << b;
      EXPECT_EQ(floordiv(int8_t(a), int8_t(b)), int8_t(q));
      EXPECT_EQ(floormod(int64_t(a), int64_t(b)), int64_t(a - q * b));
    }
  }
  EXPECT_FLOAT_EQ(floormod(-7.5f, 2.0f), 0.5f);
  EXPECT_FLOAT_EQ(floormod(7.5f, -2.0f), -0.5f);
  EXPECT_FLOAT_EQ(floordiv(-7.5f, 2.0f), -4.0f);
  half_t h = 0.0f;
  bfloat16_t b = 0.0f;
  double d = 0;
  int64_t i = 0;
  for (int k = 0; k < 10; ++k) {
    atomic_add(&h, half_t(1.5f));
    atomic_add(&b, bfloat16_t(2.0f));
    atomic_add(&d, 0.25);
    atomic_add(&i, int64_t(3));
  }
  EXPECT_EQ(float(h), 15.0f);
  EXPECT_EQ(float(b), 20.0f);
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(i, 30);
  float m = 1.0f;
  atomic_max(&m, 3.0f);
  atomic_max(&m, 2.0f);
  atomic_min(&m, -1.0f);
  EXPECT_EQ(m, -1.0f);
}

// ================================================================ IR building helpers

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
Stmt kernel(std::vector<Var> blocks, std::vector<Expr> grid, Stmt body, std::vector<Var> threads = {}) {
  if (threads.empty()) threads = {make_var("tx")};
  return std::make_shared<KernelNode>(std::move(blocks), std::move(grid), std::move(threads),
                                      std::vector<int64_t>{128}, std::move(body));
}
Expr intrinsic(DataType t, const std::string& op, std::vector<Expr> args) {
  return std::make_shared<CallNode>(t, op, std::move(args));
}
Param buf_param(const Buffer& b) { return Param{b->data, b}; }
Param scalar_param(const Var& v) { return Param{v, nullptr}; }

PrimFunc make_func(const std::string& name, std::vector<Param> params, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = name;
  f->params = std::move(params);
  f->body = std::move(body);
  return f;
}

const DataType kF32 = DataType::Float(32), kF16 = DataType::Float(16), kI32 = DataType::Int(32);

// One scratch directory per test process, removed at exit.
const std::filesystem::path& kernel_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("tl_codegen_cpu_test_" + std::to_string(getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

// Generates, compiles and loads f; the returned module stays loaded for the test.
class CompiledKernel {
 public:
  explicit CompiledKernel(const PrimFunc& f) : name_(f->name + "_entry") {
    source_ = codegen_cpu(f);
    const std::filesystem::path& dir = kernel_dir();
    std::string path = (dir / (f->name + ".so")).string();
    try {
      compile_shared_object(source_, path, include_dir(), {});
    } catch (const CompileError& e) {
      ADD_FAILURE() << e.what() << "\n--- source ---\n" << source_;
      throw;
    }
    module_ = std::make_unique<HostModule>(path);
  }
  int32_t operator()(std::vector<void*> args) const { return module_->call(name_, args.data()); }
  const std::string& source() const { return source_; }

 private:
  std::string name_, source_;
  std::unique_ptr<HostModule> module_;
};

// The line of source just above the first line containing needle, without indentation.
std::string line_before(const std::string& source, const std::string& needle) {
  size_t at = source.find(needle);
  if (at == std::string::npos) return "<not found>";
  size_t line_start = source.rfind('\n', at);
  if (line_start == std::string::npos || line_start == 0) return "";
  size_t prev_start = source.rfind('\n', line_start - 1);
  std::string prev = source.substr(prev_start == std::string::npos ? 0 : prev_start + 1,
                                   line_start - (prev_start == std::string::npos ? 0 : prev_start + 1));
  return prev.substr(std::min(prev.find_first_not_of(' '), prev.size()));
}

// ================================================================ kernels

// C[i] = A[i] + B[i] over blocks of 256 with a guard for the tail; n is a shape variable.
TEST(CodegenCPU, VectorAddWithTail) {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {n}, scope::kGlobal);
  Buffer C = make_buffer("C", kF32, {n}, scope::kGlobal);
  Var bx = make_var("bx"), i = make_var("i");
  Expr idx = add(mul(bx, make_int(256)), i);
  Stmt body = loop(i, make_int(256), ForKind::Parallel,
                   when(lt(idx, n), st(C, add(ld(A, {idx}), ld(B, {idx})), {idx})));
  Expr grid = floordiv(add(n, make_int(255)), make_int(256));
  PrimFunc f =
      make_func("vector_add", {buf_param(A), buf_param(B), buf_param(C)}, kernel({bx}, {grid}, body));
  CompiledKernel k(f);
  EXPECT_NE(k.source().find("#pragma omp simd"), std::string::npos) << k.source();
  EXPECT_NE(k.source().find("#pragma omp for"), std::string::npos);
  for (int64_t size : {int64_t(1000), int64_t(513), int64_t(256), int64_t(1)}) {
    std::vector<float> a(size_t(size) + 8), b(a.size()), c(a.size(), -7.0f);
    for (size_t j = 0; j < a.size(); ++j) a[j] = float(j) * 0.5f, b[j] = 3.0f - float(j);
    int64_t nv = size;
    ASSERT_EQ(k({a.data(), b.data(), c.data(), &nv}), 0);
    for (int64_t j = 0; j < size; ++j) ASSERT_EQ(c[size_t(j)], a[size_t(j)] + b[size_t(j)]) << j;
    for (size_t j = size_t(size); j < c.size(); ++j) ASSERT_EQ(c[j], -7.0f) << "tail written at " << j;
  }
}

// Row sums: each block copies its row into a shared tile (doubled), then reduces it
// serially into a local.var that starts from its init value.
TEST(CodegenCPU, ReductionIntoLocalVar) {
  const int64_t M = 37, K = 100;
  Buffer A = make_buffer("A", kF32, {make_int(M), make_int(K)}, scope::kGlobal);
  Buffer Out = make_buffer("Out", kF32, {make_int(M)}, scope::kGlobal);
  Buffer tile = make_buffer("A_shared", kF32, {make_int(K)}, scope::kShared);
  Buffer acc = make_buffer("acc", kF32, {make_int(1)}, scope::kLocalVar);
  Var bx = make_var("bx"), k = make_var("k"), j = make_var("k");  // same name twice on purpose
  Stmt fill = loop(k, make_int(K), ForKind::Parallel, st(tile, mul(ld(A, {bx, k}), make_float(2.0)), {k}));
  Stmt reduce = loop(j, make_int(K), ForKind::Serial,
                     st(acc, add(ld(acc, {make_int(0)}), ld(tile, {j})), {make_int(0)}));
  Stmt body = alloc(tile, alloc(acc, make_seq({fill, reduce, st(Out, ld(acc, {make_int(0)}), {bx})}),
                                {{"init", make_float(1.5)}}));
  PrimFunc f = make_func("row_sum", {buf_param(A), buf_param(Out)}, kernel({bx}, {make_int(M)}, body));
  CompiledKernel kern(f);
  std::vector<float> a(M * K), out(M, 0);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < K; ++c) a[size_t(r * K + c)] = float((r * 7 + c * 3) % 11) - 5.0f;
  ASSERT_EQ(kern({a.data(), out.data()}), 0);
  for (int64_t r = 0; r < M; ++r) {
    float want = 1.5f;
    for (int64_t c = 0; c < K; ++c) want += 2.0f * a[size_t(r * K + c)];
    ASSERT_EQ(out[size_t(r)], want) << "row " << r;
  }
  // The reduction into the scalar must not be marked as a simd loop; the copy is.
  EXPECT_EQ(line_before(kern.source(), "for (int32_t k = 0"), "#pragma omp simd") << kern.source();
  EXPECT_NE(line_before(kern.source(), "for (int32_t k_1 = 0"), "#pragma omp simd") << kern.source();
}

// float16 in, float32 and float16 out: Y = X * 2 + 1 in fp32, Z = X * X rounded to fp16,
// W = sigmoid(X) computed in float and rounded to fp16.
TEST(CodegenCPU, Float16InFloat32Out) {
  Var n = make_var("n");
  Buffer X = make_buffer("X", kF16, {n}, scope::kGlobal);
  Buffer Y = make_buffer("Y", kF32, {n}, scope::kGlobal);
  Buffer Z = make_buffer("Z", kF16, {n}, scope::kGlobal);
  Buffer W = make_buffer("W", kF16, {n}, scope::kGlobal);
  Var bx = make_var("bx"), i = make_var("i");
  Expr idx = add(mul(bx, make_int(64)), i);
  Expr x = ld(X, {idx});
  Stmt body =
      loop(i, make_int(64), ForKind::Parallel,
           when(lt(idx, n), make_seq({st(Y, add(mul(cast(kF32, x), make_float(2.0)), make_float(1.0)), {idx}),
                                      st(Z, mul(x, x), {idx}), st(W, call("sigmoid", {x}), {idx})})));
  Expr grid = floordiv(add(n, make_int(63)), make_int(64));
  PrimFunc f = make_func("half_io", {buf_param(X), buf_param(Y), buf_param(Z), buf_param(W)},
                         kernel({bx}, {grid}, body));
  ASSERT_EQ(as<BinaryNode>(mul(x, x))->dtype, kF16);
  CompiledKernel k(f);
  const int64_t size = 300;
  std::vector<uint16_t> xs(size), zs(size), ws(size);
  std::vector<float> ys(size);
  std::mt19937 rng(3);
  for (auto& v : xs) {
    do v = uint16_t(rng());
    while ((v & 0x7c00) == 0x7c00);  // finite inputs
  }
  int64_t nv = size;
  ASSERT_EQ(k({xs.data(), ys.data(), zs.data(), ws.data(), &nv}), 0);
  for (int64_t j = 0; j < size; ++j) {
    double xv = kHalf.value(xs[size_t(j)]);
    ASSERT_EQ(ys[size_t(j)], float(float(xv) * 2.0f + 1.0f)) << j;
    ASSERT_EQ(zs[size_t(j)], kHalf.nearest(xv * xv)) << "x=" << xv;  // the product is exact in double
    double sig = 1.0 / (1.0 + std::exp(-xv));
    ASSERT_NEAR(kHalf.value(ws[size_t(j)]), sig, 1e-3) << "x=" << xv;
  }
}

// Python semantics of // and % on negative integers (and floats), next to C's / and %.
TEST(CodegenCPU, FloorDivModOfNegatives) {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kI32, {n}, scope::kGlobal);
  Buffer D = make_buffer("D", kI32, {n}, scope::kGlobal);
  Buffer Q = make_buffer("Q", kI32, {n}, scope::kGlobal);
  Buffer R = make_buffer("R", kI32, {n}, scope::kGlobal);
  Buffer T = make_buffer("T", kI32, {n}, scope::kGlobal);
  Buffer Q64 = make_buffer("Q64", DataType::Int(64), {n}, scope::kGlobal);
  Buffer F = make_buffer("F", kF32, {n}, scope::kGlobal);
  Var bx = make_var("bx"), i = make_var("i");
  Expr idx = add(mul(bx, make_int(8)), i);
  Expr a = ld(A, {idx}), d = ld(D, {idx});
  Expr a64 = cast(DataType::Int(64), a);
  Stmt body = loop(
      i, make_int(8), ForKind::Serial,
      when(lt(idx, n),
           make_seq({st(Q, floordiv(a, d), {idx}), st(R, floormod(a, d), {idx}),
                     st(T, add(mul(binary(BinaryOp::Div, a, d), make_int(1000)), binary(BinaryOp::Mod, a, d)),
                        {idx}),
                     st(Q64,
                        add(floordiv(a64, make_int(-3, DataType::Int(64))),
                            floormod(a64, make_int(5, DataType::Int(64)))),
                        {idx}),
                     st(F, floormod(cast(kF32, a), make_float(-2.5)), {idx})})));
  Expr grid = floordiv(add(n, make_int(7)), make_int(8));
  PrimFunc f = make_func(
      "floor_ops",
      {buf_param(A), buf_param(D), buf_param(Q), buf_param(R), buf_param(T), buf_param(Q64), buf_param(F)},
      kernel({bx}, {grid}, body));
  CompiledKernel k(f);
  std::vector<int32_t> as, ds;
  for (int x = -13; x <= 13; ++x)
    for (int y : {-7, -4, -1, 1, 3, 6}) as.push_back(x), ds.push_back(y);
  size_t size = as.size();
  std::vector<int32_t> q(size), r(size), t(size);
  std::vector<int64_t> q64(size);
  std::vector<float> fm(size);
  int64_t nv = int64_t(size);
  ASSERT_EQ(k({as.data(), ds.data(), q.data(), r.data(), t.data(), q64.data(), fm.data(), &nv}), 0);
  for (size_t j = 0; j < size; ++j) {
    int64_t x = as[j], y = ds[j];
    int64_t fq = int64_t(std::floor(double(x) / double(y)));
    EXPECT_EQ(q[j], fq) << x << " // " << y;
    EXPECT_EQ(r[j], x - fq * y) << x << " % " << y;
    EXPECT_EQ(t[j],
              int32_t(std::trunc(double(x) / double(y))) * 1000 + int32_t(std::fmod(double(x), double(y))));
    EXPECT_EQ(q64[j], int64_t(std::floor(double(x) / -3.0)) + (x - int64_t(std::floor(double(x) / 5.0)) * 5));
    double fr = double(x) - std::floor(double(x) / -2.5) * -2.5;
    EXPECT_NEAR(fm[j], fr, 1e-6) << x;
  }
}

// Many blocks add into one element; also an integer counter and an atomic max.
TEST(CodegenCPU, AtomicAddFromManyBlocks) {
  const int64_t blocks = 64, per_block = 100;
  Buffer A = make_buffer("A", kF32, {make_int(blocks * per_block)}, scope::kGlobal);
  Buffer Sum = make_buffer("Sum", kF32, {make_int(1)}, scope::kGlobal);
  Buffer Count = make_buffer("Count", kI32, {make_int(2)}, scope::kGlobal);
  Var bx = make_var("bx"), i = make_var("i");
  Expr idx = add(mul(bx, make_int(per_block)), i);
  Stmt body =
      loop(i, make_int(per_block), ForKind::Parallel,
           make_seq({eval(intrinsic(DataType::Void(), "atomic_add", {ld(Sum, {make_int(0)}), ld(A, {idx})})),
                     eval(intrinsic(DataType::Void(), "atomic_add", {ld(Count, {make_int(0)}), make_int(1)})),
                     eval(intrinsic(DataType::Void(), "atomic_max", {ld(Count, {make_int(1)}), idx}))}));
  PrimFunc f = make_func("atomics", {buf_param(A), buf_param(Sum), buf_param(Count)},
                         kernel({bx}, {make_int(blocks)}, body));
  CompiledKernel k(f);
  std::vector<float> a(size_t(blocks * per_block));
  double want = 0;
  for (size_t j = 0; j < a.size(); ++j) a[j] = float(int(j % 17) - 8), want += a[j];
  for (int rep = 0; rep < 5; ++rep) {
    float sum = 0;
    int32_t count[2] = {0, -1};
    ASSERT_EQ(k({a.data(), &sum, count}), 0);
    EXPECT_EQ(double(sum), want);  // integers: exact in any order
    EXPECT_EQ(count[0], blocks * per_block);
    EXPECT_EQ(count[1], blocks * per_block - 1);
  }
}

// 2-D grid and 2-D buffers with symbolic extents: B[j, i] = A[i, j] * s + offset, with a
// scalar parameter, a host-level let, an unrolled loop, a select and integer math.
TEST(CodegenCPU, TransposeTwoDimensionalGrid) {
  Var M = make_var("M"), N = make_var("N"), scale = make_var("scale", kF32);
  Buffer A = make_buffer("A", kF32, {M, N}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {N, M}, scope::kGlobal);
  Var bx = make_var("bx"), by = make_var("by"), i = make_var("i"), j = make_var("j");
  Var half_m = make_var("half_m");
  Expr r = add(mul(by, make_int(4)), i), c = add(mul(bx, make_int(4)), j);
  Expr v = ld(A, {r, c});
  Expr value = add(mul(v, scale), select(lt(r, half_m), make_float(100.0), make_float(-100.0)));
  Stmt inner = loop(j, make_int(4), ForKind::Unrolled, when(land(lt(r, M), lt(c, N)), st(B, value, {c, r})));
  Stmt body = loop(i, make_int(4), ForKind::Serial, inner);
  Stmt k =
      kernel({bx, by},
             {floordiv(add(N, make_int(3)), make_int(4)), floordiv(add(M, make_int(3)), make_int(4))}, body);
  Stmt host = std::make_shared<LetStmtNode>(half_m, floordiv(M, make_int(2)), k);
  PrimFunc f = make_func("transpose", {buf_param(A), buf_param(B), scalar_param(scale)}, host);
  CompiledKernel kern(f);
  EXPECT_NE(kern.source().find("collapse(2)"), std::string::npos);
  EXPECT_NE(kern.source().find("#pragma GCC unroll 4"), std::string::npos);
  const int64_t m = 10, nn = 7;
  std::vector<float> a(m * nn), b(m * nn, 0);
  for (size_t q = 0; q < a.size(); ++q) a[q] = float(q);
  float s = 0.5f;
  int64_t shapes[2] = {m, nn};  // shape_vars order: M, N
  ASSERT_EQ(kern({a.data(), b.data(), &s, &shapes[0], &shapes[1]}), 0);
  for (int64_t rr = 0; rr < m; ++rr)
    for (int64_t cc = 0; cc < nn; ++cc)
      ASSERT_EQ(b[size_t(cc * m + rr)], a[size_t(rr * nn + cc)] * 0.5f + (rr < m / 2 ? 100.0f : -100.0f));
}

// Math intrinsics against the C library in double precision.
TEST(CodegenCPU, MathIntrinsics) {
  const int64_t size = 64;
  Buffer X = make_buffer("X", kF32, {make_int(size)}, scope::kGlobal);
  Buffer Y = make_buffer("Y", kF32, {make_int(size), make_int(6)}, scope::kGlobal);
  Var bx = make_var("bx"), i = make_var("i");
  Expr x = ld(X, {i});
  std::vector<Expr> outs = {call("exp2", {x}),    call("rsqrt", {call("abs", {x})}),
                            call("sigmoid", {x}), call("pow", {call("abs", {x}), make_float(1.5)}),
                            call("round", {x}),   cast(kF32, call("isnan", {call("log", {x})}))};
  std::vector<Stmt> stores;
  for (size_t q = 0; q < outs.size(); ++q) stores.push_back(st(Y, outs[q], {i, make_int(int64_t(q))}));
  Stmt body = loop(i, make_int(size), ForKind::Vectorized, make_seq(stores));
  PrimFunc f = make_func("math", {buf_param(X), buf_param(Y)}, kernel({bx}, {make_int(1)}, body));
  CompiledKernel k(f);
  std::vector<float> xs(size), ys(size * 6);
  for (int64_t q = 0; q < size; ++q) xs[size_t(q)] = float(q - 32) * 0.25f + 0.125f;
  xs[3] = 2.5f;  // round half to even
  ASSERT_EQ(k({xs.data(), ys.data()}), 0);
  for (int64_t q = 0; q < size; ++q) {
    double xv = xs[size_t(q)];
    const float* y = &ys[size_t(q * 6)];
    EXPECT_NEAR(y[0], std::exp2(xv), 1e-5 * std::exp2(xv));
    EXPECT_NEAR(y[1], 1 / std::sqrt(std::fabs(xv)), 1e-5 / std::sqrt(std::fabs(xv)));
    EXPECT_NEAR(y[2], 1 / (1 + std::exp(-xv)), 1e-6);
    EXPECT_NEAR(y[3], std::pow(std::fabs(xv), 1.5), 1e-4 * (1 + std::pow(std::fabs(xv), 1.5)));
    EXPECT_EQ(y[4], float(std::nearbyint(xv)));
    EXPECT_EQ(y[5], xv < 0 ? 1.0f : 0.0f);
  }
}

// Two kernels in sequence: the second reads what the first wrote; a block-private
// buffer whose size depends on a shape variable (allocated once per thread).
TEST(CodegenCPU, TwoKernelsAndSymbolicTile) {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {n}, scope::kGlobal);
  Buffer C = make_buffer("C", kF32, {make_int(4)}, scope::kGlobal);
  Buffer tile = make_buffer("tile", kF32, {n}, scope::kFragment);
  Var b1 = make_var("bx"), i = make_var("i"), b2 = make_var("bx"), j = make_var("j");
  Stmt k1 = kernel({b1}, {n}, st(B, mul(ld(A, {b1}), ld(A, {b1})), {b1}));
  // Each of 4 blocks copies B into its tile and writes the tile's sum, scaled by (block + 1).
  Buffer acc = make_buffer("acc", kF32, {make_int(1)}, scope::kLocalVar);
  Stmt copy = loop(j, n, ForKind::Parallel, st(tile, ld(B, {j}), {j}));
  Stmt sum = loop(i, n, ForKind::Serial, st(acc, add(ld(acc, {make_int(0)}), ld(tile, {i})), {make_int(0)}));
  Stmt k2 = kernel(
      {b2}, {make_int(4)},
      alloc(tile, alloc(acc, make_seq({copy, sum,
                                       st(C, mul(ld(acc, {make_int(0)}), cast(kF32, add(b2, make_int(1)))),
                                          {b2})}))));
  PrimFunc f = make_func("two_kernels", {buf_param(A), buf_param(B), buf_param(C)}, make_seq({k1, k2}));
  CompiledKernel k(f);
  EXPECT_NE(k.source().find("tl::AlignedArray<float>"), std::string::npos) << k.source();
  std::vector<float> a = {1, 2, 3, 4, 5}, b(5), c(4);
  int64_t nv = 5;
  ASSERT_EQ(k({a.data(), b.data(), c.data(), &nv}), 0);
  for (int q = 0; q < 4; ++q) EXPECT_EQ(c[size_t(q)], 55.0f * float(q + 1));
}

// The narrow types: int8/uint8 wrap-around, bool stores, bfloat16 and float8 casts, a
// float16 local.var accumulating with fp16 rounding at each step, and float16 atomics.
TEST(CodegenCPU, NarrowTypes) {
  const DataType i8 = DataType::Int(8), u8 = DataType::UInt(8), bf16 = DataType::BFloat16();
  const DataType e4m3(TypeCode::Float8E4M3, 8);
  Var n = make_var("n");
  auto g = [&](const char* name, DataType t) { return make_buffer(name, t, {n}, scope::kGlobal); };
  Buffer X = g("X", kF16), I = g("I", i8), U = g("U", u8), Bf = g("Bf", bf16), Io = g("Io", i8),
         Uo = g("Uo", u8), Flag = g("Flag", DataType::Bool()), E4 = g("E4", e4m3);
  Buffer HSum = make_buffer("HSum", kF16, {make_int(8)}, scope::kGlobal);
  Buffer HTotal = make_buffer("HTotal", kF16, {make_int(1)}, scope::kGlobal);
  Buffer acc = make_buffer("acc", kF16, {make_int(1)}, scope::kLocalVar);
  Var bx = make_var("bx"), i = make_var("i");
  Expr idx = add(mul(bx, make_int(40)), i);
  Expr x = ld(X, {idx});
  Stmt per_element = make_seq({
      st(Bf, cast(bf16, mul(x, make_int(3))), {idx}),
      st(Io, add(ld(I, {idx}), ld(I, {idx})), {idx}),
      st(Uo, mul(ld(U, {idx}), make_int(3)), {idx}),
      st(Flag, binary(BinaryOp::GT, x, make_float(0.5)), {idx}),
      st(E4, cast(e4m3, x), {idx}),
      st(acc, add(ld(acc, {make_int(0)}), x), {make_int(0)}),
      eval(intrinsic(DataType::Void(), "atomic_add", {ld(HTotal, {make_int(0)}), make_float(1.0, kF16)})),
  });
  Stmt body = alloc(acc, make_seq({loop(i, make_int(40), ForKind::Serial, when(lt(idx, n), per_element)),
                                   st(HSum, ld(acc, {make_int(0)}), {bx})}));
  PrimFunc f = make_func("narrow",
                         {buf_param(X), buf_param(I), buf_param(U), buf_param(Bf), buf_param(Io),
                          buf_param(Uo), buf_param(Flag), buf_param(E4), buf_param(HSum), buf_param(HTotal)},
                         kernel({bx}, {make_int(8)}, body));
  CompiledKernel k(f);
  const size_t size = 300;  // 8 blocks of 40 with a partial last block
  std::mt19937 rng(11);
  std::vector<uint16_t> xs(size), bf(size), hsum(8), htotal(1, 0);
  std::vector<int8_t> is(size), io(size);
  std::vector<uint8_t> us(size), uo(size), e4(size);
  std::vector<char> flag(size);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (size_t j = 0; j < size; ++j) {
    xs[j] = uint16_t(kHalf.nearest(dist(rng)));
    is[j] = int8_t(rng()), us[j] = uint8_t(rng());
  }
  int64_t nv = int64_t(size);
  ASSERT_EQ(k({xs.data(), is.data(), us.data(), bf.data(), io.data(), uo.data(), flag.data(), e4.data(),
               hsum.data(), htotal.data(), &nv}),
            0);
  for (size_t j = 0; j < size; ++j) {
    double xv = kHalf.value(xs[j]);
    double x3 = kHalf.value(kHalf.nearest(xv * 3));  // float16 product, then to bfloat16
    ASSERT_EQ(bf[j], kBf16.nearest(x3)) << j;
    ASSERT_EQ(io[j], int8_t(is[j] + is[j])) << j;
    ASSERT_EQ(uo[j], uint8_t(us[j] * 3)) << j;
    ASSERT_EQ(flag[j] != 0, xv > 0.5) << j;
    ASSERT_EQ(e4[j], kE4M3.nearest(xv)) << j;
  }
  for (size_t b = 0; b < 8; ++b) {
    uint32_t sum = 0;  // float16 zero
    for (size_t j = b * 40; j < std::min(size, b * 40 + 40); ++j)
      sum = kHalf.nearest(kHalf.value(sum) + kHalf.value(xs[j]));
    ASSERT_EQ(hsum[b], sum) << "block " << b;
  }
  EXPECT_EQ(kHalf.value(htotal[0]), double(size));
}

TEST(CodegenCPU, PrintScalars) {
  Buffer A = make_buffer("A", kF16, {make_int(2)}, scope::kGlobal);
  Var bx = make_var("bx");
  Expr msg = std::make_shared<StringImmNode>("value \"x\"? ");
  Expr space = std::make_shared<StringImmNode>(" ");
  Stmt body =
      eval(intrinsic(DataType::Void(), "print", {msg, bx, space, ld(A, {bx}), space, lt(bx, make_int(1))}));
  PrimFunc f = make_func("printer", {buf_param(A)}, kernel({bx}, {make_int(1)}, body));
  CompiledKernel k(f);
  std::vector<uint16_t> a = {uint16_t(half_t(2.5f).bits), 0};
  testing::internal::CaptureStdout();
  int32_t rc = k({a.data()});
  std::string printed = testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(printed, "value \"x\"? 0 2.5 True\n");
}

// ================================================================ rejections

Span span_at(int line) { return Span{Span::intern("kernel.py"), line, 5}; }

TEST(VerifyCPU, RejectsThreadIndexUse) {
  Buffer A = make_buffer("A", kF32, {make_int(128)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx");
  Stmt use = std::make_shared<BufferStoreNode>(A, make_float(1.0), std::vector<Expr>{tx}, span_at(12));
  PrimFunc f = make_func("uses_tx", {buf_param(A)}, kernel({bx}, {make_int(1)}, use, {tx}));
  try {
    verify_cpu(f);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_EQ(e.span().line, 12);
    EXPECT_NE(std::string(e.what()).find("thread index (T.get_thread_binding) used on target cpu"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("T.Parallel"), std::string::npos);
  }
  // The code generator refuses it too.
  try {
    codegen_cpu(f);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }
}

TEST(VerifyCPU, RejectsThreadIndexCallSubByteAndWideGrids) {
  Buffer A = make_buffer("A", kI32, {make_int(128)}, scope::kGlobal);
  Var bx = make_var("bx");
  Expr tid = std::make_shared<CallNode>(kI32, "thread_index", std::vector<Expr>{make_int(0)}, span_at(20));
  PrimFunc f1 = make_func("call_tid", {buf_param(A)}, kernel({bx}, {make_int(1)}, st(A, tid, {make_int(0)})));
  EXPECT_THROW(
      {
        try {
          verify_cpu(f1);
        } catch (const CompileError& e) {
          EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
          EXPECT_EQ(e.span().line, 20);
          throw;
        }
      },
      CompileError);

  Buffer P = make_buffer("P", DataType::Int(4), {make_int(64)}, scope::kGlobal, span_at(3));
  PrimFunc f2 = make_func("int4", {buf_param(P)}, kernel({bx}, {make_int(1)}, eval(make_int(0))));
  try {
    verify_cpu(f2);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_EQ(e.span().line, 3);
  }
  try {
    codegen_cpu(f2);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }

  std::vector<Var> bvars = {make_var("b0"), make_var("b1"), make_var("b2"), make_var("b3")};
  PrimFunc f3 =
      make_func("grid4", {buf_param(A)},
                kernel(bvars, {make_int(2), make_int(2), make_int(2), make_int(2)}, eval(make_int(0))));
  try {
    verify_cpu(f3);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }

  // A kernel that declares threads but does not use them passes unchanged.
  PrimFunc ok = make_func("fine", {buf_param(A)}, kernel({bx}, {make_int(1)}, st(A, bx, {bx})));
  EXPECT_EQ(verify_cpu(ok).get(), ok.get());
}

TEST(HostCompiler, BadSourceReportsCompilerOutput) {
  std::string out =
      (std::filesystem::temp_directory_path() / ("tl_codegen_cpu_bad_" + std::to_string(getpid()) + ".so"))
          .string();
  try {
    compile_shared_object("int main( { this is not C++ }\n", out, include_dir(), {"-DTL_MARKER_FLAG=1"});
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(msg.find("-fopenmp"), std::string::npos) << msg;  // the command line
    EXPECT_NE(msg.find("-DTL_MARKER_FLAG=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;  // the compiler's output
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(out.substr(0, out.size() - 3) + ".cpp");
  EXPECT_FALSE(host_compiler_id().empty());
  EXPECT_EQ(host_compiler_id(), host_compiler_id());
}

TEST(HostModule, MissingFileAndSymbol) {
  EXPECT_THROW(HostModule("/nonexistent/dir/kernel.so"), CompileError);
  Buffer A = make_buffer("A", kF32, {make_int(4)}, scope::kGlobal);
  Var bx = make_var("bx");
  PrimFunc f = make_func("tiny", {buf_param(A)}, kernel({bx}, {make_int(4)}, st(A, cast(kF32, bx), {bx})));
  CompiledKernel k(f);
  std::vector<float> a(4);
  ASSERT_EQ(k({a.data()}), 0);
  EXPECT_EQ(a[3], 3.0f);
  std::string path = (kernel_dir() / "tiny.so").string();
  HostModule m(path);
  try {
    m.symbol("no_such_symbol");
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("no_such_symbol"), std::string::npos);
  }
}

}  // namespace
}  // namespace tl
