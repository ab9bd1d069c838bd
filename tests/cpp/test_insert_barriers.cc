// Barrier insertion on hand-built tile-level kernels. Each result is rendered as a compact
// outline (units, loops, ifs and SYNC for every barrier) and compared exactly, so a barrier
// that is missing, redundant or misplaced fails the test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/function.h"
#include "transform/insert_barriers.h"

namespace tl {
namespace {

const DataType kI32 = DataType::Int(32);
const DataType kF32 = DataType::Float(32);

Expr imm(int64_t v) { return make_int(v, kI32); }
Expr bin(BinaryOp op, Expr a, Expr b) {
  DataType t = is_comparison(op) || is_logical(op) ? DataType::Bool() : a->dtype;
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b));
}
Expr plus(Expr a, Expr b) { return bin(BinaryOp::Add, a, b); }
Expr times(Expr a, Expr b) { return bin(BinaryOp::Mul, a, b); }
Expr less(Expr a, Expr b) { return bin(BinaryOp::LT, a, b); }

Expr load(const Buffer& b, std::vector<Expr> idx) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx));
}
Stmt store(const Buffer& b, Expr value, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, value, std::move(idx));
}
Stmt loop(const Var& v, int64_t extent, Stmt body, ForKind kind = ForKind::Serial) {
  return std::make_shared<ForNode>(v, imm(0), imm(extent), kind, body);
}
Stmt parallel(const Var& v, int64_t extent, Stmt body) { return loop(v, extent, body, ForKind::Parallel); }
Stmt branch(Expr cond, Stmt then_case, Stmt else_case = nullptr) {
  return std::make_shared<IfThenElseNode>(cond, then_case, else_case);
}
Stmt seq(std::vector<Stmt> s) { return make_seq(std::move(s)); }
Stmt barrier() {
  return std::make_shared<EvaluateNode>(
      std::make_shared<CallNode>(DataType::Void(), "sync_threads", std::vector<Expr>{}));
}

BufferRegion whole(const Buffer& b) { return full_region(b); }
// Rows [row, row + rows) of a 2-D buffer, all columns.
BufferRegion rows(const Buffer& b, Expr first, int64_t count) {
  return {b, {{first, imm(count)}, {imm(0), b->shape[1]}}, {}};
}
// Elements [lo, lo + extent) of a 1-D buffer.
BufferRegion slice(const Buffer& b, int64_t lo, int64_t extent) { return {b, {{imm(lo), imm(extent)}}, {}}; }

Stmt tile_op(const std::string& op, std::vector<BufferRegion> regions, std::vector<Expr> args = {}) {
  return std::make_shared<TileOpNode>(op, std::move(regions), std::move(args), Attrs{});
}
Stmt copy(BufferRegion src, BufferRegion dst) { return tile_op("copy", {src, dst}); }
Stmt copy(const Buffer& src, const Buffer& dst) { return copy(whole(src), whole(dst)); }
Stmt fill(const Buffer& dst) { return tile_op("fill", {whole(dst)}, {make_float(0)}); }
Stmt gemm(const Buffer& a, const Buffer& b, const Buffer& c) {
  return tile_op("gemm", {whole(a), whole(b), whole(c)});
}

// Renders the kernel body: units by name, control flow by structure, barriers as SYNC.
std::string outline(const Stmt& s) {
  if (!s) return "";
  if (auto* n = as<SeqStmtNode>(s)) {
    std::string out;
    for (auto& c : n->seq) out += (out.empty() ? "" : " ") + outline(c);
    return out;
  }
  if (auto* n = as<EvaluateNode>(s)) {
    auto* call = as<CallNode>(n->value);
    return call && call->op == "sync_threads" ? "SYNC" : "eval";
  }
  if (auto* n = as<TileOpNode>(s)) {
    std::string out = n->op + "(";
    for (size_t i = 0; i < n->regions.size(); ++i) out += (i ? "," : "") + n->regions[i].buffer->name;
    return out + ")";
  }
  if (auto* n = as<ForNode>(s)) {
    if (n->for_kind == ForKind::Parallel) return "par";
    return "for{" + outline(n->body) + "}";
  }
  if (auto* n = as<IfThenElseNode>(s)) {
    std::string out = "if{" + outline(n->then_case) + "}";
    return n->else_case ? out + "else{" + outline(n->else_case) + "}" : out;
  }
  if (auto* n = as<BufferStoreNode>(s)) return "store(" + n->buffer->name + ")";
  if (auto* n = as<LetStmtNode>(s)) return outline(n->body);
  if (auto* n = as<AllocateNode>(s)) return outline(n->body);
  if (auto* n = as<KernelNode>(s)) return outline(n->body);
  return "?";
}

struct Program {
  Buffer A = make_buffer("A", kF32, {imm(256), imm(256)}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {imm(256), imm(256)}, scope::kGlobal);
  Buffer D = make_buffer("D", kF32, {imm(64), imm(64)}, scope::kGlobal);
  Buffer G = make_buffer("G", kF32, {imm(128)}, scope::kGlobal);
  Buffer As = make_buffer("As", kF32, {imm(64), imm(32)}, scope::kShared);
  Buffer Bs = make_buffer("Bs", kF32, {imm(32), imm(64)}, scope::kSharedDyn);
  Buffer S = make_buffer("S", kF32, {imm(128)}, scope::kShared);
  Buffer C = make_buffer("C", kF32, {imm(64), imm(64)}, scope::kFragment);
  Buffer F = make_buffer("F", kF32, {imm(128)}, scope::kFragment);
  Buffer R = make_buffer("R", kF32, {imm(1)}, scope::kFragment);
  Var bx = make_var("bx"), tx = make_var("tx"), i = make_var("i"), k = make_var("k"), ko = make_var("ko");

  PrimFunc kernel(Stmt body) const {
    auto f = std::make_shared<PrimFuncNode>();
    f->name = "kernel";
    f->params = {{A->data, A}, {B->data, B}, {D->data, D}, {G->data, G}};
    f->body = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{imm(4)},
                                           std::vector<Var>{tx}, std::vector<int64_t>{128}, body);
    return f;
  }
  std::string run(Stmt body) const { return outline(insert_barriers(kernel(body))->body); }

  // F[i] = S[i + offset] for i < extent: a parallel loop reading S.
  Stmt read_S(int64_t offset = 0, int64_t extent = 64) const {
    return parallel(i, extent, store(F, load(S, {plus(i, imm(offset))}), {i}));
  }
  // S[i + offset] = F[i] for i < extent: a parallel loop writing S.
  Stmt write_S(int64_t offset = 0, int64_t extent = 64) const {
    return parallel(i, extent, store(S, load(F, {i}), {plus(i, imm(offset))}));
  }
  Stmt k_tile_copies() const {
    return seq({copy(rows(A, times(k, imm(64)), 64), whole(As)),
                copy(rows(B, times(k, imm(32)), 32), whole(Bs))});
  }
};

size_t count_barriers(const Stmt& s) {
  std::string text = outline(s);
  size_t n = 0;
  for (size_t at = text.find("SYNC"); at != std::string::npos; at = text.find("SYNC", at + 1)) ++n;
  return n;
}

// (1) A tile copied into shared memory, then read by a parallel loop: RAW.
TEST(InsertBarriers, CopyThenParallelRead) {
  Program p;
  EXPECT_EQ(p.run(seq({copy(p.G, p.S), p.read_S()})), "copy(G,S) SYNC par");
}

// WAR: the loop reads S before the copy overwrites it.
TEST(InsertBarriers, ReadThenOverwrite) {
  Program p;
  EXPECT_EQ(p.run(seq({p.read_S(), copy(p.G, p.S)})), "par SYNC copy(G,S)");
}

// (2) Two copies into different shared buffers need one barrier, before the gemm.
TEST(InsertBarriers, TwoCopiesOneBarrier) {
  Program p;
  Stmt body = seq({copy(rows(p.A, imm(0), 64), whole(p.As)), copy(rows(p.B, imm(0), 32), whole(p.Bs)),
                   gemm(p.As, p.Bs, p.C)});
  EXPECT_EQ(p.run(body), "copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C)");
}

// (3) The GEMM K loop: RAW before the gemm, loop-carried WAR at the end of the body.
TEST(InsertBarriers, GemmKLoop) {
  Program p;
  Stmt body = seq({fill(p.C), loop(p.k, 4, seq({p.k_tile_copies(), gemm(p.As, p.Bs, p.C)})),
                   copy(p.C, p.D)});
  EXPECT_EQ(p.run(body), "fill(C) for{copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C) SYNC} copy(C,D)");
}

// The end-of-body barrier already orders the last iteration against what follows.
TEST(InsertBarriers, GemmKLoopThenSharedReuse) {
  Program p;
  Stmt body = seq({loop(p.k, 4, seq({p.k_tile_copies(), gemm(p.As, p.Bs, p.C)}), ForKind::Pipelined),
                   copy(whole(p.C), whole(p.As))});
  EXPECT_EQ(p.run(body), "for{copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C) SYNC} copy(C,As)");
}

// Hazards into the first iteration get one barrier before the loop (run once), and hazards
// from the last iteration one barrier after it; a loop that only reads needs none inside.
TEST(InsertBarriers, HazardsAcrossLoopBoundaries) {
  Program p;
  Stmt body = seq({copy(rows(p.A, imm(0), 64), whole(p.As)), copy(rows(p.B, imm(0), 32), whole(p.Bs)),
                   loop(p.k, 4, gemm(p.As, p.Bs, p.C)), fill(p.As)});
  EXPECT_EQ(p.run(body), "copy(A,As) copy(B,Bs) SYNC for{gemm(As,Bs,C)} SYNC fill(As)");
}

// A loop that may run zero times lets hazards from before it through to after it.
TEST(InsertBarriers, ZeroTripLoopPassesHazardsThrough) {
  Program p;
  Var n = make_var("n");
  Stmt maybe_empty = std::make_shared<ForNode>(p.k, imm(0), n, ForKind::Serial, seq({fill(p.C), barrier()}));
  EXPECT_EQ(p.run(seq({copy(p.G, p.S), maybe_empty, p.read_S()})), "copy(G,S) for{fill(C) SYNC} SYNC par");
  Stmt runs = loop(p.k, 2, seq({fill(p.C), barrier()}));
  EXPECT_EQ(p.run(seq({copy(p.G, p.S), runs, p.read_S()})), "copy(G,S) for{fill(C) SYNC} par");
}

// Nested loops: the inner loop's carried barrier also orders the outer iterations.
TEST(InsertBarriers, NestedLoops) {
  Program p;
  Stmt inner = loop(p.k, 2, seq({p.k_tile_copies(), gemm(p.As, p.Bs, p.C)}));
  Stmt body = loop(p.ko, 3, seq({fill(p.C), inner, copy(p.C, p.D)}));
  EXPECT_EQ(p.run(body), "for{fill(C) for{copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C) SYNC} copy(C,D)}");
  // Writing a global tile the next outer iteration reads back is a carried hazard too.
  Stmt reread = loop(p.ko, 3, seq({fill(p.C), inner, copy(whole(p.C), rows(p.A, imm(0), 64))}));
  EXPECT_EQ(p.run(reread),
            "for{fill(C) for{copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C) SYNC} copy(C,A) SYNC}");
}

// The next iteration's write of S follows this iteration's read: a carried WAR, covered at the
// end of the body; a loop that only reads shared memory needs nothing.
TEST(InsertBarriers, LoopCarriedWar) {
  Program p;
  Stmt body = loop(p.k, 4, seq({p.write_S(0, 64), p.read_S(0, 64), fill(p.F)}));
  EXPECT_EQ(p.run(body), "for{par SYNC par fill(F) SYNC}");
  // Writes to the other half of S do not meet the reads of the first half; only the carried
  // WAW of the written half remains.
  Stmt halves = loop(p.k, 4, seq({p.write_S(64, 64), p.read_S(0, 64)}));
  EXPECT_EQ(p.run(halves), "for{par par SYNC}");
  Stmt only_reads = loop(p.k, 4, seq({p.read_S(), gemm(p.As, p.Bs, p.C)}));
  EXPECT_EQ(p.run(only_reads), "for{par gemm(As,Bs,C)}");
}

// (4) Fragments are per thread: nothing to order.
TEST(InsertBarriers, FragmentOnlyProgram) {
  Program p;
  Stmt body = seq({fill(p.F), parallel(p.i, 128, store(p.F, times(load(p.F, {p.i}), make_float(2)), {p.i})),
                   tile_op("reduce", {whole(p.F), whole(p.R)}), fill(p.F)});
  EXPECT_EQ(p.run(body), "fill(F) par reduce(F,R) fill(F)");
}

// (5) A barrier the user wrote counts: nothing is added.
TEST(InsertBarriers, UserBarrierKept) {
  Program p;
  Stmt user = barrier();
  PrimFunc f = p.kernel(seq({copy(p.G, p.S), user, p.read_S()}));
  PrimFunc out = insert_barriers(f);
  EXPECT_EQ(outline(out->body), "copy(G,S) SYNC par");
  EXPECT_EQ(out, f) << "nothing to change: the function is returned as is";
  // In a loop, a user barrier at the end of the body covers the carried hazard.
  Stmt body = loop(p.k, 4, seq({p.k_tile_copies(), barrier(), gemm(p.As, p.Bs, p.C), barrier()}));
  EXPECT_EQ(p.run(body), "for{copy(A,As) copy(B,Bs) SYNC gemm(As,Bs,C) SYNC}");
}

// (6) A uniform if writing S in one branch, S read after the if: barrier after the if.
TEST(InsertBarriers, UniformIfThenRead) {
  Program p;
  Stmt body = seq({branch(less(p.bx, imm(2)), p.write_S()), p.read_S()});
  EXPECT_EQ(p.run(body), "if{par} SYNC par");
  Stmt with_else = seq({branch(less(p.bx, imm(2)), fill(p.F), p.write_S()), p.read_S()});
  EXPECT_EQ(p.run(with_else), "if{fill(F)}else{par} SYNC par");
}

// Barriers inside a uniform if: only in the branch that needs one; hoisted when both do.
TEST(InsertBarriers, UniformIfBranches) {
  Program p;
  Expr cond = less(p.bx, imm(2));
  Stmt one = seq({copy(p.G, p.S), branch(cond, seq({fill(p.F), p.read_S()}), fill(p.C))});
  EXPECT_EQ(p.run(one), "copy(G,S) if{fill(F) SYNC par}else{fill(C)}");
  Stmt both = seq({copy(p.G, p.S), branch(cond, p.read_S(), copy(p.S, p.F))});
  EXPECT_EQ(p.run(both), "copy(G,S) SYNC if{par}else{copy(S,F)}");
  // A uniform if on a serial loop variable inside a K loop.
  Stmt in_loop = loop(p.k, 4, seq({branch(less(p.k, imm(3)), p.write_S()), p.read_S()}));
  EXPECT_EQ(p.run(in_loop), "for{if{par} SYNC par SYNC}");
}

// (7) Double buffering: disjoint constant regions of one buffer need no barrier.
TEST(InsertBarriers, DisjointRegions) {
  Program p;
  Stmt load_low = copy(slice(p.G, 0, 64), slice(p.S, 0, 64));  // writes S[0:64]
  EXPECT_EQ(p.run(seq({load_low, p.read_S(64, 64)})), "copy(G,S) par");
  EXPECT_EQ(p.run(seq({load_low, copy(slice(p.S, 64, 64), slice(p.F, 0, 64))})), "copy(G,S) copy(S,F)");
  // Overlapping regions: S[0:64] written, S[32:96] read.
  EXPECT_EQ(p.run(seq({load_low, p.read_S(32, 64)})), "copy(G,S) SYNC par");
  // Apart by one element, then sharing one element, in both orders.
  EXPECT_EQ(p.run(seq({p.write_S(0, 63), p.read_S(63, 65)})), "par par");
  EXPECT_EQ(p.run(seq({p.write_S(0, 64), p.read_S(63, 65)})), "par SYNC par");
  EXPECT_EQ(p.run(seq({p.read_S(64, 64), p.write_S(0, 64)})), "par par");
  EXPECT_EQ(p.run(seq({p.read_S(63, 65), p.write_S(0, 64)})), "par SYNC par");
}

// A two-stage pipeline by hand: stage k % 2 is written while stage (k + 1) % 2 is read.
// The stages are not constant across iterations, so the regions conservatively overlap.
TEST(InsertBarriers, IterationDependentRegionsOverlap) {
  Program p;
  Expr stage = bin(BinaryOp::FloorMod, p.k, imm(2));
  Stmt body = loop(p.k, 4, seq({copy(slice(p.G, 0, 64), {p.S, {{times(stage, imm(64)), imm(64)}}, {}}),
                                p.read_S(0, 64)}));
  EXPECT_EQ(p.run(body), "for{copy(G,S) SYNC par SYNC}");
}

// Global memory written and read back within the block is ordered like shared memory.
TEST(InsertBarriers, GlobalWrittenThenReadBack) {
  Program p;
  Stmt body = seq({copy(p.F, p.G), parallel(p.i, 128, store(p.F, load(p.G, {p.i}), {p.i}))});
  EXPECT_EQ(p.run(body), "copy(F,G) SYNC par");
  // Reads of global only (the usual case): nothing.
  EXPECT_EQ(p.run(seq({copy(p.G, p.F), copy(p.G, p.S)})), "copy(G,F) copy(G,S)");
}

// (8) Functions without kernels are returned unchanged.
TEST(InsertBarriers, IdentityWithoutKernel) {
  Program p;
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "host";
  f->params = {{p.G->data, p.G}};
  f->body = loop(p.i, 128, store(p.G, load(p.G, {p.i}), {p.i}));
  PrimFunc g = f;
  EXPECT_EQ(insert_barriers(g), g);
  EXPECT_EQ(insert_barriers(g)->body, f->body);
}

// (9) An if on the thread index is one unit: no barrier inside, barriers around it.
TEST(InsertBarriers, ThreadDependentIfIsOneUnit) {
  Program p;
  Stmt inside = seq({copy(p.G, p.S), p.read_S()});
  Stmt body = seq({branch(less(p.tx, imm(32)), inside), p.read_S(), fill(p.S)});
  EXPECT_EQ(p.run(body), "if{copy(G,S) par} SYNC par SYNC fill(S)");
  Expr thread = std::make_shared<CallNode>(kI32, "thread_index", std::vector<Expr>{imm(0)});
  Stmt by_call = seq({copy(p.G, p.S), branch(less(thread, imm(32)), inside)});
  EXPECT_EQ(p.run(by_call), "copy(G,S) SYNC if{copy(G,S) par}");
}

// A per-thread variable computed from the thread index makes its condition thread-dependent;
// one set from a block index does not.
TEST(InsertBarriers, ConditionOnLocalVariable) {
  Program p;
  Buffer v = make_buffer("v", kI32, {imm(1)}, scope::kLocalVar);
  Stmt from_thread = seq({store(v, p.tx, {imm(0)}),
                          branch(less(load(v, {imm(0)}), imm(2)), seq({copy(p.G, p.S), p.read_S()}))});
  EXPECT_EQ(p.run(from_thread), "store(v) if{copy(G,S) par}");
  Stmt from_block = seq({store(v, p.bx, {imm(0)}),
                         branch(less(load(v, {imm(0)}), imm(2)), seq({copy(p.G, p.S), p.read_S()}))});
  EXPECT_EQ(p.run(from_block), "store(v) if{copy(G,S) SYNC par}");
}

// Plain stores at block level are units; a serial loop of them is one unit.
TEST(InsertBarriers, ScalarStatements) {
  Program p;
  Stmt init = loop(p.k, 4, store(p.S, make_float(0), {p.k}));
  EXPECT_EQ(p.run(seq({init, p.read_S()})), "for{store(S)} SYNC par");
  Stmt atomic = std::make_shared<EvaluateNode>(
      std::make_shared<CallNode>(kF32, "atomic_add", std::vector<Expr>{load(p.S, {imm(0)}), make_float(1)}));
  EXPECT_EQ(p.run(seq({atomic, p.read_S(0, 1)})), "eval SYNC par");
  EXPECT_EQ(p.run(seq({store(p.S, make_float(1), {imm(5)}), p.read_S(0, 4)})), "store(S) par");
}

// Let and allocation scopes are transparent.
TEST(InsertBarriers, ScopesAreTransparent) {
  Program p;
  Var off = make_var("off");
  Stmt body = std::make_shared<AllocateNode>(
      p.S, std::make_shared<LetStmtNode>(off, imm(64), seq({copy(p.G, p.S), p.read_S()})));
  PrimFunc out = insert_barriers(p.kernel(body));
  EXPECT_EQ(outline(out->body), "copy(G,S) SYNC par");
  EXPECT_EQ(count_barriers(out->body), 1u);
  auto* kernel = as<KernelNode>(out->body);
  ASSERT_NE(kernel, nullptr);
  ASSERT_NE(as<AllocateNode>(kernel->body), nullptr) << "the barrier goes inside the scopes";
}

}  // namespace
}  // namespace tl
