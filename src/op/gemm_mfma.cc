// T.gemm on AMD's matrix cores (target hip): MFMA on CDNA (gfx90a, gfx940/gfx942, gfx950;
// wavefronts of 64 lanes) and WMMA on RDNA 3 (gfx1100; wave32).
//
// Each wavefront owns a contiguous (M / warps_m) x (N / warps_n) piece of C made of S x S
// instruction tiles (S = 32 or 16). Per K step of the instruction it reads its operands
// from shared memory into registers in the layout the instruction takes (the register
// tables amd::a_registers / amd::b_registers, layout/mma_layouts.h, which the tests check
// against AMD's documentation) and issues one instruction per tile through the device
// header (tl/hip/tl_hip.h, the compiler's __builtin_amdgcn_mfma_* / wmma_* builtins).
//
// MFMA computes the transposed product C^T = B^T A^T: the instruction's A input is read
// from B and its B input from A, so C's accumulator (TilePartition::amd_accumulator,
// transposed) gives each lane consecutive columns of one row, and the accumulator of an
// M x K product is exactly the B input of a product with it as A (attention's P V reads P
// from registers, amd::chained_a_slot). WMMA's inputs hold whole rows per lane, which no
// accumulator layout provides: it computes C = A B as written and takes A from shared
// memory only.
#include <algorithm>
#include <functional>

#include "ir/error.h"
#include "ir/op.h"
#include "layout/mma_layouts.h"
#include "op/gemm.h"
#include "op/region.h"

namespace tl {

using namespace gemm_detail;

namespace {

Expr c(int64_t v) { return make_int(v); }
Stmt evaluate(Expr e, Span sp) { return std::make_shared<EvaluateNode>(std::move(e), sp); }

// One instruction: its shape, ISA mnemonic and the device header's function.
struct MatrixInstruction {
  int64_t m, k;
  const char* mnemonic;
  const char* header_fn;
};

enum class Family { None, Cdna2, Cdna3, Rdna3, Rdna4 };

Family family_of(const std::string& arch) {
  if (arch == "gfx90a") return Family::Cdna2;
  if (arch == "gfx940" || arch == "gfx941" || arch == "gfx942" || arch == "gfx950") return Family::Cdna3;
  if (arch == "gfx1100") return Family::Rdna3;
  if (arch == "gfx1201") return Family::Rdna4;
  return Family::None;
}

// The instructions for inputs of type `in` into float32 / int32, widest first. CDNA 3
// (and CDNA 4, which keeps its instructions) spells bfloat16's "_1k" forms without the
// suffix and replaced CDNA 2's int8 forms by ones twice as deep.
std::vector<MatrixInstruction> instructions(Family f, DataType in) {
  bool f16 = in == DataType::Float(16), bf16 = in == DataType::BFloat16(), i8 = in == DataType::Int(8),
       f32 = in == DataType::Float(32);
  if (f == Family::Rdna3) {
    if (f16) return {{16, 16, "v_wmma_f32_16x16x16_f16", "wmma_f32_16x16x16_f16_w32"}};
    if (bf16) return {{16, 16, "v_wmma_f32_16x16x16_bf16", "wmma_f32_16x16x16_bf16_w32"}};
    if (i8) return {{16, 16, "v_wmma_i32_16x16x16_iu8", "wmma_i32_16x16x16_iu8_w32"}};
    return {};
  }
  bool cdna3 = f == Family::Cdna3;
  // float32 products in float32 (not reduced precision), one value of A and B per lane.
  if (f32)
    return {{32, 2, "v_mfma_f32_32x32x2f32", "mfma_f32_32x32x2f32"}, {16, 4, "v_mfma_f32_16x16x4f32", "mfma_f32_16x16x4f32"}};
  if (f16)
    return {{32, 8, "v_mfma_f32_32x32x8f16", "mfma_f32_32x32x8f16"}, {16, 16, "v_mfma_f32_16x16x16f16", "mfma_f32_16x16x16f16"}};
  if (bf16)
    return {{32, 8, cdna3 ? "v_mfma_f32_32x32x8_bf16" : "v_mfma_f32_32x32x8bf16_1k", "mfma_f32_32x32x8bf16_1k"},
            {16, 16, cdna3 ? "v_mfma_f32_16x16x16_bf16" : "v_mfma_f32_16x16x16bf16_1k", "mfma_f32_16x16x16bf16_1k"}};
  if (i8 && cdna3)
    return {{32, 16, "v_mfma_i32_32x32x16_i8", "mfma_i32_32x32x16_i8"}, {16, 32, "v_mfma_i32_16x16x32_i8", "mfma_i32_16x16x32_i8"}};
  if (i8) return {{32, 8, "v_mfma_i32_32x32x8i8", "mfma_i32_32x32x8i8"}, {16, 16, "v_mfma_i32_16x16x16i8", "mfma_i32_16x16x16i8"}};
  return {};
}

// Whether the stored operand's contiguous dimension is K (each lane's consecutive K
// values are then one vector read from LDS).
bool k_contiguous(bool is_a, const GemmShape& g) { return is_a ? !g.trans_a : g.trans_b; }

}  // namespace

GemmInstruction choose_matrix_core(const TileOpNode& op, const Target& target, int64_t threads, bool full_row,
                                   bool wide) {
  GemmInstruction ins;
  Family family = target.kind == "hip" ? family_of(target.arch) : Family::None;
  bool wmma = family == Family::Rdna3;
  const char* unit = wmma ? "WMMA" : "MFMA";
  auto simt = [&](const std::string& why) {
    ins.why_simt = why;
    ins.why_not_faster = std::string("not on the matrix cores: ") + why;
    return ins;
  };
  if (family == Family::None) return simt("target " + target.str() + " has no AMD matrix instructions");
  if (family == Family::Rdna4)
    return simt("WMMA on RDNA 4 (gfx12's register layouts and __builtin_amdgcn_wmma_*_gfx12) is not generated yet");
  if (op.regions.size() != 3) return simt("malformed T.gemm");
  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer, &C = op.regions[2].buffer;
  bool half_in = A->dtype == DataType::Float(16) || A->dtype == DataType::BFloat16();
  bool int8_in = A->dtype == DataType::Int(8);
  bool f32_in = !wmma && A->dtype == DataType::Float(32);  // RDNA 3 has no float32 WMMA
  bool types_ok = B->dtype == A->dtype && ((half_in && C->dtype == DataType::Float(32)) ||
                                           (f32_in && C->dtype == DataType::Float(32)) ||
                                           (int8_in && C->dtype == DataType::Int(32)));
  if (!types_ok)
    return simt(std::string(unit) + (wmma ? " takes float16/bfloat16" : " takes float16/bfloat16/float32") +
                " inputs into float32, or int8 into int32 (got " + A->dtype.str() + " x " + B->dtype.str() + " -> " +
                C->dtype.str() + ")");
  std::vector<MatrixInstruction> table = instructions(family, A->dtype);
  if (std::string why = operand_placement_problem(op); !why.empty()) return simt(why);
  GemmShape g = gemm_shape(op);
  bool a_in_registers = A->is_fragment();
  if (a_in_registers) {
    if (wmma) return simt("WMMA takes A from shared memory only (each lane needs whole rows of A, which no accumulator holds)");
    if (!half_in) return simt("a register A operand must be float16 or bfloat16");
    full_row = true;
  }
  const int64_t *m = const_int(g.m), *n = const_int(g.n), *k = const_int(g.k);
  if (!m || !n || !k) return simt("M, N and K must be constants");
  int64_t wave = target.warp_size();
  if (threads % wave != 0)
    return simt("the block's thread count (" + std::to_string(threads) + ") is not whole wavefronts of " +
                std::to_string(wave));
  int64_t waves = threads / wave;
  int64_t policy = full_row ? 1 : attr_int(op, "policy", 0);
  std::string why;
  for (size_t t = wide ? 0 : table.size() - 1; t < table.size(); ++t) {
    const MatrixInstruction& mi = table[t];
    // A register A operand is the accumulator of an M x K product: whole S x S tiles.
    int64_t k_unit = a_in_registers ? mi.m : mi.k;
    if (*k % k_unit != 0) {
      if (why.empty()) why = "K (" + std::to_string(*k) + ") is not a multiple of " + std::to_string(k_unit);
      continue;
    }
    int64_t best_m = pick_warps_m(waves, *m, *n, mi.m, mi.m, policy, full_row);
    if (!best_m) {
      if (why.empty())
        why = "the " + std::to_string(*m) + " x " + std::to_string(*n) + " tile does not split into " +
              std::to_string(mi.m) + " x " + std::to_string(mi.m) + " pieces over " + std::to_string(waves) +
              " wavefront(s)" + (full_row ? " along M" : "");
      continue;
    }
    ins.kind = wmma ? GemmInstruction::Kind::Wmma : GemmInstruction::Kind::Mfma;
    ins.warps_m = best_m;
    ins.warps_n = waves / best_m;
    ins.k = mi.k;
    ins.amd = amd::MatrixCoreShape{mi.m, mi.m, mi.k, wave, wmma};
    ins.mnemonic = mi.mnemonic;
    ins.header_fn = mi.header_fn;
    return ins;
  }
  return simt(why);
}

std::string describe_matrix_core(const TileOpNode& op, const GemmInstruction& ins) {
  GemmShape g = gemm_shape(op);
  const Buffer &A = op.regions[0].buffer, &B = op.regions[1].buffer;
  std::string out = std::string(ins.kind == GemmInstruction::Kind::Wmma ? "WMMA " : "MFMA ") + ins.mnemonic + ", " +
                    std::to_string(ins.warps_m) + " x " + std::to_string(ins.warps_n) + " wavefronts";
  if (!ins.amd.wmma) out += " (as C^T = B^T A^T)";
  auto reads = [&](const Buffer& b, bool is_a) {
    int64_t bytes = b->dtype.bytes();
    if (k_contiguous(is_a, g))
      return std::to_string(std::min<int64_t>(16, ins.amd.inputs_per_lane() * bytes)) + "-byte LDS reads";
    return std::to_string(bytes) + "-byte LDS reads: stored " + (is_a ? "K x M" : "K x N");
  };
  out += "; A from " + (A->is_fragment() ? std::string("registers") : "shared memory (" + reads(A, true) + ")");
  out += ", B from shared memory (" + reads(B, false) + ")";
  return out;
}

Stmt lower_gemm_matrix_core(const TileOpNode& op, const GemmInstruction& ins, ThreadContext& ctx) {
  GemmShape g = gemm_shape(op);
  const BufferRegion &ra = op.regions[0], &rb = op.regions[1], &rc = op.regions[2];
  Span sp = op.span;
  const amd::MatrixCoreShape& s = ins.amd;
  const bool transposed = !s.wmma;
  const int64_t M = *const_int(g.m), N = *const_int(g.n), K = *const_int(g.k);
  const int64_t Mw = M / ins.warps_m, Nw = N / ins.warps_n;
  const int64_t MI = Mw / s.m, NI = Nw / s.n, KS = K / s.k;
  const int64_t kpl = s.inputs_per_lane(), regs = s.acc_per_lane();
  DataType in_t = ra.buffer->dtype;
  // Vector reads of at most 16 bytes.
  const int64_t chunk = std::min<int64_t>(kpl, std::max<int64_t>(1, 16 / in_t.bytes()));
  Expr lane = floormod(ctx.thread, c(s.wave), sp), wave = floordiv(ctx.thread, c(s.wave), sp);
  Expr row0 = mul(floordiv(wave, c(ins.warps_n), sp), c(Mw), sp);
  Expr col0 = mul(floormod(wave, c(ins.warps_n), sp), c(Nw), sp);
  Layout a_regs = amd::a_registers(s), b_regs = amd::b_registers(s);
  // Element (outer, k) of the instruction's A input (outer = its row) or B input (outer =
  // its column) that item e of this lane holds.
  auto input_element = [&](bool input_a, const Expr& e) {
    std::vector<Expr> v = (input_a ? a_regs : b_regs).forward({lane, e}, ctx.analyzer);
    return input_a ? std::make_pair(v[0], v[1]) : std::make_pair(v[1], v[0]);
  };
  // Transposed, the user's B feeds the instruction's A input and A its B input.
  const bool a_feeds_input_a = !transposed;
  auto unrolled = [&](const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body) {
    return ctx.unrolled(name, n, body, sp);
  };
  // reg[base + e] = operand element of item e, for e in [0, kpl), in vectors of `chunk`.
  auto load_items = [&](const Buffer& reg, const Expr& base, const std::function<Expr(const Expr&)>& element) {
    return unrolled("ec", kpl / chunk, [&](const Expr& ec) {
      return unrolled("e", chunk, [&](const Expr& el) -> Stmt {
        Expr e = add(mul(ec, c(chunk), sp), el, sp);
        return std::make_shared<BufferStoreNode>(reg, element(e), std::vector<Expr>{add(base, e, sp)}, sp);
      });
    });
  };
  bool a_in_registers = ra.buffer->is_fragment();
  Buffer a_reg = make_buffer(rc.buffer->name + "_a", in_t, {c(MI * kpl)}, scope::kLocal, sp);
  Buffer b_reg = make_buffer(rc.buffer->name + "_b", in_t, {c(NI * kpl)}, scope::kLocal, sp);
  Stmt kloop = unrolled("kk", KS, [&](const Expr& kk) {
    Expr k0 = mul(kk, c(s.k), sp);
    Stmt load_a = a_in_registers ? Stmt(nullptr) : unrolled("mi", MI, [&](const Expr& mi) {
      return load_items(a_reg, mul(mi, c(kpl), sp), [&](const Expr& e) {
        auto [outer, kin] = input_element(a_feeds_input_a, e);
        Expr row = add(add(row0, mul(mi, c(s.m), sp), sp), outer, sp), col = add(k0, kin, sp);
        return make_load(ra.buffer, g.trans_a ? operand_indices(g.a, col, row, sp) : operand_indices(g.a, row, col, sp),
                         sp);
      });
    });
    Stmt load_b = unrolled("ni", NI, [&](const Expr& ni) {
      return load_items(b_reg, mul(ni, c(kpl), sp), [&](const Expr& e) {
        auto [outer, kin] = input_element(!a_feeds_input_a, e);
        Expr col = add(add(col0, mul(ni, c(s.n), sp), sp), outer, sp), row = add(k0, kin, sp);
        return make_load(rb.buffer, g.trans_b ? operand_indices(g.b, col, row, sp) : operand_indices(g.b, row, col, sp),
                         sp);
      });
    });
    Stmt issue = unrolled("mi", MI, [&](const Expr& mi) {
      Expr a_op = a_in_registers ? fragment_slot(ra.buffer, amd::chained_a_slot(s, mi, kk, K), sp)
                                 : make_load(a_reg, {mul(mi, c(kpl), sp)}, sp);
      return unrolled("ni", NI, [&](const Expr& ni) {
        Expr b_op = make_load(b_reg, {mul(ni, c(kpl), sp)}, sp);
        Expr slot = mul(add(mul(mi, c(NI), sp), ni, sp), c(regs), sp);
        return evaluate(std::make_shared<CallNode>(
                            DataType::Void(), "matrix_core",
                            std::vector<Expr>{fragment_slot(rc.buffer, slot, sp), transposed ? b_op : a_op,
                                              transposed ? a_op : b_op,
                                              std::make_shared<StringImmNode>(ins.header_fn, sp), c(regs), c(kpl)},
                            sp),
                        sp);
      });
    });
    return make_seq({load_a, load_b, issue}, sp);
  });
  // The per-lane reads of contiguous K values become vector loads from LDS.
  kloop = vectorize_copies(kloop, ctx.analyzer);
  Stmt body = std::make_shared<AllocateNode>(b_reg, kloop, Attrs{}, sp);
  if (!a_in_registers) body = std::make_shared<AllocateNode>(a_reg, body, Attrs{}, sp);
  if (!attr_int(op, "clear_accum", 0)) return body;
  Stmt zero = unrolled("cz", MI * NI * regs, [&](const Expr& slot) -> Stmt {
    return std::make_shared<BufferStoreNode>(rc.buffer, cast(rc.buffer->dtype, c(0), sp), std::vector<Expr>{slot}, sp);
  });
  return make_seq({zero, body}, sp);
}

}  // namespace tl
