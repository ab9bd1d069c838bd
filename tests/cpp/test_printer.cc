// The printer: exact DSL text for hand-built IR.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/function.h"
#include "ir/op.h"
#include "ir/printer.h"

namespace tl {
namespace {

const DataType kI32 = DataType::Int(32);
const DataType kF16 = DataType::Float(16);
const DataType kF32 = DataType::Float(32);

Expr i32(int64_t v) { return make_int(v); }
// The DSL's unary minus: 0 - x in x's dtype.
Expr negate(const Expr& x) { return sub(cast(x->dtype, make_int(0)), x); }

Expr load(const Buffer& b, std::vector<Expr> idx) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx));
}
Stmt store(const Buffer& b, Expr v, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, std::move(v), std::move(idx));
}
Stmt loop(const Var& v, Expr extent, ForKind kind, Stmt body, Attrs attrs = {}) {
  return std::make_shared<ForNode>(v, i32(0), std::move(extent), kind, std::move(body), std::move(attrs));
}
Stmt alloc(const Buffer& b, Stmt body, Attrs attrs = {}) {
  return std::make_shared<AllocateNode>(b, std::move(body), std::move(attrs));
}
Stmt tile(std::string op, std::vector<BufferRegion> regions, std::vector<Expr> args = {}, Attrs attrs = {}) {
  return std::make_shared<TileOpNode>(std::move(op), std::move(regions), std::move(args), std::move(attrs));
}
Stmt eval(Expr e) { return std::make_shared<EvaluateNode>(std::move(e)); }
BufferRegion region(const Buffer& b, std::vector<Range> ranges) {
  return BufferRegion{b, std::move(ranges), {}};
}

Param buffer_param(const Buffer& b) { return Param{b->data, b}; }
Param scalar_param(const Var& v) { return Param{v, nullptr}; }

TEST(Printer, GemmFunction) {
  Var M = make_var("M");
  Buffer A = make_buffer("A", kF16, {M, i32(1024)}, scope::kGlobal);
  Buffer B = make_buffer("B", kF16, {i32(1024), i32(1024)}, scope::kGlobal);
  Buffer C = make_buffer("C", kF32, {M, i32(1024)}, scope::kGlobal);
  Var alpha = make_var("alpha", kF32);
  Var bx = make_var("bx"), by = make_var("by"), tx = make_var("tx");
  Var k = make_var("k"), i = make_var("i"), j = make_var("j");
  Buffer A_shared = make_buffer("A_shared", kF16, {i32(128), i32(32)}, scope::kShared);
  Buffer B_shared = make_buffer("B_shared", kF16, {i32(128), i32(32)}, scope::kShared);
  Buffer C_local = make_buffer("C_local", kF32, {i32(128), i32(128)}, scope::kFragment);

  Stmt clear = tile("fill", {full_region(C_local)}, {make_float(0.0)});
  Stmt copy_a = tile("copy", {region(A, {{mul(by, i32(128)), i32(128)}, {mul(k, i32(32)), i32(32)}}),
                              full_region(A_shared)});
  Stmt copy_b = tile("copy", {region(B, {{mul(bx, i32(128)), i32(128)}, {mul(k, i32(32)), i32(32)}}),
                              full_region(B_shared)});
  Stmt gemm = tile("gemm", {full_region(A_shared), full_region(B_shared), full_region(C_local)}, {},
                   {{"transpose_A", int64_t(0)}, {"transpose_B", int64_t(1)}, {"k_pack", int64_t(1)}});
  Stmt pipelined =
      loop(k, i32(32), ForKind::Pipelined, make_seq({copy_a, copy_b, gemm}), {{"num_stages", int64_t(3)}});
  Stmt epilogue =
      store(C, mul(load(C_local, {i, j}), alpha), {add(mul(by, i32(128)), i), add(mul(bx, i32(128)), j)});
  Stmt par = loop(i, i32(128), ForKind::Parallel, loop(j, i32(128), ForKind::Parallel, epilogue));
  Stmt body = alloc(A_shared, alloc(B_shared, alloc(C_local, make_seq({clear, pipelined, par}))));
  Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx, by},
                                             std::vector<Expr>{floordiv(add(M, i32(127)), i32(128)), i32(8)},
                                             std::vector<Var>{tx}, std::vector<int64_t>{128}, body);
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "main";
  f->params = {buffer_param(A), buffer_param(B), buffer_param(C), scalar_param(alpha)};
  f->body = kernel;

  const char* expected =
      "@T.prim_func\n"
      "def main(A: T.Tensor((M, 1024), \"float16\"), B: T.Tensor((1024, 1024), \"float16\"), "
      "C: T.Tensor((M, 1024), \"float32\"), alpha: T.float32):\n"
      "    with T.Kernel((M + 127) // 128, 8, threads=128) as (bx, by):\n"
      "        A_shared = T.alloc_shared((128, 32), \"float16\")\n"
      "        B_shared = T.alloc_shared((128, 32), \"float16\")\n"
      "        C_local = T.alloc_fragment((128, 128), \"float32\")\n"
      "        T.clear(C_local)\n"
      "        for k in T.Pipelined(32, num_stages=3):\n"
      "            T.copy(A[by * 128:by * 128 + 128, k * 32:k * 32 + 32], A_shared)\n"
      "            T.copy(B[bx * 128:bx * 128 + 128, k * 32:k * 32 + 32], B_shared)\n"
      "            T.gemm(A_shared, B_shared, C_local, transpose_B=True)\n"
      "        for i, j in T.Parallel(128, 128):\n"
      "            C[by * 128 + i, bx * 128 + j] = C_local[i, j] * alpha\n";
  EXPECT_EQ(to_string(PrimFunc(f)), expected);
}

TEST(Printer, FunctionAttrsStridesAndScopes) {
  Var n = make_var("n"), s = make_var("s");
  Buffer X = make_buffer("X", kF32, {n, i32(4)}, scope::kGlobal, {}, {s, i32(1)});
  Buffer Y = make_buffer("Y", DataType::BFloat16(), {i32(8)}, scope::kShared);
  Var flag = make_var("flag", DataType::Bool());
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "kern";
  f->params = {buffer_param(X), buffer_param(Y), scalar_param(flag), scalar_param(n)};
  f->attrs = {{"target", std::string("cuda")}, {"block", std::vector<int64_t>{1, 2}}, {"a", int64_t(7)}};
  f->body = store(X, make_float(2.5), {i32(0), i32(0)});
  EXPECT_EQ(to_string(PrimFunc(f)),
            "# attrs: {\"a\": 7, \"block\": [1, 2], \"target\": \"cuda\"}\n"
            "@T.prim_func\n"
            "def kern(X: T.Tensor((n, 4), \"float32\", strides=(s, 1)), "
            "Y: T.Buffer((8,), \"bfloat16\", scope=\"shared\"), flag: T.bool, n: T.int32):\n"
            "    X[0, 0] = 2.5\n");
}

TEST(Printer, Precedence) {
  Var a = make_var("a"), b = make_var("b"), c = make_var("c"), d = make_var("d");
  EXPECT_EQ(to_string(mul(add(a, b), c)), "(a + b) * c");
  EXPECT_EQ(to_string(add(mul(a, b), c)), "a * b + c");
  EXPECT_EQ(to_string(add(a, mul(b, c))), "a + b * c");
  EXPECT_EQ(to_string(sub(a, sub(b, c))), "a - (b - c)");
  EXPECT_EQ(to_string(sub(sub(a, b), c)), "a - b - c");
  EXPECT_EQ(to_string(add(a, add(b, c))), "a + (b + c)");
  EXPECT_EQ(to_string(floordiv(a, mul(b, c))), "a // (b * c)");
  EXPECT_EQ(to_string(floordiv(mul(a, b), c)), "a * b // c");
  EXPECT_EQ(to_string(mul(floordiv(a, b), c)), "a // b * c");
  EXPECT_EQ(to_string(floormod(add(a, b), c)), "(a + b) % c");
  EXPECT_EQ(to_string(negate(a)), "-a");
  EXPECT_EQ(to_string(negate(add(a, b))), "-(a + b)");
  EXPECT_EQ(to_string(mul(negate(a), b)), "-a * b");
  EXPECT_EQ(to_string(sub(a, negate(b))), "a - -b");
  EXPECT_EQ(to_string(add(a, i32(-3))), "a + -3");
  EXPECT_EQ(to_string(binary(BinaryOp::Div, a, b)), "T.truncdiv(a, b)");
  EXPECT_EQ(to_string(binary(BinaryOp::Mod, add(a, b), c)), "T.truncmod(a + b, c)");
  EXPECT_EQ(to_string(tl::min(a, tl::max(b, c))), "T.min(a, T.max(b, c))");
  Var x = make_var("x", kF32), y = make_var("y", kF32);
  EXPECT_EQ(to_string(binary(BinaryOp::Div, add(x, y), y)), "(x + y) / y");
  EXPECT_EQ(to_string(negate(x)), "-x");

  Expr a_lt_b = lt(a, b), c_lt_d = lt(c, d);
  EXPECT_EQ(to_string(land(a_lt_b, c_lt_d)), "a < b and c < d");
  EXPECT_EQ(to_string(lt(add(a, b), mul(c, d))), "a + b < c * d");
  EXPECT_EQ(to_string(binary(BinaryOp::EQ, a_lt_b, c_lt_d)), "(a < b) == (c < d)");
  EXPECT_EQ(to_string(binary(BinaryOp::Or, a_lt_b, land(c_lt_d, a_lt_b))), "a < b or c < d and a < b");
  EXPECT_EQ(to_string(land(binary(BinaryOp::Or, a_lt_b, c_lt_d), a_lt_b)), "(a < b or c < d) and a < b");
  EXPECT_EQ(to_string(logical_not(a_lt_b)), "not a < b");
  EXPECT_EQ(to_string(land(logical_not(a_lt_b), c_lt_d)), "not a < b and c < d");
  EXPECT_EQ(to_string(logical_not(land(a_lt_b, c_lt_d))), "not (a < b and c < d)");
  EXPECT_EQ(to_string(binary(BinaryOp::GE, a, b)), "a >= b");
  EXPECT_EQ(to_string(binary(BinaryOp::NE, a, b)), "a != b");
  EXPECT_EQ(to_string(select(a_lt_b, x, y)), "T.if_then_else(a < b, x, y)");
  EXPECT_EQ(to_string(cast(kF16, add(a, b))), "T.Cast(\"float16\", a + b)");
  EXPECT_EQ(to_string(call("exp", {x})), "T.exp(x)");
  EXPECT_EQ(to_string(mul(call("exp", {x}), y)), "T.exp(x) * y");
}

TEST(Printer, Constants) {
  EXPECT_EQ(to_string(i32(5)), "5");
  EXPECT_EQ(to_string(make_int(5, DataType::Int(64))), "T.int64(5)");
  EXPECT_EQ(to_string(make_int(-1, DataType::UInt(64))), "T.uint64(18446744073709551615)");
  EXPECT_EQ(to_string(make_bool(true)), "True");
  EXPECT_EQ(to_string(make_bool(false)), "False");
  EXPECT_EQ(to_string(make_float(1.5)), "1.5");
  EXPECT_EQ(to_string(make_float(1.0)), "1.0");
  EXPECT_EQ(to_string(make_float(0.1)), "0.1");
  EXPECT_EQ(to_string(make_float(-2.0)), "-2.0");
  EXPECT_EQ(to_string(make_float(1e20)), "1e+20");
  EXPECT_EQ(to_string(make_float(double(3.14159f))), "3.141590118408203");
  EXPECT_EQ(to_string(make_float(1.5, kF16)), "T.float16(1.5)");
  EXPECT_EQ(to_string(make_float(1.0, DataType::Float(64))), "T.float64(1.0)");
  EXPECT_EQ(to_string(infinity(kF32)), "T.infinity(\"float32\")");
  EXPECT_EQ(to_string(make_float(-std::numeric_limits<double>::infinity(), kF16)),
            "-T.infinity(\"float16\")");
  EXPECT_EQ(to_string(make_float(std::nan(""))), "T.float32(\"nan\")");
  EXPECT_EQ(to_string(std::make_shared<StringImmNode>("a\"b\\c\nd")), "\"a\\\"b\\\\c\\nd\"");
  Var x = make_var("x", kF32);
  EXPECT_EQ(to_string(mul(x, make_float(-2.0))), "x * -2.0");
  EXPECT_EQ(to_string(sub(x, infinity(kF32))), "x - T.infinity(\"float32\")");
}

TEST(Printer, AllocKinds) {
  Var n = make_var("n");
  Buffer s = make_buffer("s", kF16, {i32(64)}, scope::kShared);
  Buffer sd = make_buffer("sd", kF16, {i32(16), i32(64)}, scope::kSharedDyn);
  Buffer fr = make_buffer("fr", kF32, {i32(16), i32(16)}, scope::kFragment);
  Buffer lo = make_buffer("lo", kF32, {i32(8)}, scope::kLocal);
  Buffer v = make_buffer("v", DataType::Int(32), {i32(1)}, scope::kLocalVar);
  Buffer w = make_buffer("w", kF32, {i32(1)}, scope::kLocalVar);
  Buffer g = make_buffer("g", kF32, {n}, scope::kGlobal);
  Stmt body = store(v, add(load(v, {i32(0)}), i32(1)), {i32(0)});
  Stmt s_all =
      alloc(s, alloc(sd, alloc(fr, alloc(lo, alloc(v, alloc(w, alloc(g, body), {}), {{"init", i32(3)}})))));
  EXPECT_EQ(to_string(s_all),
            "s = T.alloc_shared((64,), \"float16\")\n"
            "sd = T.alloc_shared((16, 64), \"float16\", scope=\"shared.dyn\")\n"
            "fr = T.alloc_fragment((16, 16), \"float32\")\n"
            "lo = T.alloc_local((8,), \"float32\")\n"
            "v = T.alloc_var(\"int32\", init=3)\n"
            "w = T.alloc_var(\"float32\")\n"
            "g = T.alloc_buffer((n,), \"float32\", scope=\"global\")\n"
            "v[0] = v[0] + 1\n");
}

TEST(Printer, LoopKinds) {
  Var i = make_var("i"), n = make_var("n");
  Buffer a = make_buffer("a", kF32, {i32(64)}, scope::kLocal);
  Stmt st = store(a, make_float(0.0), {i});
  auto for_from = [&](Expr mn, ForKind k, Attrs attrs = {}) {
    return to_string(std::make_shared<ForNode>(i, mn, n, k, st, attrs));
  };
  EXPECT_EQ(for_from(i32(0), ForKind::Serial), "for i in range(n):\n    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(2), ForKind::Serial), "for i in T.serial(2, 2 + n):\n    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(0), ForKind::Parallel), "for i in T.Parallel(n):\n    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(0), ForKind::Unrolled), "for i in T.unroll(n):\n    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(0), ForKind::Vectorized), "for i in T.vectorized(n):\n    a[i] = 0.0\n");
  Attrs pipe = {{"num_stages", int64_t(2)},
                {"order", std::vector<int64_t>{0, 1, 2}},
                {"stage", std::vector<int64_t>{0, 0, 1}},
                {"group", std::vector<int64_t>{0}}};
  EXPECT_EQ(for_from(i32(0), ForKind::Pipelined, pipe),
            "for i in T.Pipelined(n, num_stages=2, order=[0, 1, 2], stage=[0, 0, 1], group=[0]):\n"
            "    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(1), ForKind::Pipelined), "for i in T.Pipelined(1, 1 + n):\n    a[i] = 0.0\n");
  EXPECT_EQ(for_from(i32(0), ForKind::Serial, {{"unroll_hint", int64_t(4)}}),
            "for i in T.serial(n, unroll_hint=4):\n    a[i] = 0.0\n");
  EXPECT_EQ(to_string(std::make_shared<ForNode>(i, i32(0), n, ForKind::Serial, nullptr)),
            "for i in range(n):\n    pass\n");

  // An inner extent that depends on the outer variable keeps the loops apart.
  Var j = make_var("j");
  Buffer b = make_buffer("b", kF32, {i32(8), i32(8)}, scope::kFragment);
  Stmt inner = store(b, make_float(1.0), {i, j});
  Stmt ragged = loop(i, i32(8), ForKind::Parallel, loop(j, add(i, i32(1)), ForKind::Parallel, inner));
  EXPECT_EQ(to_string(ragged),
            "for i in T.Parallel(8):\n    for j in T.Parallel(i + 1):\n        b[i, j] = 1.0\n");
  Stmt mixed = loop(i, i32(8), ForKind::Parallel, loop(j, i32(8), ForKind::Serial, inner));
  EXPECT_EQ(to_string(mixed), "for i in T.Parallel(8):\n    for j in range(8):\n        b[i, j] = 1.0\n");
  EXPECT_EQ(
      to_string(mixed, 2),
      "        for i in T.Parallel(8):\n            for j in range(8):\n                b[i, j] = 1.0\n");
}

TEST(Printer, IfLetEvaluate) {
  Var i = make_var("i"), t = make_var("t");
  Buffer a = make_buffer("a", kF32, {i32(16), i32(16)}, scope::kGlobal);
  Stmt s0 = store(a, make_float(0.0), {i, i});
  Stmt s1 = store(a, make_float(1.0), {i, i});
  Stmt s2 = store(a, make_float(2.0), {i, i});
  auto if_ = [](Expr c, Stmt th, Stmt el) { return std::make_shared<IfThenElseNode>(c, th, el); };
  Stmt chain = if_(lt(i, i32(4)), s0, if_(lt(i, i32(8)), s1, s2));
  EXPECT_EQ(to_string(chain),
            "if i < 4:\n    a[i, i] = 0.0\nelif i < 8:\n    a[i, i] = 1.0\nelse:\n    a[i, i] = 2.0\n");
  Stmt nested_else = if_(lt(i, i32(4)), s0, make_seq({if_(lt(i, i32(8)), s1, nullptr), s2}));
  EXPECT_EQ(to_string(nested_else),
            "if i < 4:\n    a[i, i] = 0.0\nelse:\n    if i < 8:\n        a[i, i] = 1.0\n    a[i, i] = 2.0\n");

  Stmt let = std::make_shared<LetStmtNode>(t, mul(i, i32(2)), store(a, make_float(3.0), {t, i}));
  EXPECT_EQ(to_string(let), "t = i * 2\na[t, i] = 3.0\n");

  Var v = make_var("v", kF32);
  Expr atomic =
      std::make_shared<CallNode>(DataType::Void(), "atomic_add", std::vector<Expr>{load(a, {i, i}), v});
  EXPECT_EQ(to_string(eval(atomic)), "T.atomic_add(a[i, i], v)\n");
  EXPECT_EQ(to_string(eval(call("print", {std::make_shared<StringImmNode>("x is"), v}))),
            "T.print(v, msg=\"x is\")\n");
  EXPECT_EQ(to_string(eval(call("print", {std::make_shared<StringImmNode>(""), v}))), "T.print(v)\n");
  EXPECT_EQ(to_string(eval(i32(0))), "T.evaluate(0)\n");
}

TEST(Printer, TileOps) {
  Var i = make_var("i");
  Buffer g = make_buffer("g", kF32, {i32(64), i32(64)}, scope::kGlobal);
  Buffer s = make_buffer("s", kF32, {i32(64), i32(64)}, scope::kShared);
  Buffer r = make_buffer("r", kF32, {i32(64)}, scope::kFragment);
  // A point in one dimension, a slice in the other.
  EXPECT_EQ(to_string(tile("copy", {region(g, {{i, i32(1)}, {i32(0), i32(64)}}), full_region(r)})),
            "T.copy(g[i, 0:64], r)\n");
  EXPECT_EQ(to_string(tile("fill", {full_region(s)}, {make_float(0.5)})), "T.fill(s, 0.5)\n");
  EXPECT_EQ(to_string(tile("fill", {region(s, {{i32(0), i32(32)}, {i32(0), i32(64)}})}, {make_float(0.0)})),
            "T.fill(s[0:32, 0:64], 0.0)\n");
  EXPECT_EQ(
      to_string(tile("gemm", {full_region(s), full_region(s), full_region(s)}, {},
                     {{"transpose_A", int64_t(1)},
                      {"clear_accum", int64_t(1)},
                      {"policy", int64_t(1)},
                      {"k_pack", int64_t(2)}})),
      "T.gemm(s, s, s, transpose_A=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow, k_pack=2)\n");
  for (const char* type : {"sum", "max", "min", "abssum", "absmax"}) {
    Attrs at = {{"type", std::string(type)}, {"dim", int64_t(1)}, {"clear", int64_t(1)}};
    EXPECT_EQ(to_string(tile("reduce", {full_region(s), full_region(r)}, {}, at)),
              std::string("T.reduce_") + type + "(s, r, dim=1)\n");
  }
  EXPECT_EQ(to_string(tile("reduce", {full_region(s), full_region(r)}, {},
                           {{"type", std::string("max")}, {"dim", int64_t(0)}, {"clear", int64_t(0)}})),
            "T.reduce_max(s, r, dim=0, clear=False)\n");
  EXPECT_EQ(to_string(tile("cumsum", {full_region(s), full_region(s)}, {},
                           {{"dim", int64_t(1)}, {"reverse", int64_t(1)}})),
            "T.cumsum(s, s, dim=1, reverse=True)\n");
  EXPECT_EQ(to_string(tile("cumsum", {full_region(s), full_region(s)}, {}, {{"dim", int64_t(0)}})),
            "T.cumsum(s, s, dim=0)\n");
  EXPECT_EQ(to_string(tile("atomic_add", {full_region(g), full_region(s)})), "T.atomic_add(g, s)\n");
  EXPECT_EQ(to_string(tile("print", {full_region(r)}, {}, {{"msg", std::string("r:")}})),
            "T.print(r, msg=\"r:\")\n");
  EXPECT_EQ(to_string(tile("my_op", {full_region(r)}, {i32(3), i}, {{"mode", std::string("fast")}})),
            "T.my_op(r, 3, i, mode=\"fast\")\n");
  EXPECT_EQ(to_string(tile("barrier", {}, {}, {{"id", int64_t(2)}})), "T.barrier(id=2)\n");
}

TEST(Printer, Kernels) {
  Var bx = make_var("bx"), tx = make_var("tx"), ty = make_var("ty");
  Buffer a = make_buffer("a", kF32, {i32(256)}, scope::kGlobal);
  Stmt st = store(a, make_float(1.0), {add(mul(bx, i32(128)), tx)});
  Stmt k1 = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{i32(2)},
                                         std::vector<Var>{tx, ty}, std::vector<int64_t>{128, 2}, st);
  EXPECT_EQ(to_string(k1),
            "with T.Kernel(2, threads=(128, 2)) as bx:\n"
            "    tx = T.get_thread_binding(0)\n"
            "    a[bx * 128 + tx] = 1.0\n");
  Var by = make_var("by"), bz = make_var("bz");
  Stmt k3 =
      std::make_shared<KernelNode>(std::vector<Var>{bx, by, bz}, std::vector<Expr>{i32(1), i32(2), i32(3)},
                                   std::vector<Var>{}, std::vector<int64_t>{32}, eval(i32(0)));
  EXPECT_EQ(to_string(k3), "with T.Kernel(1, 2, 3, threads=32) as (bx, by, bz):\n    T.evaluate(0)\n");
}

TEST(Printer, DistinctNames) {
  Var i1 = make_var("i"), i2 = make_var("i"), i_1 = make_var("i_1");
  EXPECT_EQ(to_string(add(i1, i2)), "i + i_1");
  EXPECT_EQ(to_string(add(add(i1, i2), i1)), "i + i_1 + i");
  EXPECT_EQ(to_string(add(add(i1, i_1), i2)), "i + i_1 + i_2");
  Buffer a1 = make_buffer("A", kF32, {i32(4)}, scope::kShared);
  Buffer a2 = make_buffer("A", kF32, {i32(4)}, scope::kShared);
  Stmt body = store(a2, load(a1, {i1}), {i2});
  Stmt s = loop(i1, i32(4), ForKind::Serial, loop(i2, i32(4), ForKind::Serial, body));
  EXPECT_EQ(to_string(alloc(a1, alloc(a2, s))),
            "A = T.alloc_shared((4,), \"float32\")\n"
            "A_1 = T.alloc_shared((4,), \"float32\")\n"
            "for i in range(4):\n"
            "    for i_1 in range(4):\n"
            "        A_1[i_1] = A[i]\n");
  // A buffer and a loop variable share one namespace.
  Var a_var = make_var("A");
  EXPECT_EQ(to_string(loop(a_var, i32(4), ForKind::Serial, store(a1, make_float(0.0), {a_var}))),
            "for A in range(4):\n    A_1[A] = 0.0\n");
  Var unnamed = make_var("");
  EXPECT_EQ(to_string(add(unnamed, i1)), "v + i");
}

}  // namespace
}  // namespace tl
