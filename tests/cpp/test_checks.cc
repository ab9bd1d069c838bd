// The compile-time checks on small IR inputs: check_buffer_bounds (provable overruns of
// block-private buffers) and check_block_budget (what one launch asks for, per target).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "target/target.h"
#include "transform/check_block_budget.h"
#include "transform/check_buffer_bounds.h"

namespace tl {
namespace {

const DataType kF32 = DataType::Float(32);

Expr ld(const Buffer& b, std::vector<Expr> idx) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx));
}
Stmt st(const Buffer& b, Expr value, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, std::move(value), std::move(idx));
}
Stmt loop(const Var& v, Expr extent, ForKind kind, Stmt body) {
  return std::make_shared<ForNode>(v, make_int(0, v->dtype), std::move(extent), kind, std::move(body));
}
Stmt alloc(const Buffer& b, Stmt body) { return std::make_shared<AllocateNode>(b, std::move(body), Attrs{}); }
Stmt kernel(std::vector<Expr> grid, std::vector<int64_t> threads, Stmt body) {
  std::vector<Var> bv;
  for (size_t d = 0; d < grid.size(); ++d) bv.push_back(make_var(std::string("b") + "xyz"[d]));
  return std::make_shared<KernelNode>(bv, std::move(grid), std::vector<Var>{make_var("tx")}, std::move(threads),
                                      std::move(body));
}
PrimFunc func(const Buffer& a, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "main";
  f->params = {Param{a->data, a}};
  f->body = std::move(body);
  return f;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename Fn>
CompileError error_of(Fn&& fn) {
  try {
    fn();
  } catch (const CompileError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a CompileError";
  return CompileError(ErrorKind::Internal, {}, "none");
}

// s[i + shift] = A[i] for i in T.Parallel(extent), s of 32 elements, optionally under if i < 32.
PrimFunc parallel_store(int64_t extent, int64_t shift, bool guarded, const std::string& scope = scope::kSharedDyn) {
  Buffer A = make_buffer("A", kF32, {make_int(64)}, scope::kGlobal);
  Buffer s = make_buffer("s", kF32, {make_int(32)}, scope);
  Var i = make_var("i");
  Stmt store = st(s, ld(A, {i}), {add(i, make_int(shift))});
  if (guarded) store = std::make_shared<IfThenElseNode>(lt(i, make_int(32)), store, nullptr);
  return func(A, kernel({make_int(1)}, {64}, alloc(s, loop(i, make_int(extent), ForKind::Parallel, store))));
}

TEST(CheckBufferBounds, AProvableOverrunIsABoundsError) {
  CompileError e = error_of([] { check_buffer_bounds(parallel_store(64, 0, false)); });
  EXPECT_EQ(e.kind(), ErrorKind::Bounds);
  EXPECT_TRUE(contains(e.what(), "buffer 's' has 32 elements but is written at index i, which runs from 0 to 63"))
      << e.what();
  e = error_of([] { check_buffer_bounds(parallel_store(32, 1, false, scope::kFragment)); });
  EXPECT_TRUE(contains(e.what(), "runs from 1 to 32")) << e.what();
}

TEST(CheckBufferBounds, InRangeGuardedAndWhollyOutsideAccessesAreLeftAlone) {
  EXPECT_NO_THROW(check_buffer_bounds(parallel_store(32, 0, false)));
  EXPECT_NO_THROW(check_buffer_bounds(parallel_store(64, 0, true)));    // the if may guard it
  EXPECT_NO_THROW(check_buffer_bounds(parallel_store(4, 40, false)));   // legalize_safe_memory_access's
  EXPECT_NO_THROW(check_buffer_bounds(parallel_store(0, 100, false)));  // never runs
}

TEST(CheckBufferBounds, GlobalTensorsAreGuardedNotRejected) {
  Buffer A = make_buffer("A", kF32, {make_int(16)}, scope::kGlobal);
  Var i = make_var("i");
  Stmt body = loop(i, make_int(32), ForKind::Parallel, st(A, make_float(1.0), {i}));
  PrimFunc f = func(A, kernel({make_int(1)}, {32}, body));
  EXPECT_NO_THROW(check_buffer_bounds(f));
}

PrimFunc launch(std::vector<Expr> grid, std::vector<int64_t> threads) {
  Buffer A = make_buffer("A", kF32, {make_int(64)}, scope::kGlobal);
  return func(A, kernel(std::move(grid), std::move(threads), st(A, make_float(1.0), {make_int(0)})));
}

TEST(CheckBlockBudget, GridsPerDimensionAndThreadsPerTarget) {
  Target cuda = Target::parse("cuda -arch=sm_90a"), cpu = Target::parse("cpu"), webgpu = Target::parse("webgpu");
  EXPECT_NO_THROW(check_block_budget(launch({make_int(2147483647), make_int(65535)}, {1024}), cuda));
  CompileError e = error_of([&] { check_block_budget(launch({make_int(1), make_int(65536)}, {32}), cuda); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_TRUE(contains(e.what(), "grid extent y is 65536 blocks; sm_90a allows at most 65535")) << e.what();
  EXPECT_NO_THROW(check_block_budget(launch({make_int(1), make_int(65536)}, {32}), cpu));
  e = error_of([&] { check_block_budget(launch({make_int(int64_t(1) << 40)}, {32}), cpu); });
  EXPECT_TRUE(contains(e.what(), "target cpu allows at most 2147483647")) << e.what();
  e = error_of([&] { check_block_budget(launch({make_int(1)}, {512}), webgpu); });
  EXPECT_TRUE(contains(e.what(), "not supported on webgpu: threads x is 512")) << e.what();
  webgpu.max_threads_per_block = webgpu.max_threads_per_dim[0] = 1024;  // an adapter that has them
  EXPECT_NO_THROW(check_block_budget(launch({make_int(1)}, {512}), webgpu));
  e = error_of([&] { check_block_budget(launch({make_int(1)}, {32, 2, 65}), cuda); });
  EXPECT_TRUE(contains(e.what(), "threads z is 65")) << e.what();
  EXPECT_NO_THROW(check_block_budget(launch({make_int(1)}, {4096}), cpu));  // a block is one task there
}

TEST(CheckBlockBudget, WebGPUWorkgroupMemoryListsEachBuffer) {
  Buffer A = make_buffer("A", kF32, {make_int(64)}, scope::kGlobal);
  Buffer s = make_buffer("s", kF32, {make_int(64), make_int(64)}, scope::kSharedDyn);
  Buffer t = make_buffer("t", DataType::Float(16), {make_int(16)}, scope::kSharedDyn);
  Stmt body = alloc(s, alloc(t, st(s, ld(t, {make_int(0)}), {make_int(0), make_int(0)})));
  PrimFunc f = func(A, kernel({make_int(1)}, {64}, body));
  CompileError e = error_of([&] { check_block_budget(f, Target::parse("webgpu")); });
  EXPECT_TRUE(contains(e.what(), "needs 16416 bytes of shared memory per block; "
                                 "the WebGPU adapter allows at most 16384"))
      << e.what();
  EXPECT_TRUE(contains(e.what(), "s: 64 x 64 float32 = 16384 bytes")) << e.what();
  EXPECT_TRUE(contains(e.what(), "t: 16 float16 = 32 bytes")) << e.what();  // array<f16>: 2 bytes each
}

}  // namespace
}  // namespace tl
