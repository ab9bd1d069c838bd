// T.gemm on Hopper's warpgroup tensor-core instruction, wgmma.mma_async (sm_90a).
//
// Each warpgroup (128 consecutive threads) owns a contiguous (M / wg_m) x (N / wg_n) piece
// of C, held in the accumulator layout of TilePartition::wgmma_accumulator, and computes it
// as m64 x inst_n instructions per K step. The shared operands are read by the tensor cores
// themselves through 64-bit matrix descriptors; their layout (layout/swizzle.h: panels of
// one swizzle width, swizzled) is the canonical one the descriptor describes, so the
// descriptor's start address is just the address of the piece's first element.
// A can also come from registers (attention's P * V), in the accumulator layout of an
// M x K product on the same warpgroups.
#include <algorithm>
#include <functional>

#include "ir/error.h"
#include "ir/op.h"
#include "layout/swizzle.h"
#include "op/gemm.h"
#include "op/region.h"

namespace tl {

using namespace gemm_detail;

namespace {

bool is_fp8(DataType t) { return t.code == TypeCode::Float8E4M3 || t.code == TypeCode::Float8E5M2; }

// The N values wgmma accepts: multiples of 8 up to 256; for int8 inputs 8, 24 and the
// multiples of 16.
bool valid_inst_n(int64_t n, bool int8) {
  if (n < 8 || n > 256 || n % 8 != 0) return false;
  return !int8 || n % 16 == 0 || n == 8 || n == 24;
}

// The widest valid instruction N that divides a warpgroup's columns.
int64_t pick_inst_n(int64_t cols, bool int8) {
  for (int64_t n = 256; n >= 8; n -= 8)
    if (cols % n == 0 && valid_inst_n(n, int8)) return n;
  return 0;
}

std::string ptx_type(DataType t) {
  if (t == DataType::Float(16)) return "f16";
  if (t == DataType::BFloat16()) return "bf16";
  if (t.code == TypeCode::Float8E4M3) return "e4m3";
  if (t.code == TypeCode::Float8E5M2) return "e5m2";
  if (t == DataType::Int(8)) return "s8";
  return "";
}

Expr c(int64_t v) { return make_int(v); }
Stmt evaluate(Expr e, Span sp) { return std::make_shared<EvaluateNode>(std::move(e), sp); }
Expr intrinsic(const std::string& name, std::vector<Expr> args, Span sp, DataType t = DataType::Void()) {
  return std::make_shared<CallNode>(t, name, std::move(args), sp);
}

}  // namespace

GemmInstruction choose_wgmma(const TileOpNode& op, const Target& target, int64_t threads, bool full_row) {
  GemmInstruction ins;
  auto no = [&](const std::string& why) {
    ins.why_not_faster = "not wgmma: " + why;
    return ins;
  };
  if (target.kind != "cuda" || target.arch_number() < 90) return no("it needs sm_90a");
  if (target.arch_number() != 90 || target.arch.back() != 'a')
    return no("it needs the sm_90a target (the target is " + target.arch + ")");
  if (target.disable_wgmma) return no("pass config tl.disable_wgmma is set");
  if (op.regions.size() != 3) return no("malformed T.gemm");
  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer, &C = op.regions[2].buffer;
  bool half_in = A->dtype == DataType::Float(16) || A->dtype == DataType::BFloat16();
  bool int8 = A->dtype == DataType::Int(8);
  // float16 accumulators take float16 and float8 inputs (not bfloat16: the PTX ISA has
  // no such instruction).
  bool f16_acc_ok = A->dtype == DataType::Float(16) || is_fp8(A->dtype);
  bool types_ok = B->dtype == A->dtype && (((half_in || is_fp8(A->dtype)) && C->dtype == DataType::Float(32)) ||
                                           (f16_acc_ok && C->dtype == DataType::Float(16)) ||
                                           (int8 && C->dtype == DataType::Int(32)));
  if (!types_ok)
    return no("it takes float16/bfloat16/float8 inputs into float32, float16/float8 into float16, or int8 into "
              "int32 (got " + A->dtype.str() + " x " + B->dtype.str() + " -> " + C->dtype.str() + ")");
  ins.k = half_in ? 16 : 32;
  if (std::string why = operand_placement_problem(op); !why.empty()) return no(why);
  GemmShape g = gemm_shape(op);
  if (A->is_fragment()) {
    if (!half_in) return no("a register A operand must be float16 or bfloat16");
    full_row = true;
  }
  if (!half_in && (g.trans_a || !g.trans_b))
    return no("8-bit operands must be stored K-major: A as M x K, B as N x K (transpose_B=True)");
  const int64_t *m = const_int(g.m), *n = const_int(g.n), *k = const_int(g.k);
  if (!m || !n || !k) return no("M, N and K must be constants");
  if (*k % ins.k != 0) return no("K (" + std::to_string(*k) + ") is not a multiple of " + std::to_string(ins.k));
  // A shared operand's rows must hold whole 32-byte swizzle segments, in groups of 8 rows.
  for (const Buffer& s : {A, B}) {
    if (!s->is_shared()) continue;
    const int64_t* cols = const_int(s->shape.back());
    const int64_t* rows = const_int(s->shape[s->shape.size() - 2]);
    if (!cols || !rows || pick_swizzle_mode(*cols, s->dtype.bits) == SwizzleMode::None || *rows % 8 != 0)
      return no("the rows of " + s->name + " must be a multiple of 32 bytes, and its row count of 8");
  }
  if (threads % 128 != 0) return no("the block's thread count (" + std::to_string(threads) + ") is not whole warpgroups of 128");
  int64_t groups = threads / 128;
  int64_t policy = full_row ? 1 : attr_int(op, "policy", 0);
  // The warpgroup grid follows the policy as upstream's does: Square takes the most square
  // warpgroup tiles (ties: more warpgroups along M), FullRow all along M, FullCol all
  // along N. Each warpgroup needs whole 64-row pieces and a valid instruction N.
  double best_score = 0;
  for (int64_t gm = groups; gm >= 1; --gm) {
    if (groups % gm != 0) continue;
    int64_t gn = groups / gm;
    if ((policy == 1 || full_row) && gn != 1) continue;
    if (policy == 2 && gm != 1) continue;
    if (*m % (64 * gm) != 0 || *n % (8 * gn) != 0) continue;
    int64_t inst_n = pick_inst_n(*n / gn, int8);
    if (!inst_n) continue;
    double tm = double(*m / gm), tn = double(*n / gn);
    double score = -std::max(tm / tn, tn / tm);
    if (ins.kind == GemmInstruction::Kind::Wgmma && score <= best_score) continue;
    best_score = score;
    ins.kind = GemmInstruction::Kind::Wgmma;
    ins.warps_m = gm;
    ins.warps_n = gn;
    ins.inst_n = inst_n;
  }
  if (ins.kind == GemmInstruction::Kind::Wgmma) return ins;
  return no("the " + std::to_string(*m) + " x " + std::to_string(*n) + " tile does not split into 64-row pieces over " +
            std::to_string(groups) + " warpgroup(s)" + (full_row ? " along M" : ""));
}

Stmt lower_gemm_wgmma(const TileOpNode& op, const GemmInstruction& ins, ThreadContext& ctx) {
  GemmShape g = gemm_shape(op);
  const BufferRegion &ra = op.regions[0], &rb = op.regions[1], &rc = op.regions[2];
  Span sp = op.span;
  const int64_t M = *const_int(g.m), N = *const_int(g.n), K = *const_int(g.k);
  const int64_t Mw = M / ins.warps_m, Nw = N / ins.warps_n;
  const int64_t MI = Mw / 64, NJ = Nw / ins.inst_n, KS = K / ins.k;
  DataType in_t = ra.buffer->dtype;
  Expr group = floordiv(ctx.thread, c(128), sp);
  Expr row0 = mul(floordiv(group, c(ins.warps_n), sp), c(Mw), sp);
  Expr col0 = mul(floormod(group, c(ins.warps_n), sp), c(Nw), sp);
  auto unrolled = [&](const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body) {
    return ctx.unrolled(name, n, body, sp);
  };
  // The descriptor of the piece of a shared operand whose first element is (row, col) as
  // stored; `k_major` says whether the stored rows run along K.
  auto descriptor = [&](const BufferRegion& r, const Operand& x, const Expr& row, const Expr& col, bool k_major) {
    const Buffer& b = r.buffer;
    int64_t rows = *const_int(b->shape[b->shape.size() - 2]), cols = *const_int(b->shape.back());
    SwizzleMode mode = pick_swizzle_mode(cols, b->dtype.bits);
    int64_t width = swizzle_width_bytes(mode);
    // Strides in bytes: between 8-row groups (SBO) and, for MN-major operands, between
    // panels along M/N (LBO); K-major swizzled layouts ignore LBO.
    int64_t sbo = 8 * width, lbo = k_major ? 16 : rows * width;
    int64_t code = mode == SwizzleMode::B128 ? 1 : mode == SwizzleMode::B64 ? 2 : 3;
    Expr start = make_load(b, operand_indices(x, row, col, sp), sp);
    return intrinsic("wgmma_desc", {start, c(lbo), c(sbo), c(code)}, sp, DataType::UInt(64));
  };
  bool a_in_registers = ra.buffer->is_fragment();
  bool clear = attr_int(op, "clear_accum", 0) != 0;
  int64_t wg_wait = attr_int(op, "wg_wait", 0);
  const int64_t slots_per_mi = Nw / 8 * 4;
  std::string types = ptx_type(in_t);
  Stmt steps = unrolled("kk", KS, [&](const Expr& kk) {
    Expr k0 = mul(kk, c(ins.k), sp);
    return unrolled("mi", MI, [&](const Expr& mi) {
      Expr m0 = add(row0, mul(mi, c(64), sp), sp);
      Expr a;
      if (a_in_registers) {
        // Atom (mi, kk) of the M x K accumulator layout: eight consecutive values.
        Expr slot = mul(add(mul(mi, c(K / 8), sp), mul(kk, c(2), sp), sp), c(4), sp);
        a = fragment_slot(ra.buffer, slot, sp);
      } else {
        a = g.trans_a ? descriptor(ra, g.a, k0, m0, false) : descriptor(ra, g.a, m0, k0, true);
      }
      return unrolled("nj", NJ, [&](const Expr& nj) {
        Expr n0 = add(col0, mul(nj, c(ins.inst_n), sp), sp);
        Expr b = g.trans_b ? descriptor(rb, g.b, n0, k0, true) : descriptor(rb, g.b, k0, n0, false);
        Expr slot = add(mul(mi, c(slots_per_mi), sp), mul(nj, c(ins.inst_n / 2), sp), sp);
        // clear_accum: the first K step overwrites the accumulators (scale-d 0) instead of
        // adding to zeros written first; register writes while an earlier group is in
        // flight would make ptxas wait for that group before this one.
        Expr scale_d = clear ? binary(BinaryOp::NE, kk, c(0), sp) : c(1);
        return evaluate(intrinsic("wgmma", {fragment_slot(rc.buffer, slot, sp), a, b, c(ins.inst_n),
                                            c(g.trans_a ? 1 : 0), c(g.trans_b ? 0 : 1),
                                            std::make_shared<StringImmNode>(types, sp), scale_d},
                                  sp),
                        sp);
      });
    });
  });
  const int64_t total = MI * slots_per_mi;
  std::vector<Stmt> out;
  // The accumulators are final in registers before the tensor cores read them; the group
  // of instructions is committed, then waited for unless the kernel waits itself
  // (wg_wait = -1, then T.wait_wgmma).
  out.push_back(evaluate(intrinsic("wgmma_fence", {fragment_slot(rc.buffer, c(0), sp), c(total)}, sp), sp));
  out.push_back(steps);
  out.push_back(evaluate(intrinsic("wgmma_commit", {}, sp), sp));
  if (wg_wait >= 0)
    out.push_back(evaluate(intrinsic("wgmma_wait", {c(wg_wait), fragment_slot(rc.buffer, c(0), sp), c(total)}, sp), sp));
  return make_seq(out, sp);
}

}  // namespace tl
