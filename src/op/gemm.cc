// T.gemm(A, B, C, transpose_A, transpose_B, clear_accum): C (+)= A' * B', where A' is A or
// its transpose (M x K) and B' is B or its transpose (K x N); products accumulate in C's dtype.
#include <algorithm>
#include <functional>

#include "op/gemm.h"

#include "ir/error.h"
#include "ir/op.h"
#include "op/region.h"
#include "op/thread_context.h"

namespace tl {

namespace gemm_detail {
const char* const kOpName = "T.gemm";

// The non-unit dims of the region, padded with unit dims to two (so a 1 x K row is fine).
Operand matrix_operand(const char* role, const BufferRegion& r, Span span) {
  int rank = int(r.ranges.size());
  if (rank < 2)
    fail(ErrorKind::Shape, span,
         std::string(kOpName) + ": " + role + " (" + region_str(r) + ", extents " +
             extents_str(region_extents(r)) + ") must be a 2-D tile",
         "pass a 2-D buffer or a 2-D slice of one");
  std::vector<int> dims = non_unit_dims(r);
  if (dims.size() > 2)
    fail(ErrorKind::Shape, span,
         std::string(kOpName) + ": " + role + " (" + region_str(r) + ", extents " +
             extents_str(region_extents(r)) + ") has " + std::to_string(dims.size()) +
             " dimensions of extent > 1; gemm needs a 2-D tile",
         "slice the operand down to a 2-D tile, e.g. " + r.buffer->name + "[stage, :, :]");
  for (int d = rank - 1; dims.size() < 2; --d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  std::sort(dims.begin(), dims.end());
  return {&r, dims[0], dims[1]};
}

GemmShape gemm_shape(const TileOpNode& op) {
  require_regions(op, 3, kOpName);
  bool ta = attr_int(op, "transpose_A", 0) != 0, tb = attr_int(op, "transpose_B", 0) != 0;
  Operand a = matrix_operand("A", op.regions[0], op.span);
  Operand b = matrix_operand("B", op.regions[1], op.span);
  Operand c = matrix_operand("C", op.regions[2], op.span);
  Expr m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  Expr n = tb ? b.rows() : b.cols();
  // Prefer constant extents for the loops.
  if (!const_int(m)) m = c.rows();
  if (!const_int(n)) n = c.cols();
  if (!const_int(k)) k = tb ? b.cols() : b.rows();
  return {a, b, c, ta, tb, m, n, k};
}


// Indices of an operand for matrix element (row, col) of the operand as stored.
std::vector<Expr> operand_indices(const Operand& x, const Expr& row, const Expr& col, Span span) {
  std::vector<Expr> out;
  for (size_t d = 0; d < x.region->ranges.size(); ++d) {
    const Expr& mn = x.region->ranges[d].min;
    if (int(d) == x.dim0)
      out.push_back(add(mn, row, span));
    else if (int(d) == x.dim1)
      out.push_back(add(mn, col, span));
    else
      out.push_back(mn);
  }
  return out;
}

// The matrix of an operand is its buffer's last two dimensions, whole.
bool whole_last_two_dims(const Operand& x) {
  const BufferRegion& r = *x.region;
  int rank = int(r.ranges.size());
  if (rank < 2 || x.dim0 != rank - 2 || x.dim1 != rank - 1) return false;
  for (int d = rank - 2; d < rank; ++d) {
    const int64_t* mn = const_int(r.ranges[d].min);
    const int64_t* ext = const_int(r.ranges[d].extent);
    const int64_t* full = const_int(r.buffer->shape[d]);
    if (!mn || *mn != 0 || !ext || !full || *ext != *full) return false;
  }
  return true;
}

int64_t pick_warps_m(int64_t warps, int64_t m, int64_t n, int64_t piece_m, int64_t piece_n, int64_t policy,
                     bool full_row) {
  int64_t best_m = 0;
  double best_score = 0;
  for (int64_t wm = 1; wm <= warps; ++wm) {
    if (warps % wm != 0) continue;
    int64_t wn = warps / wm;
    if (m % (piece_m * wm) != 0 || n % (piece_n * wn) != 0) continue;
    if (full_row && wn != 1) continue;
    double tm = double(m / wm), tn = double(n / wn);
    double score = policy == 1 ? double(wm) : policy == 2 ? double(wn) : -std::max(tm / tn, tn / tm);
    if (!best_m || score > best_score) {
      best_m = wm;
      best_score = score;
    }
  }
  return best_m;
}

std::string operand_placement_problem(const TileOpNode& op) {
  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer, &C = op.regions[2].buffer;
  if (!B->is_shared()) return "B must be in shared memory";
  if (!A->is_shared() && !A->is_fragment()) return "A must be in shared memory or a fragment";
  if (!C->is_fragment() || C->shape.size() != 2) return "C must be a 2-D fragment";
  GemmShape g = gemm_shape(op);
  if (!whole_last_two_dims(g.a) || !whole_last_two_dims(g.b))
    return "A and B must be whole tiles (their buffers' last two dimensions)";
  if (A->is_fragment() && (A->shape.size() != 2 || g.trans_a)) return "a register A operand must be a 2-D M x K fragment";
  return "";
}

}  // namespace gemm_detail

namespace {
using namespace gemm_detail;

void expect_same(const char* what, const char* left, const Expr& x, const char* right, const Expr& y,
                 arith::Analyzer& analyzer, Span span) {
  if (provably_equal(x, y, analyzer)) return;
  fail(ErrorKind::Shape, span,
       std::string(kOpName) + ": " + what + " of " + left + " (" + expr_str(x) + ") does not match " + what +
           " of " + right + " (" + expr_str(y) + ")",
       "A is M x K (K x M with transpose_A=True), B is K x N (N x K with transpose_B=True) and C is M x N");
}

void check_gemm(const TileOpNode& op, arith::Analyzer& analyzer) {
  require_regions(op, 3, kOpName);
  for (auto& r : op.regions) check_region(kOpName, r, op.span);
  GemmShape g = gemm_shape(op);
  Expr ma = g.trans_a ? g.a.cols() : g.a.rows(), ka = g.trans_a ? g.a.rows() : g.a.cols();
  Expr kb = g.trans_b ? g.b.cols() : g.b.rows(), nb = g.trans_b ? g.b.rows() : g.b.cols();
  expect_same("K", "A", ka, "B", kb, analyzer, op.span);
  expect_same("M", "A", ma, "C", g.c.rows(), analyzer, op.span);
  expect_same("N", "B", nb, "C", g.c.cols(), analyzer, op.span);

  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer, &C = op.regions[2].buffer;
  DataType acc = C->dtype;
  if (!(acc.is_float() || acc == DataType::Int(32)))
    fail(ErrorKind::Type, op.span,
         std::string(kOpName) + ": accumulator " + C->name + " has dtype " + acc.str() +
             "; it must be a float type or int32",
         "allocate C as float32 (or int32 for integer inputs)");
  if (A->dtype != B->dtype)
    fail(ErrorKind::Type, op.span,
         std::string(kOpName) + ": A (" + A->name + ", " + A->dtype.str() + ") and B (" + B->name + ", " +
             B->dtype.str() + ") must have the same dtype",
         "cast one operand into a buffer of the other's dtype first");
  if (acc.is_integer() && A->dtype.is_float())
    fail(ErrorKind::Type, op.span,
         std::string(kOpName) + ": float inputs " + A->name + " and " + B->name + " (" + A->dtype.str() +
             ") cannot accumulate into the int32 buffer " + C->name,
         "use a float32 accumulator");
}

Stmt lower_gemm(const TileOpNode& op, LowerContext& ctx) {
  GemmShape g = gemm_shape(op);
  const BufferRegion &ra = op.regions[0], &rb = op.regions[1], &rc = op.regions[2];
  DataType acc_t = rc.buffer->dtype;
  Span sp = op.span;
  arith::Analyzer& az = ctx.analyzer;
  bool clear = attr_int(op, "clear_accum", 0) != 0;

  auto product = [&](const Expr& i, const Expr& j, const Expr& k) {
    auto ia = g.trans_a ? operand_indices(g.a, k, i, sp) : operand_indices(g.a, i, k, sp);
    auto ib = g.trans_b ? operand_indices(g.b, j, k, sp) : operand_indices(g.b, k, j, sp);
    return mul(cast(acc_t, guarded_load(ra, ia, az, sp), sp), cast(acc_t, guarded_load(rb, ib, az, sp), sp),
               sp);
  };

  if (!g.trans_b) {
    // i-k-j: the inner loop walks rows of B and C contiguously and carries no dependence.
    Stmt zero;
    if (clear) {
      LoopNest zl({g.m, g.n}, az, sp);
      auto ic = operand_indices(g.c, zl.vars()[0], zl.vars()[1], sp);
      zero = zl.wrap(guarded_store(rc, make_int(0, DataType::Int(32), sp), ic, az, sp), ForKind::Parallel);
    }
    LoopNest li({g.m}, az, sp, "", {"i"});
    LoopNest lk({g.k}, az, sp, "", {"k"});
    LoopNest lj({g.n}, az, sp, "", {"j"});
    const Expr &i = li.vars()[0], &j = lj.vars()[0], &k = lk.vars()[0];
    auto ic = operand_indices(g.c, i, j, sp);
    Expr sum = add(guarded_load(rc, ic, az, sp), product(i, j, k), sp);
    Stmt body = guarded_store(rc, sum, ic, az, sp);
    body = li.wrap(lk.wrap(lj.wrap(body, ForKind::Parallel), ForKind::Serial), ForKind::Serial);
    return make_seq({zero, body}, sp);
  }

  // B transposed: i-j-k with a scalar accumulator, so the inner loop walks rows of B.
  LoopNest li({g.m}, az, sp, "", {"i"});
  LoopNest lj({g.n}, az, sp, "", {"j"});
  LoopNest lk({g.k}, az, sp, "", {"k"});
  const Expr &i = li.vars()[0], &j = lj.vars()[0], &k = lk.vars()[0];
  Buffer acc = make_scalar_buffer(rc.buffer->name + "_acc", acc_t, sp);
  std::vector<Expr> at0 = {make_int(0, DataType::Int(32), sp)};
  Expr acc_val = make_load(acc, at0, sp);
  Stmt init =
      std::make_shared<BufferStoreNode>(acc, cast(acc_t, make_int(0, DataType::Int(32), sp), sp), at0, sp);
  Stmt step = std::make_shared<BufferStoreNode>(acc, add(acc_val, product(i, j, k), sp), at0, sp);
  auto ic = operand_indices(g.c, i, j, sp);
  Expr result = clear ? acc_val : add(guarded_load(rc, ic, az, sp), acc_val, sp);
  Stmt write = guarded_store(rc, result, ic, az, sp);
  Stmt per_elem = std::make_shared<AllocateNode>(
      acc, make_seq({init, lk.wrap(step, ForKind::Serial), write}, sp), Attrs{}, sp);
  return li.wrap(lj.wrap(per_elem, ForKind::Serial), ForKind::Serial);
}

// The SIMT product as outer products: per k, a thread loads the A values of its rows and
// the B values of its columns into registers once, then updates every C element it owns.
// Shared-memory loads per k drop from 2 per multiply-add to (rows + columns) per thread.
Stmt register_blocked(const GemmShape& g, const BufferRegion& sa, const BufferRegion& sb, const BufferRegion& rc,
                      const Operand& oa, const Operand& ob, const TilePartition& p, bool clear, ThreadContext& ctx,
                      Span sp) {
  const int64_t* K = const_int(g.k);
  DataType acc_t = rc.buffer->dtype;
  auto c = [](int64_t v) { return make_int(v); };
  Expr lane = floormod(ctx.thread, c(p.group()), sp), group_row = floordiv(ctx.thread, c(p.group()), sp);
  int64_t rpt = p.rows_per_thread(), cols = p.chunks_per_thread() * p.vec();
  auto row_of = [&](const Expr& r) { return add(mul(r, c(p.row_groups()), sp), group_row, sp); };
  auto col_of = [&](const Expr& q) {  // q runs over this thread's columns: chunk-major, then lane in vector
    Expr chunk = add(mul(floordiv(q, c(p.vec()), sp), c(p.group()), sp), lane, sp);
    return add(mul(chunk, c(p.vec()), sp), floormod(q, c(p.vec()), sp), sp);
  };
  auto unrolled = [&](const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body) {
    return ctx.unrolled(name, n, body, sp);
  };
  Buffer a_reg = make_buffer(rc.buffer->name + "_a", acc_t, {c(rpt)}, scope::kLocal, sp);
  Buffer b_reg = make_buffer(rc.buffer->name + "_b", acc_t, {c(cols)}, scope::kLocal, sp);
  // Rows and columns past the tile (a partial last group) read 0 and update unused slots.
  Expr m_rows = g.c.rows(), n_cols = g.c.cols();
  Var k = make_var("k", DataType::Int(32), sp);
  ctx.analyzer.bind(k.get(), 0, *K);
  Stmt load_a = unrolled("ga", rpt, [&](const Expr& r) -> Stmt {
    Expr row = row_of(r);
    auto ia = g.trans_a ? operand_indices(oa, k, row, sp) : operand_indices(oa, row, k, sp);
    Expr v = cast(acc_t, guarded_load(sa, ia, ctx.analyzer, sp), sp);
    if (!ctx.analyzer.can_prove(lt(row, m_rows, sp))) v = select(lt(row, m_rows, sp), v, cast(acc_t, c(0), sp), sp);
    return std::make_shared<BufferStoreNode>(a_reg, v, std::vector<Expr>{r}, sp);
  });
  Stmt load_b = unrolled("gb", cols, [&](const Expr& q) -> Stmt {
    Expr col = col_of(q);
    auto ib = g.trans_b ? operand_indices(ob, col, k, sp) : operand_indices(ob, k, col, sp);
    Expr v = cast(acc_t, guarded_load(sb, ib, ctx.analyzer, sp), sp);
    if (!ctx.analyzer.can_prove(lt(col, n_cols, sp))) v = select(lt(col, n_cols, sp), v, cast(acc_t, c(0), sp), sp);
    return std::make_shared<BufferStoreNode>(b_reg, v, std::vector<Expr>{q}, sp);
  });
  Stmt update = unrolled("gr", rpt, [&](const Expr& r) {
    return unrolled("gq", cols, [&](const Expr& q) -> Stmt {
      std::vector<Expr> ic = operand_indices(g.c, row_of(r), col_of(q), sp);
      Expr sum = add(make_load(rc.buffer, ic, sp),
                     mul(make_load(a_reg, {r}, sp), make_load(b_reg, {q}, sp), sp), sp);
      return std::make_shared<BufferStoreNode>(rc.buffer, sum, ic, sp);
    });
  });
  ctx.analyzer.unbind(k.get());
  Stmt kloop = std::make_shared<ForNode>(k, c(0), c(*K), ForKind::Serial, make_seq({load_a, load_b, update}, sp),
                                         Attrs{}, sp);
  Stmt body = std::make_shared<AllocateNode>(a_reg, std::make_shared<AllocateNode>(b_reg, kloop, Attrs{}, sp),
                                             Attrs{}, sp);
  if (!clear) return body;
  Stmt zero = ctx.over_owned(p, [&](const std::vector<Expr>& idx) -> Stmt {
    return std::make_shared<BufferStoreNode>(rc.buffer, cast(acc_t, c(0), sp), idx, sp);
  }, sp, "gz");
  return make_seq({zero, body}, sp);
}

// ---------------------------------------------------------------- tensor cores

}  // namespace

namespace {

GemmInstruction choose_mma_sync(const TileOpNode& op, const Target& target, int64_t threads, bool full_row) {
  GemmInstruction ins;
  auto simt = [&](const std::string& why) {
    ins.why_simt = why;
    return ins;
  };
  if (target.kind != "cuda") return simt("target " + target.kind + " has no tensor-core path");
  if (target.arch_number() < 80) return simt("mma.sync needs sm_80 or newer");
  if (op.regions.size() != 3) return simt("malformed T.gemm");
  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer, &C = op.regions[2].buffer;
  bool half_in = A->dtype == DataType::Float(16) || A->dtype == DataType::BFloat16();
  bool fp8_in = A->dtype.code == TypeCode::Float8E4M3 || A->dtype.code == TypeCode::Float8E5M2;
  bool int8_in = A->dtype == DataType::Int(8);
  bool types_ok = B->dtype == A->dtype && (((half_in || fp8_in) && C->dtype == DataType::Float(32)) ||
                                           (int8_in && C->dtype == DataType::Int(32)));
  if (!types_ok)
    return simt("tensor cores take float16/bfloat16/float8 inputs into float32, or int8 into int32 (got " +
                A->dtype.str() + " x " + B->dtype.str() + " -> " + C->dtype.str() + ")");
  if (fp8_in && target.arch_number() < 89) return simt("float8 mma.sync needs sm_89 or newer");
  ins.k = half_in ? 16 : 32;
  if (std::string why = operand_placement_problem(op); !why.empty()) return simt(why);
  GemmShape g = gemm_shape(op);
  if (A->is_fragment()) {
    if (!half_in) return simt("a register A operand must be float16 or bfloat16");
    full_row = true;
  }
  // ldmatrix transposes 16-bit elements only: 8-bit operands must be stored K-major.
  if (!half_in && (g.trans_a || !g.trans_b))
    return simt("8-bit tensor-core operands must be stored K-major: A as M x K, B as N x K (transpose_B=True)");
  const int64_t *m = const_int(g.m), *n = const_int(g.n), *k = const_int(g.k);
  if (!m || !n || !k) return simt("M, N and K must be constants");
  if (threads % 32 != 0) return simt("the block's thread count is not a multiple of 32");
  int64_t warps = threads / 32;
  if (*k % ins.k != 0) return simt("K (" + std::to_string(*k) + ") is not a multiple of " + std::to_string(ins.k));
  int64_t policy = full_row ? 1 : attr_int(op, "policy", 0);
  // Warp tiles 16 columns wide load B by pairs of 8-column blocks (ldmatrix.x4); a tile too
  // narrow for that over the warps (a decode step's 16 x 64 scores on 8 warps) takes warp
  // tiles of 16 x 8, one block each.
  // GemmWarpPolicy.FullCol puts the warps along N as far as 8-column blocks allow, as
  // upstream does (a 32 x 64 tile on 8 warps: 1 x 8, each warp holding whole columns).
  int64_t best_m = pick_warps_m(warps, *m, *n, 16, 16, policy, full_row);
  int64_t narrow_m = pick_warps_m(warps, *m, *n, 16, 8, policy, full_row);
  if (!best_m || (policy == 2 && narrow_m && narrow_m < best_m)) best_m = narrow_m;
  if (!best_m)
    return simt("the " + std::to_string(*m) + " x " + std::to_string(*n) + " tile does not split into 16 x 8 pieces over " +
                std::to_string(warps) + " warps");
  ins.kind = GemmInstruction::Kind::MmaSync;
  ins.warps_m = best_m;
  ins.warps_n = warps / best_m;
  return ins;
}

}  // namespace

GemmInstruction choose_gemm_instruction(const TileOpNode& op, const Target& target, int64_t threads, bool full_row,
                                        bool allow_wgmma) {
  // AMD: the matrix cores, or SIMT with the reason (a slower path: the hardware has them).
  if (target.kind == "hip") return choose_matrix_core(op, target, threads, full_row, allow_wgmma);
  std::string not_wgmma = "not wgmma: another T.gemm sharing fragments with it cannot use wgmma";
  if (allow_wgmma) {
    GemmInstruction w = choose_wgmma(op, target, threads, full_row);
    if (w.kind == GemmInstruction::Kind::Wgmma) return w;
    not_wgmma = w.why_not_faster;
  }
  // T.wgmma_gemm asks for wgmma and nothing else: no silent fallback.
  if (attr_int(op, "require_wgmma", 0))
    fail(ErrorKind::Unsupported, op.span,
         "T.wgmma_gemm cannot use wgmma here: " +
             (not_wgmma.rfind("not wgmma: ", 0) == 0 ? not_wgmma.substr(11) : not_wgmma),
         "use T.gemm, which falls back to mma.sync, or change the tile, threads or target (sm_90a)");
  GemmInstruction ins = choose_mma_sync(op, target, threads, full_row);
  // Only where wgmma exists is mma.sync (or SIMT) a slower path than the program could have.
  if (target.kind == "cuda" && target.arch_number() >= 90) ins.why_not_faster = not_wgmma;
  return ins;
}

namespace {

Expr intrinsic(const std::string& name, std::vector<Expr> args, Span sp) {
  return std::make_shared<CallNode>(DataType::Void(), name, std::move(args), sp);
}
Stmt evaluate(Expr e, Span sp) { return std::make_shared<EvaluateNode>(std::move(e), sp); }

// mma.sync m16n8k16 over the warp grid: each warp owns a (M / warps_m) x (N / warps_n)
// sub-tile of C as MI x NI accumulators of 16 x 8 (layout/tile_partition.h, Kind::Mma). Per
// 16-deep slice of K it loads its A rows (one ldmatrix.x4 per 16 rows) and B columns (one
// ldmatrix.x4 per 16 columns, .trans when B is stored K-major) into registers and issues
// MI x NI mma instructions.
Stmt lower_gemm_mma(const TileOpNode& op, const GemmInstruction& ins, ThreadContext& ctx) {
  GemmShape g = gemm_shape(op);
  const BufferRegion &ra = op.regions[0], &rb = op.regions[1], &rc = op.regions[2];
  Span sp = op.span;
  auto c = [](int64_t v) { return make_int(v); };
  const int64_t M = *const_int(g.m), N = *const_int(g.n), K = *const_int(g.k);
  const int64_t MI = M / (16 * ins.warps_m), NI = N / (8 * ins.warps_n), KS = K / ins.k;
  // ldmatrix moves 8 x 8 matrices of 16-bit units: `v` elements make one 16-byte row.
  const int64_t v = 16 / ra.buffer->dtype.bytes();
  const int64_t a_regs = 8 * 2 / ra.buffer->dtype.bytes(), b_regs = 4 * 2 / rb.buffer->dtype.bytes();
  Expr lane = floormod(ctx.thread, c(32), sp), warp = floordiv(ctx.thread, c(32), sp);
  Expr row0 = mul(floordiv(warp, c(ins.warps_n), sp), c(M / ins.warps_m), sp);
  Expr col0 = mul(floormod(warp, c(ins.warps_n), sp), c(N / ins.warps_n), sp);
  Expr l8 = floormod(lane, c(8), sp), q = floordiv(lane, c(8), sp);
  Expr q_lo = floormod(q, c(2), sp), q_hi = floordiv(q, c(2), sp);
  DataType in_t = ra.buffer->dtype;
  Buffer a_reg = make_buffer(rc.buffer->name + "_a", in_t, {c(MI * a_regs)}, scope::kLocal, sp);
  // A held in registers has the accumulator layout of an M x K product on the same warps
  // (layout inference demands it): the eight values of atom (mi, kk) are the four of
  // columns 16 kk .. 16 kk + 7 followed by the four of the next 8 columns, in order.
  bool a_in_registers = ra.buffer->is_fragment();
  auto a_operand = [&](const Expr& mi, const Expr& kk) -> Expr {
    if (!a_in_registers) return make_load(a_reg, {mul(mi, c(a_regs), sp)}, sp);
    Expr slot = mul(add(mul(mi, c(K / 8), sp), mul(kk, c(2), sp), sp), c(4), sp);
    return fragment_slot(ra.buffer, slot, sp);
  };
  Buffer b_reg = make_buffer(rc.buffer->name + "_b", in_t, {c(NI * b_regs)}, scope::kLocal, sp);
  bool clear = attr_int(op, "clear_accum", 0) != 0;
  auto unrolled = [&](const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body) {
    return ctx.unrolled(name, n, body, sp);
  };
  // The shared element (row, col) of an operand as stored, as an address for ldmatrix.
  auto at = [&](const BufferRegion& r, const Operand& x, const Expr& row, const Expr& col) {
    return make_load(r.buffer, operand_indices(x, row, col, sp), sp);
  };
  Stmt kloop = unrolled("kk", KS, [&](const Expr& kk) {
    Expr k0 = mul(kk, c(ins.k), sp);
    // A (M x K): matrix q of ldmatrix.x4 is the 8 x 8 block (8 (q % 2), 8 (q / 2)) of the
    // 16 x 16 tile, so the registers come out in the order of mma's a0..a7. Stored K x M,
    // the same blocks are read transposed.
    Stmt load_a = a_in_registers ? Stmt(nullptr) : unrolled("mi", MI, [&](const Expr& mi) {
      Expr m0 = add(row0, mul(mi, c(16), sp), sp);
      Expr addr = g.trans_a ? at(ra, g.a, add(add(k0, mul(q_hi, c(8), sp), sp), l8, sp),
                                 add(m0, mul(q_lo, c(8), sp), sp))
                            : at(ra, g.a, add(m0, floormod(lane, c(16), sp), sp),
                                 add(k0, mul(floordiv(lane, c(16), sp), c(v), sp), sp));
      return evaluate(intrinsic("ldmatrix", {c(g.trans_a ? 1 : 0), c(4), make_load(a_reg, {mul(mi, c(a_regs), sp)}, sp),
                                             addr},
                                sp), sp);
    });
    // B (K x N): matrices 2j and 2j+1 are the two 8-deep halves of the 16 x 8 operand of
    // column block j of the pair; stored K x N they are read transposed. An odd last block
    // loads its two halves alone (ldmatrix.x2: lanes 0-15 give the addresses).
    auto load_b_blocks = [&](const Expr& first_block, int64_t blocks) {
      Expr n0 = add(add(col0, mul(first_block, c(8), sp), sp), mul(q_hi, c(8), sp), sp);
      Expr kq = add(k0, mul(q_lo, c(g.trans_b ? v : 8), sp), sp);
      Expr addr = g.trans_b ? at(rb, g.b, add(n0, l8, sp), kq) : at(rb, g.b, add(kq, l8, sp), n0);
      return evaluate(intrinsic("ldmatrix", {c(g.trans_b ? 0 : 1), c(2 * blocks),
                                             make_load(b_reg, {mul(first_block, c(b_regs), sp)}, sp), addr},
                                sp), sp);
    };
    Stmt load_b = unrolled("nj", NI / 2, [&](const Expr& nj) { return load_b_blocks(mul(nj, c(2), sp), 2); });
    if (NI % 2) load_b = make_seq({load_b, load_b_blocks(c(NI - 1), 1)}, sp);
    Stmt mmas = unrolled("mi", MI, [&](const Expr& mi) {
      return unrolled("ni", NI, [&](const Expr& ni) {
        Expr slot = mul(add(mul(mi, c(NI), sp), ni, sp), c(4), sp);
        return evaluate(intrinsic("mma_sync", {fragment_slot(rc.buffer, slot, sp),
                                               a_operand(mi, kk),
                                               make_load(b_reg, {mul(ni, c(b_regs), sp)}, sp)},
                                  sp), sp);
      });
    });
    return make_seq({load_a, load_b, mmas}, sp);
  });
  Stmt body = std::make_shared<AllocateNode>(b_reg, kloop, Attrs{}, sp);
  if (!a_in_registers) body = std::make_shared<AllocateNode>(a_reg, body, Attrs{}, sp);
  if (!clear) return body;
  Stmt zero = unrolled("cz", MI * NI * 4, [&](const Expr& s) -> Stmt {
    return std::make_shared<BufferStoreNode>(rc.buffer, cast(rc.buffer->dtype, c(0), sp), std::vector<Expr>{s}, sp);
  });
  return make_seq({zero, body}, sp);
}

// SIMT: every thread computes the elements of C it owns (C's layout decides which), reading
// A and B from shared memory. Tensor-core instructions replace this as other instruction
// choices with their own C layouts.
Stmt lower_gemm_threads(const TileOpNode& op, ThreadContext& ctx) {
  auto chosen = ctx.layouts.gemms.find(&op);
  if (chosen != ctx.layouts.gemms.end() && chosen->second.kind == GemmInstruction::Kind::MmaSync)
    return lower_gemm_mma(op, chosen->second, ctx);
  if (chosen != ctx.layouts.gemms.end() && chosen->second.kind == GemmInstruction::Kind::Wgmma)
    return lower_gemm_wgmma(op, chosen->second, ctx);
  if (chosen != ctx.layouts.gemms.end() && (chosen->second.kind == GemmInstruction::Kind::Mfma ||
                                            chosen->second.kind == GemmInstruction::Kind::Wmma))
    return lower_gemm_matrix_core(op, chosen->second, ctx);
  GemmShape g = gemm_shape(op);
  const BufferRegion &ra = op.regions[0], &rb = op.regions[1], &rc = op.regions[2];
  Span sp = op.span;
  if (!ctx.layout_of(rc.buffer))
    fail(ErrorKind::Unsupported, sp,
         std::string(kOpName) + ": the accumulator " + rc.buffer->name + " is in scope '" + rc.buffer->scope +
             "'; on target " + ctx.target.kind + " it must be a fragment",
         "allocate C with T.alloc_fragment");
  if (!const_int(g.k))
    fail(ErrorKind::Unsupported, sp, std::string(kOpName) + ": K must be a constant on target " + ctx.target.kind);
  // An operand held in a fragment is staged through shared memory: every thread needs whole
  // rows (columns) of it, which other threads hold.
  std::vector<Stmt> staging;
  BufferRegion sa = ra, sb = rb;
  for (BufferRegion* r : {&sa, &sb}) {
    if (!ctx.layout_of(r->buffer)) continue;
    Buffer stage = make_buffer(r->buffer->name + "_stage", r->buffer->dtype, r->buffer->shape, scope::kShared, sp);
    ctx.scratch.push_back(stage);
    BufferRegion whole = full_region(r->buffer, sp);
    BufferRegion dst = full_region(stage, sp);
    staging.push_back(ctx.over_points(kOpName, whole, squeezed_extents(whole), [&](const std::vector<Expr>& pt) {
      return std::make_shared<BufferStoreNode>(stage, make_load(r->buffer, region_indices(whole, pt, sp), sp),
                                               region_indices(dst, pt, sp), sp);
    }, sp));
    BufferRegion moved = *r;
    moved.buffer = stage;
    *r = moved;
  }
  Stmt sync = sync_threads(sp);
  Operand oa{&sa, g.a.dim0, g.a.dim1}, ob{&sb, g.b.dim0, g.b.dim1};
  DataType acc_t = rc.buffer->dtype;
  bool clear = attr_int(op, "clear_accum", 0) != 0;
  std::vector<int> c_dims = non_unit_dims(rc);
  const TilePartition& c_layout = *ctx.layout_of(rc.buffer);
  Stmt compute = c_layout.kind() == TilePartition::Kind::Grid && c_layout.is_2d() && c_dims.size() == 2 &&
                         rc.buffer->shape.size() == 2
                     ? register_blocked(g, sa, sb, rc, oa, ob, c_layout, clear, ctx, sp)
                     : nullptr;
  if (!compute) compute = ctx.over_points(kOpName, rc, squeezed_extents(rc), [&](const std::vector<Expr>& point) {
    // The point runs over C's non-unit dimensions; a unit row or column stays at 0.
    Expr i = make_int(0), j = make_int(0);
    for (size_t p = 0; p < c_dims.size(); ++p) (c_dims[p] == g.c.dim0 ? i : j) = point[p];
    LoopNest lk({g.k}, ctx.analyzer, sp, "", {"k"});
    const Expr& k = lk.vars()[0];
    auto ia = g.trans_a ? operand_indices(oa, k, i, sp) : operand_indices(oa, i, k, sp);
    auto ib = g.trans_b ? operand_indices(ob, j, k, sp) : operand_indices(ob, k, j, sp);
    Expr prod = mul(cast(acc_t, guarded_load(sa, ia, ctx.analyzer, sp), sp),
                    cast(acc_t, guarded_load(sb, ib, ctx.analyzer, sp), sp), sp);
    auto ic = operand_indices(g.c, i, j, sp);
    Buffer acc = make_scalar_buffer(rc.buffer->name + "_acc", acc_t, sp);
    std::vector<Expr> at0 = {make_int(0)};
    Expr acc_val = make_load(acc, at0, sp);
    Expr start = clear ? cast(acc_t, make_int(0), sp) : make_load(rc.buffer, ic, sp);
    Stmt init = std::make_shared<BufferStoreNode>(acc, start, at0, sp);
    Stmt step = std::make_shared<BufferStoreNode>(acc, add(acc_val, prod, sp), at0, sp);
    Stmt write = std::make_shared<BufferStoreNode>(rc.buffer, acc_val, ic, sp);
    return std::make_shared<AllocateNode>(acc, make_seq({init, lk.wrap(step, ForKind::Serial), write}, sp),
                                          Attrs{}, sp);
  }, sp);
  if (staging.empty()) return compute;
  // Staged operands are complete before anyone reads them, and read before the next use
  // of the staging buffer overwrites them.
  staging.push_back(sync);
  staging.push_back(compute);
  staging.push_back(sync);
  return make_seq(staging, sp);
}

}  // namespace

const TileOpDef& gemm_op() {
  static const TileOpDef def{"gemm", check_gemm, lower_gemm, lower_gemm_threads};
  return def;
}

}  // namespace tl
