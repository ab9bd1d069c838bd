// IR core: dtypes, typed constructors, buffers, sequences, substitution, visitor/mutator,
// structural equality and hashing.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/intrinsics.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/structural.h"

namespace tl {
namespace {

const DataType kI32 = DataType::Int(32);
const DataType kI64 = DataType::Int(64);
const DataType kF16 = DataType::Float(16);
const DataType kF32 = DataType::Float(32);

Expr i32(int64_t v) { return make_int(v); }
int64_t folded(const Expr& e) {
  const int64_t* v = const_int(e);
  EXPECT_NE(v, nullptr) << to_string(e);
  return v ? *v : 0;
}

Expr load(const Buffer& b, std::vector<Expr> idx) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(idx));
}
Stmt store(const Buffer& b, Expr v, std::vector<Expr> idx) {
  return std::make_shared<BufferStoreNode>(b, std::move(v), std::move(idx));
}
Stmt loop(const Var& v, Expr extent, Stmt body, ForKind kind = ForKind::Serial) {
  return std::make_shared<ForNode>(v, i32(0), std::move(extent), kind, std::move(body));
}
Stmt eval(Expr e) { return std::make_shared<EvaluateNode>(std::move(e)); }

// ---------------------------------------------------------------- dtypes

TEST(DType, CanonicalNamesRoundTrip) {
  for (const char* name :
       {"bool",        "int8",   "int16",   "int32",       "int64",   "uint8",    "uint16",
        "uint32",      "uint64", "float16", "float32",     "float64", "bfloat16", "float8_e4m3",
        "float8_e5m2", "int4",   "uint4",   "float4_e2m1", "handle",  "void"}) {
    EXPECT_EQ(DataType::parse(name).str(), name);
  }
}

TEST(DType, Aliases) {
  EXPECT_EQ(DataType::parse("int"), kI32);
  EXPECT_EQ(DataType::parse("half"), kF16);
  EXPECT_EQ(DataType::parse("float"), kF32);
  EXPECT_EQ(DataType::parse("double"), DataType::Float(64));
  EXPECT_EQ(DataType::parse("float8_e4m3fn").str(), "float8_e4m3");
  EXPECT_EQ(DataType::parse("e4m3_float8").str(), "float8_e4m3");
  EXPECT_EQ(DataType::parse("e5m2_float8").str(), "float8_e5m2");
  EXPECT_EQ(DataType::parse("float4_e2m1fn").str(), "float4_e2m1");
}

TEST(DType, PropertiesAndLanes) {
  DataType f8 = DataType::parse("float8_e5m2");
  EXPECT_TRUE(f8.is_float());
  EXPECT_EQ(f8.bits, 8);
  EXPECT_EQ(f8.bytes(), 1);
  EXPECT_TRUE(DataType::parse("int4").is_sub_byte());
  EXPECT_FALSE(DataType::Bool().is_sub_byte());
  EXPECT_EQ(DataType::Bool().bytes(), 1);
  EXPECT_FALSE(DataType::Bool().is_integer());
  EXPECT_TRUE(DataType::UInt(8).is_integer());
  EXPECT_EQ(DataType(TypeCode::Float, 16, 4).str(), "float16x4");
  EXPECT_EQ(DataType(TypeCode::Float, 16, 4).bytes(), 8);
  EXPECT_NE(DataType(TypeCode::Float, 16, 4), kF16);
}

TEST(DType, UnknownNameThrows) {
  EXPECT_THROW(DataType::parse("float17"), std::invalid_argument);
  EXPECT_THROW(DataType::parse(""), std::invalid_argument);
  EXPECT_THROW(DataType::parse("Float32"), std::invalid_argument);
}

// ---------------------------------------------------------------- constructors

TEST(Op, PromotionRules) {
  Var x = make_var("x");  // int32
  Var w = make_var("w", kI64);
  Var h = make_var("h", kF16);
  Var f = make_var("f", kF32);

  // A literal adopts the other side's type, even a wider one.
  Expr e1 = add(x, make_int(5, kI64));
  EXPECT_EQ(e1->dtype, kI32);
  EXPECT_EQ(to_string(e1), "x + 5");
  // Two variables: the wider wins, the narrower is cast.
  Expr e2 = add(x, w);
  EXPECT_EQ(e2->dtype, kI64);
  EXPECT_EQ(to_string(e2), "T.Cast(\"int64\", x) + w");
  // A float literal stays in the float16 of the variable.
  Expr e3 = mul(h, make_float(2.0));
  EXPECT_EQ(e3->dtype, kF16);
  EXPECT_EQ(to_string(e3), "h * T.float16(2.0)");
  // int meets float: float.
  Expr e4 = add(x, f);
  EXPECT_EQ(e4->dtype, kF32);
  EXPECT_EQ(to_string(e4), "T.Cast(\"float32\", x) + f");
  // An int variable with a float literal becomes float32.
  EXPECT_EQ(add(x, make_float(0.5))->dtype, kF32);
  // float16 and bfloat16 meet in float32.
  EXPECT_EQ(add(h, make_var("b", DataType::BFloat16()))->dtype, kF32);
  EXPECT_EQ(add(h, f)->dtype, kF32);
  // Comparisons and logic give bool.
  EXPECT_EQ(lt(x, w)->dtype, DataType::Bool());
  EXPECT_EQ(binary(BinaryOp::EQ, h, make_float(1.0))->dtype, DataType::Bool());
  EXPECT_EQ(land(lt(x, i32(1)), lt(w, i32(2)))->dtype, DataType::Bool());
  EXPECT_EQ(promote(make_var("u", DataType::UInt(32)), x), DataType::UInt(32));
}

TEST(Op, ConstantFolding) {
  EXPECT_EQ(folded(add(i32(3), i32(4))), 7);
  EXPECT_EQ(folded(mul(i32(-3), i32(4))), -12);
  EXPECT_EQ(folded(floordiv(i32(-7), i32(2))), -4);
  EXPECT_EQ(folded(floormod(i32(-7), i32(2))), 1);
  EXPECT_EQ(folded(floordiv(i32(7), i32(-2))), -4);
  EXPECT_EQ(folded(floormod(i32(7), i32(-2))), -1);
  EXPECT_EQ(folded(floormod(i32(-7), i32(-2))), -1);
  EXPECT_EQ(folded(floordiv(i32(6), i32(3))), 2);
  EXPECT_EQ(folded(binary(BinaryOp::Div, i32(-7), i32(2))), -3);
  EXPECT_EQ(folded(binary(BinaryOp::Mod, i32(-7), i32(2))), -1);
  EXPECT_EQ(folded(tl::min(i32(3), i32(-1))), -1);
  EXPECT_EQ(folded(tl::max(i32(3), i32(-1))), 3);
  Expr cmp = lt(i32(2), i32(3));
  EXPECT_EQ(cmp->dtype, DataType::Bool());
  EXPECT_EQ(folded(cmp), 1);
  // int32 arithmetic wraps.
  EXPECT_EQ(folded(add(i32(2147483647), i32(1))), -2147483648LL);
  EXPECT_EQ(folded(cast(DataType::Int(8), i32(300))), 44);
  EXPECT_EQ(folded(cast(DataType::UInt(8), i32(-1))), 255);
  EXPECT_EQ(folded(logical_not(make_bool(false))), 1);
  Expr product = mul(make_float(1.5), make_float(2.0));
  auto* fl = as<FloatImmNode>(product);
  ASSERT_NE(fl, nullptr);
  EXPECT_EQ(fl->value, 3.0);
  EXPECT_THROW(floordiv(i32(1), i32(0)), CompileError);
}

TEST(Op, IdentitiesAndSelect) {
  Var x = make_var("x");
  EXPECT_EQ(add(x, i32(0)), Expr(x));
  EXPECT_EQ(add(i32(0), x), Expr(x));
  EXPECT_EQ(mul(x, i32(1)), Expr(x));
  EXPECT_EQ(floordiv(x, i32(1)), Expr(x));
  EXPECT_EQ(folded(mul(x, i32(0))), 0);
  Expr c = lt(x, i32(3));
  EXPECT_EQ(land(make_bool(true), c), c);
  Expr t = i32(1), f = i32(2);
  EXPECT_EQ(select(make_bool(true), t, f), t);
  EXPECT_EQ(to_string(select(c, x, f)), "T.if_then_else(x < 3, x, 2)");
  EXPECT_EQ(sub(i32(0), x)->dtype, kI32);
  EXPECT_EQ(to_string(sub(i32(0), x)), "-x");
}

TEST(Op, Calls) {
  Var x = make_var("x");
  Var h = make_var("h", kF16);
  Expr e = call("exp", {x});
  EXPECT_EQ(e->dtype, kF32);
  EXPECT_EQ(to_string(e), "T.exp(T.Cast(\"float32\", x))");
  EXPECT_EQ(call("sqrt", {h})->dtype, kF16);
  EXPECT_EQ(call("isnan", {h})->dtype, DataType::Bool());
  EXPECT_EQ(call("abs", {x})->dtype, kI32);
  EXPECT_THROW(call("no_such_fn", {x}), CompileError);
  EXPECT_THROW(call("exp", {x, x}), CompileError);
  EXPECT_EQ(find_intrinsic("pow")->arity, 2);
  EXPECT_EQ(find_intrinsic("nope"), nullptr);
}

TEST(Op, Limits) {
  EXPECT_EQ(folded(max_value(DataType::Int(8))), 127);
  EXPECT_EQ(folded(min_value(DataType::Int(16))), -32768);
  EXPECT_EQ(folded(max_value(DataType::UInt(8))), 255);
  EXPECT_EQ(as<FloatImmNode>(max_value(kF16))->value, 65504.0);
  EXPECT_TRUE(std::isinf(as<FloatImmNode>(infinity(kF32))->value));
  EXPECT_THROW(infinity(kI32), CompileError);
  EXPECT_THROW(add(make_var("p", DataType::Handle()), i32(1)), CompileError);
}

// ---------------------------------------------------------------- buffers and statements

TEST(Buffer, EffectiveStridesSymbolic) {
  Var M = make_var("M"), N = make_var("N");
  Buffer b = make_buffer("b", kF32, {M, N, i32(4)}, scope::kGlobal);
  auto st = b->effective_strides();
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(folded(st[2]), 1);
  EXPECT_EQ(folded(st[1]), 4);
  EXPECT_EQ(to_string(st[0]), "4 * N");
  EXPECT_EQ(b->const_size(), -1);

  Buffer c = make_buffer("c", kF32, {i32(2), i32(3), i32(5)}, scope::kShared);
  auto cs = c->effective_strides();
  EXPECT_EQ(folded(cs[0]), 15);
  EXPECT_EQ(folded(cs[1]), 5);
  EXPECT_EQ(folded(cs[2]), 1);
  EXPECT_EQ(c->const_size(), 30);
  EXPECT_TRUE(c->is_shared());

  Buffer d = make_buffer("d", kF32, {M, N}, scope::kGlobal, {}, {i32(64), i32(1)});
  auto ds = d->effective_strides();
  EXPECT_EQ(folded(ds[0]), 64);
  EXPECT_EQ(folded(ds[1]), 1);
  EXPECT_EQ(d->data->name, "d");
  EXPECT_EQ(d->data->dtype, DataType::Handle());

  BufferRegion r = full_region(b);
  ASSERT_EQ(r.ranges.size(), 3u);
  EXPECT_EQ(folded(r.ranges[0].min), 0);
  EXPECT_EQ(r.ranges[0].extent, Expr(M));
}

TEST(Stmt, MakeSeqFlattens) {
  Stmt a = eval(i32(1)), b = eval(i32(2)), c = eval(i32(3));
  Stmt inner = make_seq({a, b});
  Stmt s = make_seq({nullptr, inner, c, make_seq({}), nullptr});
  auto* seq = as<SeqStmtNode>(s);
  ASSERT_NE(seq, nullptr);
  ASSERT_EQ(seq->seq.size(), 3u);
  EXPECT_EQ(seq->seq[0], a);
  EXPECT_EQ(seq->seq[1], b);
  EXPECT_EQ(seq->seq[2], c);
  EXPECT_EQ(make_seq({nullptr, a}), a);  // a single statement is not wrapped
  Stmt empty_seq = make_seq({});
  auto* empty = as<SeqStmtNode>(empty_seq);
  ASSERT_NE(empty, nullptr);
  EXPECT_TRUE(empty->seq.empty());
}

TEST(Function, ShapeVars) {
  Var M = make_var("M"), N = make_var("N"), K = make_var("K");
  Buffer a = make_buffer("a", kF32, {M, K}, scope::kGlobal);
  Buffer b = make_buffer("b", kF32, {K, N}, scope::kGlobal, {}, {M, i32(1)});
  PrimFuncNode f;
  f.params = {{a->data, a}, {b->data, b}, {make_var("s"), nullptr}};
  auto sv = shape_vars(f);
  ASSERT_EQ(sv.size(), 3u);
  EXPECT_EQ(sv[0], M);
  EXPECT_EQ(sv[1], K);
  EXPECT_EQ(sv[2], N);
  EXPECT_EQ(f.params[0].name(), "a");
  EXPECT_EQ(f.params[2].name(), "s");
}

// ---------------------------------------------------------------- substitution, visitor, mutator

TEST(Functor, Substitute) {
  Var x = make_var("x"), y = make_var("y"), i = make_var("i");
  Buffer a = make_buffer("a", kF32, {i32(8)}, scope::kGlobal);
  Expr e = mul(add(x, i32(1)), x);
  EXPECT_EQ(to_string(substitute(e, {{x.get(), add(y, i32(2))}})), "(y + 2 + 1) * (y + 2)");
  // Nothing to replace: the same node comes back.
  EXPECT_EQ(substitute(e, {{y.get(), i32(0)}}), e);
  Stmt s = loop(i, x, store(a, load(a, {add(i, x)}), {i}));
  EXPECT_EQ(to_string(substitute(s, {{x.get(), i32(4)}})), "for i in range(4):\n    a[i] = a[i + 4]\n");
}

class VarCounter : public IRVisitor {
 public:
  int vars = 0, loads = 0, buffers = 0;

 protected:
  void visit_var(const VarNode*) override { ++vars; }
  void visit_load(const BufferLoadNode* n) override {
    ++loads;
    IRVisitor::visit_load(n);
  }
  void visit_buffer(const Buffer& b) override {
    ++buffers;
    IRVisitor::visit_buffer(b);
  }
};

TEST(Functor, VisitorReachesEveryExpression) {
  Var n = make_var("n"), i = make_var("i"), t = make_var("t");
  Buffer a = make_buffer("a", kF32, {n}, scope::kGlobal);
  Stmt body = std::make_shared<LetStmtNode>(t, add(i, i32(1)), store(a, load(a, {t}), {i}));
  Stmt s = std::make_shared<IfThenElseNode>(lt(i32(0), n), loop(i, n, body), nullptr);
  VarCounter c;
  c.visit(s);
  // n (cond), n (extent), i (let value), n (store's buffer shape), n (load's buffer shape), t, i (store
  // index)
  EXPECT_EQ(c.vars, 7);
  EXPECT_EQ(c.loads, 1);
  EXPECT_EQ(c.buffers, 2);
  int nodes = 0;
  for_each_expr(s, [&](const ExprNode*) { ++nodes; });
  EXPECT_EQ(nodes, 13);  // the 7 vars, 2 binaries, 1 load, 3 constants (two loop/cond zeros, one 1)
}

class RenameI : public IRMutator {
 public:
  RenameI(const VarNode* from, Expr to) : from_(from), to_(std::move(to)) {}

 protected:
  Expr mutate_var(const Expr& e) override { return e.get() == from_ ? to_ : e; }

 private:
  const VarNode* from_;
  Expr to_;
};

TEST(Functor, MutatorKeepsUnchangedTrees) {
  Var n = make_var("n"), i = make_var("i"), t = make_var("t"), bx = make_var("bx"), k = make_var("k");
  Buffer a = make_buffer("a", kF32, {n}, scope::kGlobal);
  Buffer l = make_buffer("l", kF32, {i32(1)}, scope::kLocalVar);
  Stmt inner = std::make_shared<LetStmtNode>(t, add(i, bx), store(a, call("exp", {load(a, {t})}), {i}));
  Stmt body = make_seq({inner, eval(call("print", {std::make_shared<StringImmNode>("m"), cast(kF32, i)}))});
  Stmt guarded = std::make_shared<IfThenElseNode>(logical_not(lt(i, n)), eval(i32(0)), body);
  Stmt alloc = std::make_shared<AllocateNode>(l, loop(i, n, guarded), Attrs{{"init", Expr(k)}});
  Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{n}, std::vector<Var>{},
                                             std::vector<int64_t>{128}, alloc);
  RenameI none(make_var("other").get(), i32(0));
  EXPECT_EQ(none.mutate(kernel), kernel);

  RenameI bx_to_zero(bx.get(), i32(0));
  Stmt out = bx_to_zero.mutate(kernel);
  EXPECT_NE(out, kernel);
  EXPECT_EQ(to_string(out),
            "with T.Kernel(n, threads=128) as bx:\n"
            "    l = T.alloc_var(\"float32\", init=k)\n"
            "    for i in range(n):\n"
            "        if not i < n:\n"
            "            T.evaluate(0)\n"
            "        else:\n"
            "            t = i + 0\n"
            "            a[i] = T.exp(a[t])\n"
            "            T.print(T.Cast(\"float32\", i), msg=\"m\")\n");
  // Untouched subtrees stay shared.
  auto* new_alloc = as<AllocateNode>(as<KernelNode>(out)->body);
  auto* new_if = as<IfThenElseNode>(as<ForNode>(new_alloc->body)->body);
  EXPECT_EQ(new_if->cond, as<IfThenElseNode>(guarded)->cond);
  EXPECT_EQ(new_if->then_case, as<IfThenElseNode>(guarded)->then_case);
}

// ---------------------------------------------------------------- structural equality and hash

void expect_equal(const Stmt& a, const Stmt& b) {
  EXPECT_TRUE(structural_equal(a, b)) << to_string(a) << "vs\n" << to_string(b);
  EXPECT_EQ(structural_hash(a), structural_hash(b));
}
void expect_not_equal(const Stmt& a, const Stmt& b) {
  EXPECT_FALSE(structural_equal(a, b)) << to_string(a) << "vs\n" << to_string(b);
  EXPECT_NE(structural_hash(a), structural_hash(b));
}

TEST(Structural, AlphaEquivalentLoops) {
  Buffer a = make_buffer("a", kF32, {i32(8), i32(8)}, scope::kGlobal);
  auto nest = [&](const std::string& n1, const std::string& n2) {
    Var i = make_var(n1), j = make_var(n2);
    return loop(i, i32(8), loop(j, i32(8), store(a, make_float(1.0), {i, j})));
  };
  expect_equal(nest("i", "j"), nest("p", "q"));
  // The same names bound in swapped roles differ.
  Var i = make_var("i"), j = make_var("j");
  Stmt ij = loop(i, i32(8), loop(j, i32(8), store(a, make_float(1.0), {i, j})));
  Stmt ji = loop(i, i32(8), loop(j, i32(8), store(a, make_float(1.0), {j, i})));
  expect_not_equal(ij, ji);
  // Reusing one variable for both loops is the same program as two fresh ones.
  Stmt reused = make_seq({loop(i, i32(8), store(a, make_float(0.0), {i, i})),
                          loop(i, i32(8), store(a, make_float(0.0), {i, i}))});
  Var p = make_var("p"), q = make_var("q");
  Stmt fresh = make_seq({loop(p, i32(8), store(a, make_float(0.0), {p, p})),
                         loop(q, i32(8), store(a, make_float(0.0), {q, q}))});
  expect_equal(reused, fresh);
  // Shadowing: the inner use refers to the inner loop.
  Stmt shadow = loop(i, i32(8), loop(i, i32(8), store(a, make_float(0.0), {i, i})));
  Stmt outer_use = loop(p, i32(8), loop(q, i32(8), store(a, make_float(0.0), {p, p})));
  Stmt inner_use = loop(p, i32(8), loop(q, i32(8), store(a, make_float(0.0), {q, q})));
  expect_equal(shadow, inner_use);
  expect_not_equal(shadow, outer_use);
  // Bound variables must agree in dtype and loop kind.
  Var w = make_var("w", kI64);
  expect_not_equal(loop(i, i32(8), eval(i)), loop(w, i32(8), eval(w)));
  expect_not_equal(loop(i, i32(8), eval(i)), loop(i, i32(8), eval(i), ForKind::Unrolled));
}

TEST(Structural, ConstantsDtypesOps) {
  Var x = make_var("x");
  EXPECT_TRUE(structural_equal(add(x, i32(1)), add(x, i32(1))));
  EXPECT_EQ(structural_hash(add(x, i32(1))), structural_hash(add(x, i32(1))));
  EXPECT_FALSE(structural_equal(add(x, i32(1)), add(x, i32(2))));
  EXPECT_NE(structural_hash(add(x, i32(1))), structural_hash(add(x, i32(2))));
  EXPECT_FALSE(structural_equal(add(x, i32(1)), sub(x, i32(1))));
  EXPECT_NE(structural_hash(add(x, i32(1))), structural_hash(sub(x, i32(1))));
  EXPECT_FALSE(structural_equal(make_int(1), make_int(1, kI64)));
  EXPECT_NE(structural_hash(make_int(1)), structural_hash(make_int(1, kI64)));
  EXPECT_FALSE(structural_equal(make_float(1.0), make_float(1.0, kF16)));
  EXPECT_FALSE(structural_equal(call("exp", {make_var("f", kF32)}), call("log", {make_var("f", kF32)})));
  Expr nan1 = make_float(std::nan("")), nan2 = make_float(-std::nan("1"));
  EXPECT_TRUE(structural_equal(nan1, nan2));
  EXPECT_EQ(structural_hash(nan1), structural_hash(nan2));
  EXPECT_FALSE(structural_equal(make_float(0.0), make_float(-0.0)));
  EXPECT_TRUE(structural_equal(make_float(0.1), make_float(0.1)));
  auto s = [](const char* v) { return Expr(std::make_shared<StringImmNode>(v)); };
  EXPECT_TRUE(structural_equal(s("ab"), s("ab")));
  EXPECT_FALSE(structural_equal(s("ab"), s("ac")));
  // Spans do not matter.
  Span sp{Span::intern("k.py"), 3, 1};
  EXPECT_TRUE(structural_equal(make_int(5, kI32, sp), make_int(5)));
  EXPECT_EQ(structural_hash(make_int(5, kI32, sp)), structural_hash(make_int(5)));
  EXPECT_FALSE(structural_equal(Expr(), make_int(5)));
  EXPECT_TRUE(structural_equal(Expr(), Expr()));
}

TEST(Structural, FreeVarsByIdentity) {
  Var x1 = make_var("x"), x2 = make_var("x");
  EXPECT_TRUE(structural_equal(Expr(x1), Expr(x1)));
  EXPECT_FALSE(structural_equal(Expr(x1), Expr(x2)));
  EXPECT_FALSE(structural_equal(add(x1, x1), add(x1, x2)));
  // A free variable never matches a bound one.
  Var i = make_var("i");
  Buffer a = make_buffer("a", kF32, {i32(8)}, scope::kGlobal);
  expect_not_equal(loop(i, i32(8), store(a, make_float(0.0), {i})),
                   loop(make_var("j"), i32(8), store(a, make_float(0.0), {i})));
}

TEST(Structural, BuffersAndAttrs) {
  Var i = make_var("i");
  auto program = [&](int64_t extent, const char* scope_name, DataType t, int64_t stages) {
    Buffer s = make_buffer("s", t, {i32(extent)}, scope_name);
    Stmt body = loop(i, i32(extent), store(s, cast(t, make_float(0.0)), {i}));
    Attrs attrs{{"num_stages", stages}, {"order", std::vector<int64_t>{0, 1}}};
    Stmt pipe = std::make_shared<ForNode>(make_var("k"), i32(0), i32(4), ForKind::Pipelined, body, attrs);
    return Stmt(std::make_shared<AllocateNode>(s, pipe));
  };
  expect_equal(program(16, scope::kShared, kF32, 2), program(16, scope::kShared, kF32, 2));
  expect_not_equal(program(16, scope::kShared, kF32, 2), program(32, scope::kShared, kF32, 2));
  expect_not_equal(program(16, scope::kShared, kF32, 2), program(16, scope::kFragment, kF32, 2));
  expect_not_equal(program(16, scope::kShared, kF32, 2), program(16, scope::kShared, kF16, 2));
  expect_not_equal(program(16, scope::kShared, kF32, 2), program(16, scope::kShared, kF32, 3));

  // Buffers met outside an allocation correspond one to one.
  Buffer a = make_buffer("a", kF32, {i32(4)}, scope::kGlobal);
  Buffer b = make_buffer("b", kF32, {i32(4)}, scope::kGlobal);
  Buffer c = make_buffer("c", kF32, {i32(4)}, scope::kGlobal);
  Stmt ab = store(a, load(b, {i32(0)}), {i32(0)});
  Stmt ca = store(c, load(a, {i32(0)}), {i32(0)});
  Stmt aa = store(a, load(a, {i32(0)}), {i32(0)});
  expect_equal(ab, ca);
  expect_not_equal(ab, aa);
  Stmt copy1 = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{full_region(a), full_region(b)},
                                            std::vector<Expr>{}, Attrs{});
  Stmt copy2 = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{full_region(a), full_region(a)},
                                            std::vector<Expr>{}, Attrs{});
  Stmt copy3 = std::make_shared<TileOpNode>("copy", std::vector<BufferRegion>{full_region(a), full_region(b)},
                                            std::vector<Expr>{}, Attrs{{"x", 1.5}});
  expect_not_equal(copy1, copy2);
  expect_not_equal(copy1, copy3);
}

TEST(Structural, KernelsAndFunctions) {
  auto build = [](int64_t tile, const char* var_name) {
    Var M = make_var("M");
    Buffer A = make_buffer("A", kF32, {M}, scope::kGlobal);
    Var bx = make_var(var_name), tx = make_var("tx");
    Stmt st = store(A, make_float(1.0), {add(mul(bx, i32(tile)), tx)});
    Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx},
                                               std::vector<Expr>{floordiv(add(M, i32(tile - 1)), i32(tile))},
                                               std::vector<Var>{tx}, std::vector<int64_t>{tile}, st);
    auto f = std::make_shared<PrimFuncNode>();
    f->name = "main";
    f->params = {{A->data, A}, {make_var("alpha", kF32), nullptr}};
    f->body = kernel;
    return PrimFunc(f);
  };
  PrimFunc f1 = build(128, "bx"), f2 = build(128, "block"), f3 = build(64, "bx");
  EXPECT_TRUE(structural_equal(f1, f2));
  EXPECT_EQ(structural_hash(f1), structural_hash(f2));
  EXPECT_FALSE(structural_equal(f1, f3));
  EXPECT_NE(structural_hash(f1), structural_hash(f3));
  EXPECT_TRUE(structural_equal(f1, f1));
  // The kernel bodies alone hold free shape variables, so they differ by identity.
  EXPECT_FALSE(structural_equal(f1->body, f2->body));

  auto renamed = std::make_shared<PrimFuncNode>(*f1);
  renamed->name = "other";
  EXPECT_FALSE(structural_equal(f1, PrimFunc(renamed)));
  auto with_attrs = std::make_shared<PrimFuncNode>(*f1);
  with_attrs->attrs = {{"target", std::string("cuda")}};
  EXPECT_FALSE(structural_equal(f1, PrimFunc(with_attrs)));
  EXPECT_NE(structural_hash(f1), structural_hash(PrimFunc(with_attrs)));
  auto scalar_dtype = std::make_shared<PrimFuncNode>(*f1);
  scalar_dtype->params[1].var = make_var("alpha", kF16);
  EXPECT_FALSE(structural_equal(f1, PrimFunc(scalar_dtype)));
}

TEST(Structural, LetAndHashSpread) {
  Var t = make_var("t"), u = make_var("u"), x = make_var("x");
  Stmt l1 = std::make_shared<LetStmtNode>(t, add(x, i32(1)), eval(mul(t, t)));
  Stmt l2 = std::make_shared<LetStmtNode>(u, add(x, i32(1)), eval(mul(u, u)));
  Stmt l3 = std::make_shared<LetStmtNode>(u, add(x, i32(1)), eval(mul(u, x)));
  expect_equal(l1, l2);
  expect_not_equal(l1, l3);
  // Small constants give well spread hashes.
  std::set<uint64_t> seen;
  for (int v = 0; v < 1000; ++v) seen.insert(structural_hash(make_int(v)));
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace tl
