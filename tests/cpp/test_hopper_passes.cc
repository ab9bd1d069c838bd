// Hopper passes on small IR inputs: fence_async_proxy (which barriers and mbarrier arrivals
// take a proxy fence) and stage_epilogue (an accumulator's store to global memory through
// a shared tile, in the pipeline's free bytes or bytes of its own, or a reported slower path).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/functor.h"
#include "ir/op.h"
#include "target/target.h"
#include "transform/fence_async_proxy.h"
#include "transform/stage_epilogue.h"

namespace tl {
namespace {

const DataType kF32 = DataType::Float(32);
const DataType kF16 = DataType::Float(16);

Stmt call(const std::string& op, std::vector<Expr> args = {}) {
  return std::make_shared<EvaluateNode>(std::make_shared<CallNode>(DataType::Void(), op, std::move(args)));
}
Expr ld(const Buffer& b, std::vector<Expr> idx) { return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx)); }
Stmt st(const Buffer& b, Expr value, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, std::move(value), std::move(idx));
}
Stmt alloc(const Buffer& b, Stmt body, Attrs attrs = {}) {
  return std::make_shared<AllocateNode>(b, std::move(body), std::move(attrs));
}
Stmt kernel(Stmt body, int64_t threads = 256) {
  return std::make_shared<KernelNode>(std::vector<Var>{make_var("bx")}, std::vector<Expr>{make_int(4)},
                                      std::vector<Var>{make_var("tx")}, std::vector<int64_t>{threads}, std::move(body));
}
PrimFunc func(std::vector<Buffer> params, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "main";
  for (auto& b : params) f->params.push_back(Param{b->data, b});
  f->body = std::move(body);
  return f;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The ops of the function's calls, in program order.
std::vector<std::string> calls_in(const PrimFunc& f) {
  std::vector<std::string> out;
  struct V : IRVisitor {
    std::vector<std::string>* out;
    using IRVisitor::visit;
    void visit_call(const CallNode* n) override {
      out->push_back(n->op);
      IRVisitor::visit_call(n);
    }
  } v;
  v.out = &out;
  v.visit(f->body);
  return out;
}

// Which barrier-like calls have a fence right before them: "F" + op or op.
std::string fenced(const PrimFunc& f) {
  std::string out, previous;
  for (auto& op : calls_in(f)) {
    if (op == "sync_threads" || op == "named_barrier_sync" || op == "mbarrier_arrive")
      out += (previous == "fence_proxy_async" ? "F" : "") + op + " ";
    previous = op;
  }
  return out;
}

// A kernel that issues a wgmma (so the pass applies) after `body`.
PrimFunc wgmma_kernel(const Buffer& G, const Buffer& S, Stmt body) {
  Buffer acc = make_buffer("acc", kF32, {make_int(4)}, scope::kLocal);
  Stmt mma = call("wgmma", {ld(acc, {make_int(0)})});
  return func({G}, kernel(alloc(S, alloc(acc, make_seq({body, mma})))));
}

TEST(FenceAsyncProxy, OnlyBarriersAGenericSharedWriteReaches) {
  Buffer G = make_buffer("G", kF16, {make_int(64)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF16, {make_int(64)}, scope::kSharedDyn);
  Var tx = make_var("t");
  // A global store, a barrier (no fence: nothing for the async proxy to see); a shared
  // store, a barrier (fenced); the barrier right after it has nothing new (no fence).
  Stmt body = make_seq({st(G, cast(kF16, make_int(1)), {make_int(0)}), call("sync_threads"),
                        st(S, cast(kF16, make_int(1)), {make_int(0)}), call("sync_threads"),
                        call("named_barrier_sync", {make_int(1), make_int(128)})});
  EXPECT_EQ(fenced(fence_async_proxy(wgmma_kernel(G, S, body))),
            "sync_threads Fsync_threads named_barrier_sync ");
}

TEST(FenceAsyncProxy, LoopsBranchesAndMbarrierArrivals) {
  Buffer G = make_buffer("G", kF16, {make_int(64)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF16, {make_int(64)}, scope::kSharedDyn);
  Buffer bar = make_buffer("bar", DataType::UInt(64), {make_int(1)}, scope::kSharedDyn);
  Var k = make_var("k");
  // In a loop whose body writes shared memory after its barrier, the barrier at the top
  // of the next iteration is reached by that write: fenced. A shared write in one branch
  // reaches the arrival after the branch: fenced.
  Stmt loop = std::make_shared<ForNode>(k, make_int(0), make_int(4), ForKind::Serial,
                                        make_seq({call("sync_threads"), st(S, cast(kF16, make_int(1)), {k})}));
  Stmt branch = std::make_shared<IfThenElseNode>(binary(BinaryOp::LT, k, make_int(2)),
                                                 st(S, cast(kF16, make_int(2)), {make_int(0)}), nullptr);
  Stmt body = make_seq({loop, call("sync_threads"), branch, call("mbarrier_arrive", {ld(bar, {make_int(0)})})});
  PrimFunc f = wgmma_kernel(G, S, alloc(bar, body));
  EXPECT_EQ(fenced(fence_async_proxy(f)), "Fsync_threads Fsync_threads Fmbarrier_arrive ");
}

TEST(FenceAsyncProxy, KernelsWithoutAsyncReadsAreUnchanged) {
  Buffer G = make_buffer("G", kF16, {make_int(64)}, scope::kGlobal);
  Buffer S = make_buffer("S", kF16, {make_int(64)}, scope::kSharedDyn);
  PrimFunc f = func({G}, kernel(alloc(S, make_seq({st(S, cast(kF16, make_int(1)), {make_int(0)}), call("sync_threads")}))));
  EXPECT_EQ(fence_async_proxy(f), f);
}

// A GEMM epilogue at tile level: the pipeline's two staged tiles (attr stages), then
// copy(acc, C[0:rows, 0:cols]), optionally inside a serial loop.
PrimFunc epilogue(int64_t rows, int64_t cols, int64_t stage_bytes_each, bool in_loop, DataType out = kF16) {
  Buffer C = make_buffer("C", out, {make_int(1024), make_int(1024)}, scope::kGlobal);
  Buffer A = make_buffer("A_shared", kF16, {make_int(stage_bytes_each / 2)}, scope::kSharedDyn);
  Buffer B = make_buffer("B_shared", kF16, {make_int(stage_bytes_each / 2)}, scope::kSharedDyn);
  Buffer acc = make_buffer("acc", kF32, {make_int(rows), make_int(cols)}, scope::kFragment);
  BufferRegion dst{C, {Range{make_int(0), make_int(rows)}, Range{make_int(0), make_int(cols)}}, {}};
  Stmt copy = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{full_region(acc), dst},
                                           std::vector<Expr>{}, Attrs{});
  Stmt use_pipeline = st(A, ld(B, {make_int(0)}), {make_int(0)});  // the K loop, as far as liveness goes
  Stmt body = make_seq({use_pipeline, copy});
  if (in_loop)
    body = std::make_shared<ForNode>(make_var("w"), make_int(0), make_int(3), ForKind::Serial, body);
  Attrs staged{{"pipelined", int64_t(1)}, {"stages", int64_t(3)}};
  return func({C}, kernel(alloc(A, alloc(B, alloc(acc, body), staged), staged)));
}

std::string report_of(const PrimFunc& f) {
  auto it = f->attrs.find("lowering_report");
  return it == f->attrs.end() ? "" : std::get<std::string>(it->second);
}

int count_copies(const PrimFunc& f) {
  int n = 0;
  struct V : IRVisitor {
    int* n;
    using IRVisitor::visit;
    void visit_tile_op(const TileOpNode* t) override { *n += t->op == "copy"; }
  } v;
  v.n = &n;
  v.visit(f->body);
  return n;
}

TEST(StageEpilogue, AfterThePipelineTheTileTakesItsFreeBytes) {
  PrimFunc f = stage_epilogue(epilogue(128, 128, 32768, false), Target::parse("cuda -arch=sm_90a"));
  EXPECT_EQ(count_copies(f), 2);  // acc -> acc_staged, acc_staged -> C
  EXPECT_TRUE(contains(report_of(f), "through a shared tile in the pipeline's free bytes (32768 bytes), then by TMA store"))
      << report_of(f);
}

TEST(StageEpilogue, InsideALoopTheTileNeedsBytesOfItsOwn) {
  // 128 x 128 fp16 = 32 KB of its own: the kernel has room.
  PrimFunc roomy = stage_epilogue(epilogue(128, 128, 32768, true), Target::parse("cuda -arch=sm_90a"));
  EXPECT_TRUE(contains(report_of(roomy), "through a shared tile of its own (32768 bytes)")) << report_of(roomy);
  // Two 100 KB pipeline tiles leave too little: stored from registers, said as a slower path.
  PrimFunc full = stage_epilogue(epilogue(128, 128, 102400, true), Target::parse("cuda -arch=sm_90a"));
  EXPECT_EQ(count_copies(full), 1);
  EXPECT_TRUE(contains(report_of(full), "[slower path: not through a shared tile and a TMA store: its 32768 bytes"))
      << report_of(full);
}

TEST(StageEpilogue, OnlyOnSm90aAndWhereATmaStoreCanTakeIt) {
  PrimFunc f = epilogue(128, 128, 32768, false);
  EXPECT_EQ(stage_epilogue(f, Target::parse("cuda -arch=sm_80")), f);
  // 100 columns of fp16 are 200 bytes: not a TMA box row (a multiple of 32 bytes).
  PrimFunc odd = epilogue(128, 100, 32768, false);
  EXPECT_EQ(count_copies(stage_epilogue(odd, Target::parse("cuda -arch=sm_90a"))), 1);
}

}  // namespace
}  // namespace tl
