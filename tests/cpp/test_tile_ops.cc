// Tile operators: user-error checks, and lowering checked by executing the lowered IR with
// a small interpreter against references computed directly in C++.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/op.h"
#include "transform/check_tile_ops.h"
#include "transform/lower_tile_ops.h"

namespace tl {
namespace {

// ---------------------------------------------------------------- interpreter

// Executes loop-level IR. Memory is one vector of doubles per buffer; an access outside a
// buffer's shape is a test failure (it is what the bounds guards must prevent).
class Interpreter {
 public:
  std::map<const BufferNode*, std::vector<double>> mem;
  std::map<const VarNode*, double> env;
  std::vector<std::string> printed;

  void alloc(const Buffer& b, double fill = 0) { mem[b.get()].assign(size_of(b), fill); }
  std::vector<double>& data(const Buffer& b) { return mem.at(b.get()); }

  double eval(const Expr& e) {
    switch (e->kind) {
      case ExprKind::IntImm:
        return double(as<IntImmNode>(e)->value);
      case ExprKind::FloatImm:
        return as<FloatImmNode>(e)->value;
      case ExprKind::Var: {
        auto it = env.find(as<VarNode>(e));
        if (it == env.end()) throw std::runtime_error("unbound variable " + as<VarNode>(e)->name);
        return it->second;
      }
      case ExprKind::Binary:
        return eval_binary(as<BinaryNode>(e));
      case ExprKind::Not:
        return eval(as<NotNode>(e)->a) == 0;
      case ExprKind::Select: {
        // Only the chosen side is evaluated: the other may be an out-of-bounds load.
        auto* n = as<SelectNode>(e);
        return eval(n->cond) != 0 ? eval(n->true_value) : eval(n->false_value);
      }
      case ExprKind::Cast:
        return convert(e->dtype, eval(as<CastNode>(e)->value));
      case ExprKind::BufferLoad: {
        auto* n = as<BufferLoadNode>(e);
        return mem_at(n->buffer, n->indices);
      }
      case ExprKind::Call: {
        auto* n = as<CallNode>(e);
        if (n->op == "abs") return std::fabs(eval(n->args.at(0)));
        throw std::runtime_error("call to " + n->op + " in an expression");
      }
      default:
        throw std::runtime_error("unsupported expression kind");
    }
  }

  void exec(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (auto& c : as<SeqStmtNode>(s)->seq) exec(c);
        return;
      case StmtKind::For: {
        auto* n = as<ForNode>(s);
        double lo = eval(n->min), ext = eval(n->extent);
        for (double i = lo; i < lo + ext; ++i) {
          env[n->var.get()] = i;
          exec(n->body);
        }
        env.erase(n->var.get());
        return;
      }
      case StmtKind::IfThenElse: {
        auto* n = as<IfThenElseNode>(s);
        if (eval(n->cond) != 0)
          exec(n->then_case);
        else
          exec(n->else_case);
        return;
      }
      case StmtKind::BufferStore: {
        auto* n = as<BufferStoreNode>(s);
        double v = convert(n->buffer->dtype, eval(n->value));
        mem_at(n->buffer, n->indices) = v;
        return;
      }
      case StmtKind::LetStmt: {
        auto* n = as<LetStmtNode>(s);
        env[n->var.get()] = eval(n->value);
        exec(n->body);
        env.erase(n->var.get());
        return;
      }
      case StmtKind::Evaluate:
        return exec_call(as<EvaluateNode>(s)->value);
      case StmtKind::Allocate: {
        auto* n = as<AllocateNode>(s);
        if (mem.count(n->buffer.get()))
          throw std::runtime_error("buffer allocated twice: " + n->buffer->name);
        alloc(n->buffer, std::nan(""));  // uninitialised: a read before a write shows as NaN
        exec(n->body);
        mem.erase(n->buffer.get());
        return;
      }
      case StmtKind::Kernel: {
        auto* n = as<KernelNode>(s);
        run_blocks(n, 0);
        return;
      }
      case StmtKind::TileOp:
        throw std::runtime_error("tile op left after lowering: " + as<TileOpNode>(s)->op);
    }
  }

 private:
  size_t size_of(const Buffer& b) {
    size_t n = 1;
    for (auto& e : b->shape) n *= size_t(eval(e));
    return n;
  }

  double& mem_at(const Buffer& b, const std::vector<Expr>& indices) {
    auto it = mem.find(b.get());
    if (it == mem.end()) throw std::runtime_error("unknown buffer " + b->name);
    if (indices.size() != b->shape.size()) throw std::runtime_error("rank mismatch on " + b->name);
    size_t offset = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      double i = eval(indices[d]), extent = eval(b->shape[d]);
      if (i < 0 || i >= extent)
        throw std::runtime_error("out-of-bounds access to " + b->name + " in dimension " + std::to_string(d) +
                                 ": " + std::to_string(int64_t(i)));
      offset = offset * size_t(extent) + size_t(i);
    }
    return it->second.at(offset);
  }

  static double convert(DataType t, double v) {
    if (t.is_bool()) return v != 0;
    if (t.is_integer()) return std::trunc(v);
    return v;
  }

  double eval_binary(const BinaryNode* n) {
    double a = eval(n->a), b = eval(n->b);
    bool integer = n->a->dtype.is_integer();
    switch (n->op) {
      case BinaryOp::Add:
        return a + b;
      case BinaryOp::Sub:
        return a - b;
      case BinaryOp::Mul:
        return a * b;
      case BinaryOp::Div:
        return integer ? std::trunc(a / b) : a / b;
      case BinaryOp::Mod:
        return std::fmod(a, b);
      case BinaryOp::FloorDiv:
        return std::floor(a / b);
      case BinaryOp::FloorMod:
        return a - std::floor(a / b) * b;
      case BinaryOp::Min:
        return std::min(a, b);
      case BinaryOp::Max:
        return std::max(a, b);
      case BinaryOp::EQ:
        return a == b;
      case BinaryOp::NE:
        return a != b;
      case BinaryOp::LT:
        return a < b;
      case BinaryOp::LE:
        return a <= b;
      case BinaryOp::GT:
        return a > b;
      case BinaryOp::GE:
        return a >= b;
      case BinaryOp::And:
        return a != 0 && b != 0;
      case BinaryOp::Or:
        return a != 0 || b != 0;
    }
    return 0;
  }

  void exec_call(const Expr& e) {
    auto* call = as<CallNode>(e);
    if (!call) throw std::runtime_error("Evaluate of a non-call");
    if (call->op == "atomic_add" || call->op == "atomic_max" || call->op == "atomic_min") {
      auto* target = as<BufferLoadNode>(call->args.at(0));
      if (!target) throw std::runtime_error("atomic without an address");
      double& slot = mem_at(target->buffer, target->indices);
      double v = eval(call->args.at(1));
      slot = call->op == "atomic_add"   ? slot + v
             : call->op == "atomic_max" ? std::max(slot, v)
                                        : std::min(slot, v);
      return;
    }
    if (call->op == "print") {
      std::string line;
      for (auto& a : call->args) {
        if (auto* str = as<StringImmNode>(a))
          line += str->value;
        else
          line += std::to_string(int64_t(eval(a)));
      }
      printed.push_back(line);
      return;
    }
    throw std::runtime_error("unsupported call " + call->op);
  }

  void run_blocks(const KernelNode* n, size_t d) {
    if (d == n->block_vars.size()) {
      exec(n->body);
      return;
    }
    double extent = eval(n->grid[d]);
    for (double b = 0; b < extent; ++b) {
      env[n->block_vars[d].get()] = b;
      run_blocks(n, d + 1);
    }
    env.erase(n->block_vars[d].get());
  }
};

// ---------------------------------------------------------------- building IR

const DataType f32 = DataType::Float(32);
const DataType i32 = DataType::Int(32);

Expr c(int64_t v) { return make_int(v); }

std::vector<Expr> dims(std::initializer_list<int64_t> shape) {
  std::vector<Expr> out;
  for (auto s : shape) out.push_back(c(s));
  return out;
}

Buffer global(const std::string& name, std::vector<Expr> shape, DataType t = f32) {
  return make_buffer(name, t, std::move(shape), scope::kGlobal);
}
Buffer shared(const std::string& name, std::vector<Expr> shape, DataType t = f32) {
  return make_buffer(name, t, std::move(shape), scope::kShared);
}
Buffer fragment(const std::string& name, std::vector<Expr> shape, DataType t = f32) {
  return make_buffer(name, t, std::move(shape), scope::kFragment);
}

// A region from {min, extent} pairs.
BufferRegion region(const Buffer& b, std::vector<std::pair<Expr, Expr>> ranges) {
  BufferRegion r{b, {}, {}};
  for (auto& [mn, ext] : ranges) r.ranges.push_back({mn, ext});
  return r;
}
BufferRegion full(const Buffer& b) { return full_region(b); }

Span test_span() { return Span{Span::intern("test_kernel.py"), 7, 5}; }

Stmt tile_op(const std::string& op, std::vector<BufferRegion> regions, Attrs attrs = {},
             std::vector<Expr> args = {}) {
  return std::make_shared<TileOpNode>(op, std::move(regions), std::move(args), std::move(attrs), test_span());
}

PrimFunc make_func(std::vector<Buffer> params, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = "kernel";
  for (auto& b : params) f->params.push_back({b->data, b});
  f->body = std::move(body);
  return f;
}

bool contains_tile_op(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_tile_op(const TileOpNode*) override { found = true; }
  } finder;
  finder.visit(s);
  return finder.found;
}

// Counts bounds guards (IfThenElse statements and Select expressions) in s.
int count_guards(const Stmt& s) {
  struct Counter : IRVisitor {
    int n = 0;
    void visit_if(const IfThenElseNode* node) override {
      ++n;
      IRVisitor::visit_if(node);
    }
    void visit_select(const SelectNode* node) override {
      ++n;
      IRVisitor::visit_select(node);
    }
  } counter;
  counter.visit(s);
  return counter.n;
}

// Runs the checks and the lowering as the CPU pipeline does; fails the test on a tile op left.
PrimFunc lower(const PrimFunc& f) {
  PrimFunc checked = check_tile_ops(f);
  PrimFunc lowered = lower_tile_ops(checked, Target{});
  EXPECT_FALSE(contains_tile_op(lowered->body));
  return lowered;
}

std::vector<double> random_values(size_t n, int seed, int lo = -5, int hi = 5) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<double> out(n);
  for (auto& v : out) v = dist(gen);  // small integers: sums are exact in any order
  return out;
}

// Expects a CompileError of `kind` whose message contains every one of `words`.
void expect_error(const PrimFunc& f, ErrorKind kind, std::vector<std::string> words) {
  try {
    check_tile_ops(f);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    EXPECT_EQ(e.span().line, 7) << "error should point at the tile op";
    for (auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in: " << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

// ---------------------------------------------------------------- copy

TEST(TileOpsCopy, OffsetsAndTailRead) {
  // A[4:12, 3:11] from a 10 x 12 tensor: rows 10 and 11 lie past the end and read as 0.
  Buffer A = global("A", dims({10, 12}));
  Buffer S = shared("A_shared", dims({8, 8}));
  auto f = make_func({A}, tile_op("copy", {region(A, {{c(4), c(8)}, {c(3), c(8)}}), full(S)}));
  PrimFunc low = lower(f);
  EXPECT_GT(count_guards(low->body), 0);
  Interpreter in;
  in.alloc(A);
  in.alloc(S, -99);
  in.data(A) = random_values(120, 1);
  in.exec(low->body);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = 4 + i < 10 ? in.data(A)[(4 + i) * 12 + 3 + j] : 0;
      EXPECT_EQ(in.data(S)[i * 8 + j], want) << i << "," << j;
    }
}

TEST(TileOpsCopy, TailWriteSkipped) {
  Buffer S = shared("S", dims({4, 4}));
  Buffer B = global("B", dims({6, 6}));
  auto f = make_func({B}, tile_op("copy", {full(S), region(B, {{c(4), c(4)}, {c(4), c(4)}})}));
  PrimFunc low = lower(f);
  Interpreter in;
  in.alloc(S);
  in.alloc(B, -1);
  in.data(S) = random_values(16, 2);
  in.exec(low->body);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double want = i >= 4 && j >= 4 ? in.data(S)[(i - 4) * 4 + (j - 4)] : -1;
      EXPECT_EQ(in.data(B)[i * 6 + j], want);
    }
}

TEST(TileOpsCopy, BlockTilesRoundTripWithTail) {
  // Each block copies rows [bx*8, bx*8 + 8) of a 20-row tensor through shared memory.
  Buffer A = global("A", dims({20, 5}));
  Buffer B = global("B", dims({20, 5}));
  Buffer S = shared("S", dims({8, 5}));
  Var bx = make_var("bx");
  Expr row = mul(bx, c(8));
  Stmt body = make_seq({tile_op("copy", {region(A, {{row, c(8)}, {c(0), c(5)}}), full(S)}),
                        tile_op("copy", {full(S), region(B, {{row, c(8)}, {c(0), c(5)}})})});
  Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{c(3)},
                                             std::vector<Var>{}, std::vector<int64_t>{128}, body);
  PrimFunc low = lower(make_func({A, B}, kernel));
  Interpreter in;
  in.alloc(A);
  in.alloc(B, -1);
  in.alloc(S);
  in.data(A) = random_values(100, 3);
  in.exec(low->body);
  EXPECT_EQ(in.data(B), in.data(A));
}

TEST(TileOpsCopy, SymbolicShapeIsGuarded) {
  Var n = make_var("n");
  Buffer A = global("A", {n});
  Buffer S = shared("S", dims({16}));
  PrimFunc low = lower(make_func({A}, tile_op("copy", {region(A, {{c(0), c(16)}}), full(S)})));
  Interpreter in;
  in.env[n.get()] = 10;
  in.alloc(A);
  in.alloc(S, -1);
  in.data(A) = random_values(10, 4, 1, 9);
  in.exec(low->body);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(in.data(S)[i], i < 10 ? in.data(A)[i] : 0);
}

TEST(TileOpsCopy, FourDGlobalSliceToTwoDShared) {
  // G[1, 0:8, 2, 0:16] -> S (8 x 16): unit dims are squeezed away.
  Buffer G = global("G", dims({2, 8, 3, 16}));
  Buffer S = shared("S", dims({8, 16}));
  auto f = make_func(
      {G}, tile_op("copy", {region(G, {{c(1), c(1)}, {c(0), c(8)}, {c(2), c(1)}, {c(0), c(16)}}), full(S)}));
  PrimFunc low = lower(f);
  EXPECT_EQ(count_guards(low->body), 0) << "a constant in-bounds region needs no guard";
  Interpreter in;
  in.alloc(G);
  in.alloc(S);
  in.data(G) = random_values(2 * 8 * 3 * 16, 5);
  in.exec(low->body);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j)
      EXPECT_EQ(in.data(S)[i * 16 + j], in.data(G)[((1 * 8 + i) * 3 + 2) * 16 + j]);
}

TEST(TileOpsCopy, TwoDSharedToThreeDGlobalWithCast) {
  Buffer S = shared("S", dims({4, 6}));
  Buffer G = global("G", dims({3, 4, 6}), i32);
  auto f = make_func({G}, tile_op("copy", {full(S), region(G, {{c(2), c(1)}, {c(0), c(4)}, {c(0), c(6)}})}));
  PrimFunc low = lower(f);
  Interpreter in;
  in.alloc(S);
  in.alloc(G, 0);
  for (int i = 0; i < 24; ++i) in.data(S)[i] = i * 0.5 + 0.25;
  in.exec(low->body);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(in.data(G)[2 * 24 + i], std::trunc(i * 0.5 + 0.25));
}

TEST(TileOpsCopy, SharedToSharedHasNoGuardAndParallelLoops) {
  Buffer S = shared("S", dims({4, 8}));
  Buffer T = fragment("T", dims({4, 8}));
  PrimFunc low = lower(make_func({}, tile_op("copy", {full(S), full(T)})));
  EXPECT_EQ(count_guards(low->body), 0);
  auto* outer = as<ForNode>(low->body);
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->for_kind, ForKind::Parallel);
  EXPECT_EQ(outer->span.line, 7);
  auto* inner = as<ForNode>(outer->body);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->for_kind, ForKind::Parallel);
  EXPECT_EQ(inner->var->name, "i1");
}

// ---------------------------------------------------------------- fill

TEST(TileOpsFill, PartialRegion) {
  Buffer S = shared("S", dims({4, 6}));
  auto f = make_func({}, tile_op("fill", {region(S, {{c(1), c(2)}, {c(0), c(6)}})}, {}, {make_float(7.5)}));
  PrimFunc low = lower(f);
  Interpreter in;
  in.alloc(S, -1);
  in.exec(low->body);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(in.data(S)[i * 6 + j], i == 1 || i == 2 ? 7.5 : -1);
}

TEST(TileOpsFill, GlobalTailAndCast) {
  Buffer G = global("G", dims({5}), i32);
  auto f = make_func({G}, tile_op("fill", {region(G, {{c(3), c(4)}})}, {}, {make_float(2.75)}));
  PrimFunc low = lower(f);
  Interpreter in;
  in.alloc(G, -1);
  in.exec(low->body);
  EXPECT_EQ(in.data(G), (std::vector<double>{-1, -1, -1, 2, 2}));
}

// ---------------------------------------------------------------- gemm

struct GemmCase {
  bool trans_a, trans_b, clear;
};

class TileOpsGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(TileOpsGemm, MatchesReference) {
  const int M = 4, N = 5, K = 3;
  GemmCase p = GetParam();
  // A is stored in a 3-D pipelined buffer: the operand is the slice A_shared[1, :, :].
  Buffer A = shared("A_shared", p.trans_a ? dims({2, K, M}) : dims({2, M, K}), DataType::Float(16));
  Buffer B = shared("B_shared", p.trans_b ? dims({N, K}) : dims({K, N}), DataType::Float(16));
  Buffer C = fragment("C_local", dims({M, N}));
  BufferRegion ra = region(A, {{c(1), c(1)}, {c(0), A->shape[1]}, {c(0), A->shape[2]}});
  Attrs attrs = {{"transpose_A", int64_t(p.trans_a)},
                 {"transpose_B", int64_t(p.trans_b)},
                 {"clear_accum", int64_t(p.clear)}};
  PrimFunc low = lower(make_func({}, tile_op("gemm", {ra, full(B), full(C)}, attrs)));
  Interpreter in;
  in.alloc(A);
  in.alloc(B);
  in.alloc(C);
  in.data(A) = random_values(2 * M * K, 10);
  in.data(B) = random_values(K * N, 11);
  in.data(C) = random_values(M * N, 12);
  std::vector<double> want = in.data(C);
  auto a = [&](int i, int k) { return in.data(A)[M * K + (p.trans_a ? k * M + i : i * K + k)]; };
  auto b = [&](int k, int j) { return in.data(B)[p.trans_b ? j * K + k : k * N + j]; };
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = p.clear ? 0 : want[i * N + j];
      for (int k = 0; k < K; ++k) sum += a(i, k) * b(k, j);
      want[i * N + j] = sum;
    }
  in.exec(low->body);
  EXPECT_EQ(in.data(C), want);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, TileOpsGemm,
                         ::testing::Values(GemmCase{false, false, false}, GemmCase{false, false, true},
                                           GemmCase{false, true, false}, GemmCase{false, true, true},
                                           GemmCase{true, false, false}, GemmCase{true, false, true},
                                           GemmCase{true, true, false}, GemmCase{true, true, true}));

// ---------------------------------------------------------------- reduce

struct ReduceCase {
  std::string type;
  int dim;
  bool clear;
  bool keep_dim;
};

class TileOpsReduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(TileOpsReduce, MatchesReference) {
  const int R = 4, C = 6;
  ReduceCase p = GetParam();
  Buffer src = fragment("A_local", dims({R, C}));
  int out_n = p.dim == 0 ? C : R;
  Buffer dst = p.keep_dim ? fragment("B_local", p.dim == 0 ? dims({1, C}) : dims({R, 1}))
                          : fragment("B_local", dims({out_n}));
  Attrs attrs = {{"type", p.type}, {"dim", int64_t(p.dim)}, {"clear", int64_t(p.clear)}};
  PrimFunc low = lower(make_func({}, tile_op("reduce", {full(src), full(dst)}, attrs)));
  Interpreter in;
  in.alloc(src);
  in.alloc(dst);
  in.data(src) = random_values(R * C, 20, -9, 9);
  in.data(dst) = random_values(out_n, 21, -9, 9);
  std::vector<double> want(out_n);
  for (int o = 0; o < out_n; ++o) {
    int n = p.dim == 0 ? R : C;
    double acc = p.type == "max" ? -INFINITY : p.type == "min" ? INFINITY : 0;
    for (int r = 0; r < n; ++r) {
      double x = p.dim == 0 ? in.data(src)[r * C + o] : in.data(src)[o * C + r];
      if (p.type == "abssum" || p.type == "absmax") x = std::fabs(x);
      if (p.type == "sum" || p.type == "abssum")
        acc += x;
      else if (p.type == "min")
        acc = std::min(acc, x);
      else
        acc = std::max(acc, x);
    }
    double old = in.data(dst)[o];
    if (!p.clear) {
      if (p.type == "sum" || p.type == "abssum")
        acc += old;
      else if (p.type == "min")
        acc = std::min(acc, old);
      else
        acc = std::max(acc, old);
    }
    want[o] = acc;
  }
  in.exec(low->body);
  EXPECT_EQ(in.data(dst), want);
}

std::vector<ReduceCase> reduce_cases() {
  std::vector<ReduceCase> out;
  for (std::string type : {"sum", "max", "min", "abssum", "absmax"})
    for (int dim : {0, 1})
      for (bool clear : {true, false}) out.push_back({type, dim, clear, false});
  out.push_back({"max", 1, true, true});
  out.push_back({"sum", 0, false, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, TileOpsReduce, ::testing::ValuesIn(reduce_cases()));

TEST(TileOpsReduceIdentity, IntegerMaxStartsAtLowest) {
  // All elements negative: an identity of 0 would give a wrong maximum.
  Buffer src = fragment("A_local", dims({3}), i32);
  Buffer dst = fragment("B_local", dims({1}), i32);
  Attrs attrs = {{"type", std::string("max")}, {"dim", int64_t(0)}, {"clear", int64_t(1)}};
  PrimFunc low = lower(make_func({}, tile_op("reduce", {full(src), full(dst)}, attrs)));
  Interpreter in;
  in.alloc(src);
  in.alloc(dst);
  in.data(src) = {-7, -3, -5};
  in.exec(low->body);
  EXPECT_EQ(in.data(dst)[0], -3);
}

TEST(TileOpsReduceIdentity, GlobalTailTakesNoPart) {
  // Rows [0, 4) of a 3-row tensor: the missing row must not count as a 0 in the maximum.
  Buffer G = global("G", dims({3, 2}));
  Buffer dst = fragment("M_local", dims({2}));
  Attrs attrs = {{"type", std::string("max")}, {"dim", int64_t(0)}, {"clear", int64_t(1)}};
  auto f = make_func({G}, tile_op("reduce", {region(G, {{c(0), c(4)}, {c(0), c(2)}}), full(dst)}, attrs));
  PrimFunc low = lower(f);
  Interpreter in;
  in.alloc(G);
  in.alloc(dst);
  in.data(G) = {-4, -1, -2, -6, -3, -5};
  in.exec(low->body);
  EXPECT_EQ(in.data(dst), (std::vector<double>{-2, -1}));
}

TEST(TileOpsKernel, TiledMatmulWithTailsAndPipelinedK) {
  // C = A @ B with 4 x 4 output tiles and a K step of 8: every dimension has a tail.
  const int M = 10, N = 7, K = 12, bm = 4, bn = 4, bk = 8;
  Buffer A = global("A", dims({M, K}), DataType::Float(16));
  Buffer B = global("B", dims({K, N}), DataType::Float(16));
  Buffer C = global("C", dims({M, N}));
  Buffer As = shared("A_shared", dims({bm, bk}), DataType::Float(16));
  Buffer Bs = shared("B_shared", dims({bk, bn}), DataType::Float(16));
  Buffer Cl = fragment("C_local", dims({bm, bn}));
  Var bx = make_var("bx"), by = make_var("by"), ko = make_var("ko");
  Stmt k_body =
      make_seq({tile_op("copy", {region(A, {{mul(by, c(bm)), c(bm)}, {mul(ko, c(bk)), c(bk)}}), full(As)}),
                tile_op("copy", {region(B, {{mul(ko, c(bk)), c(bk)}, {mul(bx, c(bn)), c(bn)}}), full(Bs)}),
                tile_op("gemm", {full(As), full(Bs), full(Cl)})});
  Stmt k_loop = std::make_shared<ForNode>(ko, c(0), c((K + bk - 1) / bk), ForKind::Pipelined, k_body,
                                          Attrs{{"num_stages", int64_t(2)}});
  Stmt body =
      make_seq({tile_op("fill", {full(Cl)}, {}, {c(0)}), k_loop,
                tile_op("copy", {full(Cl), region(C, {{mul(by, c(bm)), c(bm)}, {mul(bx, c(bn)), c(bn)}})})});
  Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx, by},
                                             std::vector<Expr>{c((N + bn - 1) / bn), c((M + bm - 1) / bm)},
                                             std::vector<Var>{}, std::vector<int64_t>{128}, body);
  PrimFunc low = lower(make_func({A, B, C}, kernel));
  Interpreter in;
  for (auto& b : {A, B, C, As, Bs, Cl}) in.alloc(b);
  in.data(A) = random_values(M * K, 60);
  in.data(B) = random_values(K * N, 61);
  std::vector<double> want(M * N, 0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) want[i * N + j] += in.data(A)[i * K + k] * in.data(B)[k * N + j];
  in.exec(low->body);
  EXPECT_EQ(in.data(C), want);
}

// ---------------------------------------------------------------- cumsum

struct CumsumCase {
  int dim;
  bool reverse;
  bool in_place;
};

class TileOpsCumsum : public ::testing::TestWithParam<CumsumCase> {};

TEST_P(TileOpsCumsum, MatchesReference) {
  const int R = 3, C = 5;
  CumsumCase p = GetParam();
  Buffer src = shared("S", dims({R, C}));
  Buffer dst = p.in_place ? src : shared("D", dims({R, C}));
  Attrs attrs = {{"dim", int64_t(p.dim)}, {"reverse", int64_t(p.reverse)}};
  PrimFunc low = lower(make_func({}, tile_op("cumsum", {full(src), full(dst)}, attrs)));
  Interpreter in;
  in.alloc(src);
  if (!p.in_place) in.alloc(dst, -1);
  in.data(src) = random_values(R * C, 30);
  std::vector<double> x = in.data(src), want(R * C);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      double sum = 0;
      for (int i2 = 0; i2 < R; ++i2)
        for (int j2 = 0; j2 < C; ++j2) {
          bool same_line = p.dim == 0 ? j2 == j : i2 == i;
          int along = p.dim == 0 ? i2 : j2, here = p.dim == 0 ? i : j;
          if (same_line && (p.reverse ? along >= here : along <= here)) sum += x[i2 * C + j2];
        }
      want[i * C + j] = sum;
    }
  in.exec(low->body);
  EXPECT_EQ(in.data(dst), want);
}

INSTANTIATE_TEST_SUITE_P(AllDims, TileOpsCumsum,
                         ::testing::Values(CumsumCase{0, false, false}, CumsumCase{0, true, false},
                                           CumsumCase{1, false, false}, CumsumCase{1, true, false},
                                           CumsumCase{1, false, true}, CumsumCase{0, true, true}));

// ---------------------------------------------------------------- atomic, print, pipelined

TEST(TileOpsAtomic, TileFormWithTail) {
  // dst G[2:6, 0:4] of a 5 x 4 tensor: the last row of the tile is past the end.
  Buffer G = global("G", dims({5, 4}));
  Buffer S = fragment("S", dims({4, 4}));
  BufferRegion dst = region(G, {{c(2), c(4)}, {c(0), c(4)}});
  Stmt body =
      make_seq({tile_op("atomic_add", {dst, full(S)}), tile_op("atomic_add", {dst, full(S)}),
                tile_op("atomic_max",
                        {region(G, {{c(0), c(1)}, {c(0), c(4)}}), region(S, {{c(0), c(1)}, {c(0), c(4)}})}),
                tile_op("atomic_min",
                        {region(G, {{c(1), c(1)}, {c(0), c(4)}}), region(S, {{c(1), c(1)}, {c(0), c(4)}})})});
  PrimFunc low = lower(make_func({G}, body));
  Interpreter in;
  in.alloc(G);
  in.alloc(S);
  in.data(G) = random_values(20, 40);
  in.data(S) = random_values(16, 41);
  std::vector<double> want = in.data(G), s = in.data(S);
  for (int i = 2; i < 5; ++i)
    for (int j = 0; j < 4; ++j) want[i * 4 + j] += 2 * s[(i - 2) * 4 + j];
  for (int j = 0; j < 4; ++j) {
    want[j] = std::max(want[j], s[j]);
    want[4 + j] = std::min(want[4 + j], s[4 + j]);
  }
  in.exec(low->body);
  EXPECT_EQ(in.data(G), want);
}

TEST(TileOpsPrint, EveryElementInOrder) {
  Buffer S = shared("S", dims({2, 3}));
  PrimFunc low = lower(make_func({}, tile_op("print", {full(S)}, {{"msg", std::string("tile")}})));
  Interpreter in;
  in.alloc(S);
  for (int i = 0; i < 6; ++i) in.data(S)[i] = 10 + i;
  in.exec(low->body);
  ASSERT_EQ(in.printed.size(), 6u);
  EXPECT_EQ(in.printed[0], "tile S[0, 0] = 10");
  EXPECT_EQ(in.printed[5], "tile S[1, 2] = 15");
}

TEST(TileOpsLower, PipelinedBecomesSerialOnCpu) {
  Buffer A = global("A", dims({64}));
  Buffer S = shared("S", dims({16}));
  Var k = make_var("k");
  Stmt copy = tile_op("copy", {region(A, {{mul(k, c(16)), c(16)}}), full(S)});
  Stmt loop =
      std::make_shared<ForNode>(k, c(0), c(4), ForKind::Pipelined, copy, Attrs{{"num_stages", int64_t(2)}});
  PrimFunc low = lower(make_func({A}, loop));
  auto* f = as<ForNode>(low->body);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->for_kind, ForKind::Serial);
  EXPECT_TRUE(f->attrs.empty());
  Interpreter in;
  in.alloc(A);
  in.alloc(S);
  in.data(A) = random_values(64, 50);
  in.exec(low->body);
  EXPECT_EQ(in.data(S), std::vector<double>(in.data(A).begin() + 48, in.data(A).end()));
}

// ---------------------------------------------------------------- user errors

TEST(TileOpsErrors, CopyShapeMismatch) {
  Buffer A = global("A", dims({256, 64}));
  Buffer S = shared("A_shared", dims({64, 32}));
  auto f = make_func({A}, tile_op("copy", {region(A, {{c(0), c(128)}, {c(0), c(32)}}), full(S)}));
  expect_error(f, ErrorKind::Shape,
               {"T.copy", "shape mismatch", "A[0:128, 0:32]", "128 x 32", "A_shared", "64 x 32"});
}

TEST(TileOpsErrors, CopyRankMismatchAfterSqueeze) {
  Buffer A = global("A", dims({8, 8}));
  Buffer S = shared("S", dims({64}));
  expect_error(make_func({A}, tile_op("copy", {full(A), full(S)})), ErrorKind::Shape, {"8 x 8", "64"});
}

TEST(TileOpsErrors, GemmKMismatch) {
  Buffer A = shared("A", dims({16, 32}), DataType::Float(16));
  Buffer B = shared("B", dims({64, 16}), DataType::Float(16));
  Buffer C = fragment("C", dims({16, 16}));
  expect_error(make_func({}, tile_op("gemm", {full(A), full(B), full(C)})), ErrorKind::Shape,
               {"T.gemm", "K of A (32) does not match K of B (64)"});
}

TEST(TileOpsErrors, GemmMMismatchWithTranspose) {
  Buffer A = shared("A", dims({32, 8}), DataType::Float(16));  // transposed: M = 8
  Buffer B = shared("B", dims({32, 16}), DataType::Float(16));
  Buffer C = fragment("C", dims({16, 16}));
  Attrs attrs = {{"transpose_A", int64_t(1)}};
  expect_error(make_func({}, tile_op("gemm", {full(A), full(B), full(C)}, attrs)), ErrorKind::Shape,
               {"M of A (8) does not match M of C (16)"});
}

TEST(TileOpsErrors, GemmDtypes) {
  Buffer A = shared("A", dims({16, 16}), DataType::Float(16));
  Buffer B = shared("B", dims({16, 16}), DataType::BFloat16());
  Buffer C = fragment("C", dims({16, 16}));
  expect_error(make_func({}, tile_op("gemm", {full(A), full(B), full(C)})), ErrorKind::Type,
               {"float16", "bfloat16", "same dtype"});
  Buffer B16 = shared("B", dims({16, 16}), DataType::Float(16));
  Buffer C8 = fragment("C8", dims({16, 16}), DataType::Int(8));
  expect_error(make_func({}, tile_op("gemm", {full(A), full(B16), full(C8)})), ErrorKind::Type,
               {"C8", "int8", "accumulator"});
}

TEST(TileOpsErrors, GemmThreeDOperand) {
  Buffer A = shared("A", dims({2, 16, 16}), DataType::Float(16));
  Buffer B = shared("B", dims({16, 16}), DataType::Float(16));
  Buffer C = fragment("C", dims({16, 16}));
  expect_error(make_func({}, tile_op("gemm", {full(A), full(B), full(C)})), ErrorKind::Shape,
               {"2 x 16 x 16", "3 dimensions"});
}

TEST(TileOpsErrors, ReduceBadDim) {
  Buffer A = fragment("A_local", dims({4, 8}));
  Buffer B = fragment("B_local", dims({4}));
  Attrs attrs = {{"type", std::string("max")}, {"dim", int64_t(2)}, {"clear", int64_t(1)}};
  expect_error(make_func({}, tile_op("reduce", {full(A), full(B)}, attrs)), ErrorKind::Shape,
               {"T.reduce_max: dim 2 out of range for A_local of rank 2"});
}

TEST(TileOpsErrors, ReduceBadDstShape) {
  Buffer A = fragment("A_local", dims({4, 8}));
  Buffer B = fragment("B_local", dims({8}));
  Attrs attrs = {{"type", std::string("sum")}, {"dim", int64_t(1)}, {"clear", int64_t(1)}};
  expect_error(make_func({}, tile_op("reduce", {full(A), full(B)}, attrs)), ErrorKind::Shape,
               {"T.reduce_sum", "B_local", "extents 8", "A_local", "4 x 8", "dim 1", "4 x 1"});
}

TEST(TileOpsErrors, CumsumShapeMismatch) {
  Buffer A = shared("A", dims({4, 8}));
  Buffer B = shared("B", dims({4, 4}));
  expect_error(make_func({}, tile_op("cumsum", {full(A), full(B)}, {{"dim", int64_t(0)}})), ErrorKind::Shape,
               {"T.cumsum", "4 x 4", "4 x 8"});
}

TEST(TileOpsErrors, ConstantRegionOutsideSharedBuffer) {
  Buffer S = shared("S", dims({32, 32}));
  Buffer T = shared("T", dims({32, 32}));
  auto f = make_func({}, tile_op("copy", {region(S, {{c(16), c(32)}, {c(0), c(32)}}), full(T)}));
  expect_error(f, ErrorKind::Bounds, {"S[16:48, 0:32]", "dimension 0", "[16, 48)", "[0, 32)", "32 x 32"});
}

TEST(TileOpsErrors, GlobalRegionWhollyOutside) {
  Buffer G = global("G", dims({16}));
  Buffer S = shared("S", dims({8}));
  auto f = make_func({G}, tile_op("copy", {region(G, {{c(16), c(8)}}), full(S)}));
  expect_error(f, ErrorKind::Bounds, {"G", "[16, 24)", "entirely outside"});
}

TEST(TileOpsErrors, RegionRankDiffersFromBuffer) {
  Buffer S = shared("S", dims({4, 4}));
  auto f = make_func({}, tile_op("fill", {region(S, {{c(0), c(4)}})}, {}, {c(0)}));
  expect_error(f, ErrorKind::Shape, {"S", "rank 2"});
}

TEST(TileOpsErrors, UnknownOperator) {
  Buffer S = shared("S", dims({4}));
  expect_error(make_func({}, tile_op("transmogrify", {full(S)})), ErrorKind::Name,
               {"unknown tile operator", "transmogrify"});
}

TEST(TileOpsErrors, ErrorInsideLoopsAndKernels) {
  // Checks reach tile ops nested in loops and kernels.
  Buffer A = global("A", dims({64, 64}));
  Buffer S = shared("S", dims({16, 8}));
  Var bx = make_var("bx"), k = make_var("k");
  Stmt copy = tile_op("copy", {region(A, {{mul(bx, c(16)), c(16)}, {mul(k, c(16)), c(16)}}), full(S)});
  Stmt loop = std::make_shared<ForNode>(k, c(0), c(4), ForKind::Serial, copy);
  Stmt kernel = std::make_shared<KernelNode>(std::vector<Var>{bx}, std::vector<Expr>{c(4)},
                                             std::vector<Var>{}, std::vector<int64_t>{128}, loop);
  expect_error(make_func({A}, kernel), ErrorKind::Shape, {"16 x 16", "16 x 8"});
}

TEST(TileOpsRegistry, KnowsEveryOperator) {
  for (const char* name :
       {"copy", "fill", "gemm", "reduce", "cumsum", "atomic_add", "atomic_max", "atomic_min", "print"}) {
    const TileOpDef* def = find_tile_op(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_STREQ(def->name, name);
  }
  EXPECT_EQ(find_tile_op("nope"), nullptr);
}

}  // namespace
}  // namespace tl
