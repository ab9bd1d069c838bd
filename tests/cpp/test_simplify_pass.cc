// The simplify pass on small hand-built functions: guards that bounds decide disappear, indices
// get their canonical form, trivial loops go away.
#include <gtest/gtest.h>

#include "arith/expr_equal.h"
#include "ir/function.h"
#include "transform/simplify.h"

namespace tl {
namespace {

const DataType kI32 = DataType::Int(32);
const DataType kF32 = DataType::Float(32);

Expr imm(int64_t v) { return make_int(v, kI32); }
Expr bin(BinaryOp op, Expr a, Expr b) {
  DataType t = is_comparison(op) || is_logical(op) ? DataType::Bool() : a->dtype;
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b));
}
Expr add(Expr a, Expr b) { return bin(BinaryOp::Add, a, b); }
Expr mul(Expr a, Expr b) { return bin(BinaryOp::Mul, a, b); }
Expr fdiv(Expr a, Expr b) { return bin(BinaryOp::FloorDiv, a, b); }
Expr fmod(Expr a, Expr b) { return bin(BinaryOp::FloorMod, a, b); }
Expr lt(Expr a, Expr b) { return bin(BinaryOp::LT, a, b); }
Expr ge(Expr a, Expr b) { return bin(BinaryOp::GE, a, b); }
Expr load(const Buffer& b, Expr index) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::vector<Expr>{index});
}
Stmt store(const Buffer& b, Expr value, Expr index) {
  return std::make_shared<BufferStoreNode>(b, value, std::vector<Expr>{index});
}
Stmt loop(const Var& v, int64_t min, Expr extent, Stmt body) {
  return std::make_shared<ForNode>(v, imm(min), extent, ForKind::Serial, body);
}
Stmt guard(Expr cond, Stmt then_case, Stmt else_case = nullptr) {
  return std::make_shared<IfThenElseNode>(cond, then_case, else_case);
}

struct Kernel {
  Var n = make_var("n");
  Buffer A = make_buffer("A", kF32, {n}, scope::kGlobal);
  Buffer B = make_buffer("B", kF32, {imm(256)}, scope::kGlobal);
  Var bx = make_var("bx"), tx = make_var("tx"), i = make_var("i"), k = make_var("k"), z = make_var("z");

  PrimFunc with(Stmt kernel_body, Expr grid) const {
    auto f = std::make_shared<PrimFuncNode>();
    f->name = "kernel";
    f->params = {{A->data, A}, {B->data, B}};
    f->body = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{grid},
                                           std::vector<Var>{tx}, std::vector<int64_t>{128}, kernel_body);
    return f;
  }
};

const KernelNode* kernel_of(const PrimFunc& f) {
  auto* k = as<KernelNode>(f->body);
  EXPECT_NE(k, nullptr);
  return k;
}

TEST(SimplifyPass, ProvablyTrueGuardVanishesAndIndexSimplifies) {
  Kernel K;
  // for i in range(128): if bx*128 + i < 256: B[(g // 128) * 128 + g % 128] = A[g] + 1  with g = bx*128+i
  Expr g = add(mul(K.bx, imm(128)), K.i);
  Expr index = add(mul(fdiv(g, imm(128)), imm(128)), fmod(g, imm(128)));
  Stmt body = loop(K.i, 0, imm(128),
                   guard(lt(g, imm(256)), store(K.B, add(load(K.A, g), make_float(1.0)), index)));
  PrimFunc f = K.with(body, imm(2));
  PrimFunc out = simplify(f);

  auto* kernel = kernel_of(out);
  ASSERT_NE(kernel, nullptr);
  auto* for_node = as<ForNode>(kernel->body);
  ASSERT_NE(for_node, nullptr);
  auto* st = as<BufferStoreNode>(for_node->body);
  ASSERT_NE(st, nullptr) << "the guard should be gone";
  ASSERT_EQ(st->indices.size(), 1u);
  EXPECT_TRUE(arith::expr_equal(st->indices[0], g));
  // The original function is untouched.
  EXPECT_NE(as<IfThenElseNode>(as<ForNode>(kernel_of(f)->body)->body), nullptr);
}

TEST(SimplifyPass, GuardWithSymbolicBoundStays) {
  Kernel K;
  Expr g = add(mul(K.bx, imm(128)), K.i);
  Stmt body = loop(K.i, 0, imm(128), guard(lt(g, K.n), store(K.B, load(K.A, g), fmod(K.i, imm(128)))));
  PrimFunc out = simplify(K.with(body, fdiv(add(K.n, imm(127)), imm(128))));
  auto* for_node = as<ForNode>(kernel_of(out)->body);
  ASSERT_NE(for_node, nullptr);
  auto* ite = as<IfThenElseNode>(for_node->body);
  ASSERT_NE(ite, nullptr);
  auto* st = as<BufferStoreNode>(ite->then_case);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->indices[0], K.i);  // floormod(i, 128) with i < 128
}

TEST(SimplifyPass, FalseGuardsTrivialLoopsAndShapeVars) {
  Kernel K;
  std::vector<Stmt> seq;
  // Provably false without else: dropped. With else: the else remains.
  seq.push_back(guard(ge(K.tx, imm(128)), store(K.B, make_float(0.0), K.tx)));
  seq.push_back(
      guard(ge(K.tx, imm(128)), store(K.B, make_float(0.0), K.tx), store(K.B, make_float(2.0), K.tx)));
  // Extent 0: gone. Extent 1: inlined with k = 5.
  seq.push_back(loop(K.z, 0, imm(0), store(K.B, make_float(3.0), K.z)));
  seq.push_back(loop(K.k, 5, imm(1), store(K.B, make_float(4.0), add(K.k, K.bx))));
  // n is a shape variable: n >= 1 always holds.
  seq.push_back(guard(ge(K.n, imm(1)), store(K.B, make_float(5.0), imm(0))));
  PrimFunc out = simplify(K.with(make_seq(seq), imm(2)));

  auto* body = as<SeqStmtNode>(kernel_of(out)->body);
  ASSERT_NE(body, nullptr);
  ASSERT_EQ(body->seq.size(), 3u);
  auto* else_store = as<BufferStoreNode>(body->seq[0]);
  ASSERT_NE(else_store, nullptr);
  EXPECT_EQ(as<FloatImmNode>(else_store->value)->value, 2.0);
  auto* inlined = as<BufferStoreNode>(body->seq[1]);
  ASSERT_NE(inlined, nullptr);
  EXPECT_TRUE(arith::expr_equal(inlined->indices[0], add(K.bx, imm(5))));
  auto* shape_guarded = as<BufferStoreNode>(body->seq[2]);
  ASSERT_NE(shape_guarded, nullptr);
  EXPECT_EQ(as<FloatImmNode>(shape_guarded->value)->value, 5.0);
}

TEST(SimplifyPass, LoopBoundsEndWithTheirScope) {
  Kernel K;
  // The same guard on i inside and after the loop: only the one inside is decided.
  Stmt inside = loop(K.i, 0, imm(16), guard(lt(K.i, imm(16)), store(K.B, make_float(1.0), K.i)));
  Stmt after = guard(lt(K.i, imm(16)), store(K.B, make_float(1.0), K.i));
  PrimFunc out = simplify(K.with(make_seq({inside, after}), imm(1)));
  auto* seq = as<SeqStmtNode>(kernel_of(out)->body);
  ASSERT_NE(seq, nullptr);
  ASSERT_EQ(seq->seq.size(), 2u);
  auto* for_node = as<ForNode>(seq->seq[0]);
  ASSERT_NE(for_node, nullptr);
  EXPECT_NE(as<BufferStoreNode>(for_node->body), nullptr);
  EXPECT_NE(as<IfThenElseNode>(seq->seq[1]), nullptr);
  // A grid of 1 makes bx exactly 0.
  Stmt uses_bx = store(K.B, make_float(1.0), add(K.bx, K.tx));
  PrimFunc single_block = simplify(K.with(uses_bx, imm(1)));
  auto* st = as<BufferStoreNode>(kernel_of(single_block)->body);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->indices[0], K.tx);
}

TEST(SimplifyPass, EmptiedLoopIsRemoved) {
  Kernel K;
  Stmt body = loop(K.i, 0, imm(8), guard(ge(K.i, imm(8)), store(K.B, make_float(1.0), K.i)));
  PrimFunc out = simplify(K.with(make_seq({body, store(K.B, make_float(2.0), imm(1))}), imm(1)));
  EXPECT_NE(as<BufferStoreNode>(kernel_of(out)->body), nullptr);
}

TEST(SimplifyPass, LetBoundsItsVariable) {
  Kernel K;
  Var t = make_var("t");
  // let t = tx % 32 in: if t < 32: B[t // 32 + tx] = 1
  Stmt guarded = guard(lt(t, imm(32)), store(K.B, make_float(1.0), add(fdiv(t, imm(32)), K.tx)));
  Stmt body = std::make_shared<LetStmtNode>(t, fmod(K.tx, imm(32)), guarded);
  PrimFunc out = simplify(K.with(body, imm(1)));
  auto* let = as<LetStmtNode>(kernel_of(out)->body);
  ASSERT_NE(let, nullptr);
  auto* st = as<BufferStoreNode>(let->body);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->indices[0], K.tx);
}

TEST(SimplifyPass, SimplifyStmtLeavesTheAnalyzerAsFound) {
  Kernel K;
  arith::Analyzer an;
  an.bind(K.i.get(), 0, 1000);  // the caller's range of i
  // An inner loop that re-binds i to [0, 8).
  Stmt s = loop(K.i, 0, imm(8), store(K.B, make_float(1.0), fmod(K.i, imm(8))));
  Stmt out = simplify_stmt(s, an);
  auto* st = as<BufferStoreNode>(as<ForNode>(out)->body);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->indices[0], K.i);
  auto b = an.const_int_bound(K.i);
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 999);
  auto unbound = an.const_int_bound(K.z);
  EXPECT_EQ(unbound.max, (int64_t(1) << 31) - 1);
}

TEST(SimplifyPass, RegionsAndTileOpArgumentsAreSimplified) {
  Kernel K;
  Buffer S = make_buffer("S", kF32, {imm(128)}, scope::kShared);
  Expr start = fmod(add(mul(K.bx, imm(128)), imm(0)), imm(128));  // 0 for every bx
  BufferRegion src{K.A, {{add(mul(K.bx, imm(128)), imm(0)), add(imm(64), imm(64))}}, {}};
  BufferRegion dst{S, {{start, imm(128)}}, {}};
  Stmt copy = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{src, dst}, std::vector<Expr>{},
                                           Attrs{});
  PrimFunc out = simplify(K.with(copy, imm(4)));
  auto* op = as<TileOpNode>(kernel_of(out)->body);
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(arith::expr_equal(op->regions[0].ranges[0].min, mul(K.bx, imm(128))));
  ASSERT_NE(const_int(op->regions[0].ranges[0].extent), nullptr);
  EXPECT_EQ(*const_int(op->regions[0].ranges[0].extent), 128);
  ASSERT_NE(const_int(op->regions[1].ranges[0].min), nullptr);
  EXPECT_EQ(*const_int(op->regions[1].ranges[0].min), 0);
}

}  // namespace
}  // namespace tl
