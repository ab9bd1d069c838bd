// CUDA C++ from thread-level IR (docs/gpu_lowering.md, "Thread-level IR").
//
// Structure: the host level of the function is a sequence of KernelNodes, possibly under
// LetStmts; each kernel becomes one `extern "C" __global__` function whose parameters are
// the same for every kernel (a fixed ABI: the function's parameters, then the shape
// variables as int64_t). Host lets in scope are re-evaluated inside each kernel (they
// depend only on parameters and shape variables); the runtime evaluates the grid from
// CudaKernelInfo, where those lets are substituted.
//
// Typing follows the CPU back end: the CUDA expression for an IR expression of dtype t has
// t's C++ type (__half for float16, ...); arithmetic on 16- and 8-bit floats happens in
// float, with a conversion on every load (__half2float) and a rounding on every store
// (__float2half_rn). Offsets into buffers whose size may exceed int32 (global buffers of
// symbolic or large shape) are computed in int64; the others in the index's own type.
//
// Vectorized loops: the lowering emits a Vectorized loop only when the accesses are
// aligned to the vector width, so a loop that is exactly `dst[base + v] = src[base2 + v]`
// (same dtype, 4, 8 or 16 bytes in all) becomes one access through uint32_t / uint2 /
// uint4, and `dst[base + v] = cast(fragment[base2 + v])` converts the lanes into an aligned
// array stored as one such access; `dst[base + v] = value(v)` (a T.Parallel body) reads the
// memory operands that move with the lane as vectors first, computes the lanes into an
// aligned array and stores it as one access; any other Vectorized loop is an unrolled
// scalar loop.
#include "codegen/cuda/codegen_cuda.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "codegen/c_like.h"
#include "ir/error.h"
#include "target/target.h"
#include "ir/functor.h"
#include "ir/intrinsics.h"
#include "ir/op.h"
#include "transform/check_thread_budget.h"
#include "transform/plan_shared_memory.h"

namespace tl {
namespace {

using namespace c_like;  // Emitter, Code, wrap, the precedence constants, the type helpers

// The block itself starts on 1 KiB: plan_shared_memory places tiles on 1 KiB offsets for
// the 8-row atoms of 128-byte swizzles.
constexpr int64_t kDynSmemBaseAlign = 1024;
constexpr int64_t kStaticSmemLimit = 48 * 1024;  // the most a kernel may declare statically

// ------------------------------------------------------------------ targets

// "sm_90a" -> 90; 0 when the string is not of that form (Target's parser).
int arch_number(const std::string& arch) {
  Target t;
  t.arch = arch;
  return t.arch_number();
}

const std::unordered_set<std::string>& cuda_reserved_names() {
  static const std::unordered_set<std::string> kNames = {
      "blockIdx", "threadIdx", "blockDim", "gridDim", "warpSize", "dim3", "half",  "uint2",
      "uint4",    "int2",      "int4",     "float2",  "float4",   "uint", "ulong", "tl_dyn_smem",
  };
  return kNames;
}

// ------------------------------------------------------------------ small analyses

bool mentions_var(const Expr& e, const VarNode* v) {
  bool found = false;
  for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) {
    if (n == v) found = true;
  });
  return found;
}

const void* buffer_key(const Buffer& b) {
  return b->data ? (const void*)b->data.get() : (const void*)b.get();
}

// What a kernel body touches: variables, and buffers read or written.
struct KernelUses {
  std::unordered_set<const VarNode*> vars;
  std::unordered_set<const void*> read, written;
  std::unordered_set<const void*> multi_dim;  // indexed with more than one index (strides used)
};

KernelUses collect_uses(const Stmt& body) {
  struct Collector : IRVisitor {
    KernelUses* uses;
    void visit_var(const VarNode* v) override { uses->vars.insert(v); }
    void visit_load(const BufferLoadNode* n) override {
      uses->read.insert(buffer_key(n->buffer));
      if (n->indices.size() > 1) uses->multi_dim.insert(buffer_key(n->buffer));
      IRVisitor::visit_load(n);
    }
    void visit_store(const BufferStoreNode* n) override {
      uses->written.insert(buffer_key(n->buffer));
      if (n->indices.size() > 1) uses->multi_dim.insert(buffer_key(n->buffer));
      IRVisitor::visit_store(n);
    }
    void visit_call(const CallNode* n) override {
      // The destination of an atomic, of cp.async and of a TMA store or reduction is
      // written through its BufferLoad.
      bool writes_first = n->op.rfind("atomic_", 0) == 0 || n->op == "cp_async" || n->op == "tma_store" ||
                          n->op == "tma_reduce_add";
      if (writes_first && !n->args.empty())
        if (auto* dst = as<BufferLoadNode>(n->args[0])) uses->written.insert(buffer_key(dst->buffer));
      IRVisitor::visit_call(n);
    }
  } collector;
  KernelUses uses;
  collector.uses = &uses;
  collector.visit(body);
  return uses;
}

// A host-level kernel and the lets in scope around it, outermost first.
struct KernelSite {
  const KernelNode* kernel;
  std::vector<const LetStmtNode*> lets;
};

std::vector<KernelSite> find_kernels(const PrimFunc& f, const std::string& target = "cuda") {
  std::vector<KernelSite> sites;
  std::vector<const LetStmtNode*> lets;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (auto& x : as<SeqStmtNode>(s)->seq) walk(x);
        return;
      case StmtKind::LetStmt: {
        auto* let = as<LetStmtNode>(s);
        lets.push_back(let);
        walk(let->body);
        lets.pop_back();
        return;
      }
      case StmtKind::Kernel:
        sites.push_back({as<KernelNode>(s), lets});
        return;
      case StmtKind::Evaluate:
        if (as<EvaluateNode>(s)->value->kind == ExprKind::IntImm) return;  // a no-op
        break;
      case StmtKind::TileOp:
        fail(ErrorKind::Internal, s->span,
             "internal: tile operator T." + as<TileOpNode>(s)->op +
                 " was not lowered before CUDA code generation",
             "this is a compiler bug; please report it with the kernel");
      default:
        break;
    }
    fail(ErrorKind::Unsupported, s->span, "a statement outside T.Kernel, which target " + target + " does not support",
         "move the work inside a `with T.Kernel(...)` block");
  };
  walk(f->body);
  return sites;
}

// tma_load(global element, shared element, mbarrier element, swizzle bytes, rank,
//          box..., coords...) and tma_store (the same, 0 for the mbarrier): the map it needs.
// A TMA load's cache policy: its last argument l2_policy(k) (T.copy's eviction_policy).
const CallNode* l2_policy_of(const CallNode* call) {
  auto* last = call->args.empty() ? nullptr : dynamic_cast<const CallNode*>(call->args.back().get());
  return last && last->op == "l2_policy" ? last : nullptr;
}

TensorMapSpec tma_spec_of(const CallNode* call) {
  TensorMapSpec spec;
  spec.dtype = call->args.at(0)->dtype;
  spec.swizzle_bytes = int(*const_int(call->args.at(3)));
  int64_t rank = *const_int(call->args.at(4));
  for (int64_t d = 0; d < rank; ++d) spec.box.push_back(*const_int(call->args.at(5 + d)));
  // After the coordinates, a load or store of a reordered tensor names the order.
  int64_t args = int64_t(call->args.size()) - (l2_policy_of(call) ? 1 : 0);
  if (call->op != "tma_load_multicast" && args == 5 + 3 * rank)
    for (int64_t d = 0; d < rank; ++d) spec.order.push_back(*const_int(call->args.at(size_t(5 + 2 * rank + d))));
  return spec;
}

std::vector<CudaKernelParam> kernel_params(const PrimFuncNode& f) {
  std::vector<CudaKernelParam> out;
  std::unordered_set<const VarNode*> scalars;
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    if (p.is_buffer()) {
      out.push_back({CudaKernelParam::Kind::Buffer, p.buffer->name, p.buffer->dtype,
                     p.var ? p.var : p.buffer->data, int(i)});
    } else {
      out.push_back({CudaKernelParam::Kind::Scalar, p.var->name, p.var->dtype, p.var, int(i)});
      scalars.insert(p.var.get());
    }
  }
  for (const Var& v : shape_vars(f)) {
    if (scalars.count(v.get())) continue;
    out.push_back({CudaKernelParam::Kind::ShapeVar, v->name, DataType::Int(64), v, -1});
  }
  // TMA tensor maps: one per (global buffer, box, swizzle) that a tma_load or tma_store
  // names, in order of first use.
  for_each_expr(f.body, [&](const ExprNode* e) {
    auto* call = dynamic_cast<const CallNode*>(e);
    if (!call || (call->op != "tma_load" && call->op != "tma_load_multicast" && call->op != "tma_store" &&
                  call->op != "tma_reduce_add"))
      return;
    auto* g = as<BufferLoadNode>(call->args.at(0));
    int index = -1;
    for (size_t i = 0; g && i < f.params.size(); ++i)
      if (f.params[i].is_buffer() && f.params[i].buffer.get() == g->buffer.get()) index = int(i);
    if (index < 0) fail(ErrorKind::Internal, call->span, "internal: a TMA copy from a buffer that is not a parameter");
    TensorMapSpec spec = tma_spec_of(call);
    for (auto& p : out)
      if (p.kind == CudaKernelParam::Kind::TensorMap && p.param_index == index && p.tma.box == spec.box &&
          p.tma.swizzle_bytes == spec.swizzle_bytes && p.tma.order == spec.order)
        return;
    int n = 0;
    for (auto& p : out) n += p.kind == CudaKernelParam::Kind::TensorMap;
    CudaKernelParam p{CudaKernelParam::Kind::TensorMap, g->buffer->name + "_tmap" + std::to_string(n), spec.dtype,
                      nullptr, index};
    p.tma = spec;
    out.push_back(p);
  });
  return out;
}

std::string kernel_name(const PrimFuncNode& f, size_t index, size_t count) {
  std::string base = sanitize(f.name) + "_kernel";
  return count == 1 ? base : base + std::to_string(index);
}

// When `index` is `base + v` (v the lane variable, base free of it), returns base
// (nullptr for `v` alone); otherwise sets *ok = false.
Expr lane_base(const Expr& index, const VarNode* v, bool* ok) {
  if (index.get() == v) return nullptr;
  if (auto* b = as<BinaryNode>(index); b && b->op == BinaryOp::Add && b->dtype.is_int()) {
    bool in_a = mentions_var(b->a, v), in_b = mentions_var(b->b, v);
    if (in_a != in_b) {
      const Expr& lane_side = in_a ? b->a : b->b;
      const Expr& other = in_a ? b->b : b->a;
      Expr inner = lane_base(lane_side, v, ok);
      return inner ? add(inner, other) : other;
    }
  }
  *ok = false;
  return nullptr;
}

// ------------------------------------------------------------------ the generator

struct BufferInfo {
  std::string name;
  bool scalar = false;               // local.var: a plain variable
  bool wide_offsets = false;         // flatten indices in int64
  std::vector<std::string> strides;  // precomputed int64 stride names (params), else empty
  const BufferNode* owner = nullptr;  // the buffer declared; others with its data are T.reshape/T.view aliases
  DataType dtype;                     // the declared element type
};

class CodeGenCUDA : public Emitter {
 public:
  CodeGenCUDA(const PrimFunc& f, const CudaCodegenOptions& opts)
      : Emitter(opts.dialect ? opts.dialect->target_name() : "cuda", "internal: "),
        func_(f),
        opts_(opts),
        dialect_(opts.dialect) {}

  std::string run() {
    auto sites = find_kernels(func_, target_);
    params_ = kernel_params(*func_);
    line("// Generated by the TileLang " + language() + " back end from '" + func_->name + "' for " + opts_.arch + ".");
    line("#include \"" + (dialect_ ? dialect_->header() : std::string("tl/cuda/tl_cuda.h")) + "\"");
    emit_prelude(*func_);
    for (size_t i = 0; i < sites.size(); ++i) {
      line("");
      emit_kernel(sites[i], kernel_name(*func_, i, sites.size()));
    }
    return out_.str();
  }

 private:
  // ---------------------------------------------------------------- scopes
  const BufferInfo& buffer_info(const Buffer& b, Span span) {
    auto it = buffers_.find(buffer_key(b));
    if (it == buffers_.end())
      fail(ErrorKind::Internal, span, "internal: buffer '" + b->name + "' is used outside its allocation",
           "this is a compiler bug; please report it with the kernel");
    return it->second;
  }
  template <typename Fn>
  void with_buffer(const Buffer& b, const BufferInfo& info, Fn fn) {
    auto it = buffers_.find(buffer_key(b));
    std::optional<BufferInfo> saved;
    if (it != buffers_.end()) saved = it->second;
    buffers_[buffer_key(b)] = info;
    fn();
    if (saved)
      buffers_[buffer_key(b)] = *saved;
    else
      buffers_.erase(buffer_key(b));
  }

  // Offsets need int64 unless every in-bounds element offset fits in int32.
  static bool needs_wide_offsets(const Buffer& b) {
    int64_t n = b->const_size();
    return n < 0 || n > std::numeric_limits<int32_t>::max();
  }

  // ---------------------------------------------------------------- kernels
  void emit_kernel(const KernelSite& site, const std::string& name) {
    const KernelNode* k = site.kernel;
    current_kernel_ = k;
    committed_groups_.clear();
    group_buffers_.clear();
    spills_ = per_thread_array_bytes(*k) > kCudaRegisterBytes;
    check_kernel_shape(k);
    SharedMemoryUse plan = shared_memory_use(k);
    const int64_t static_limit = dialect_ ? dialect_->static_shared_limit() : kStaticSmemLimit;
    if (plan.static_bytes > static_limit)
      fail(ErrorKind::Unsupported, k->span,
           "the kernel declares " + std::to_string(plan.static_bytes) + " bytes of static shared memory; " +
               language() + " allows at most " + std::to_string(static_limit),
           "allocate large tiles in dynamic shared memory (scope \"shared.dyn\")");
    // The per-block total against the architecture's limit is check_block_budget's.
    plan_ = &plan;
    KernelUses uses = collect_uses(k->body);
    auto add_vars = [&](const Expr& e) {
      for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* x) {
        if (x->kind == ExprKind::Var) uses.vars.insert(static_cast<const VarNode*>(x));
      });
    };
    // Strides of multi-dimensional parameters, then the host lets the kernel needs, innermost first.
    for (auto& p : func_->params)
      if (p.is_buffer() && uses.multi_dim.count(buffer_key(p.buffer)))
        for (auto& s : p.buffer->effective_strides()) add_vars(s);
    for (auto it = site.lets.rbegin(); it != site.lets.rend(); ++it)
      if (uses.vars.count((*it)->var.get())) add_vars((*it)->value);

    names_ = NameTable(&cuda_reserved_names());
    tensor_maps_.clear();
    var_names_.clear();
    nonneg_.clear();
    buffers_.clear();
    // Parameters.
    std::vector<std::string> decls;
    std::vector<std::tuple<const VarNode*, std::string, std::string>> shape_locals;  // narrowed shape vars
    for (const CudaKernelParam& p : params_) {
      if (p.kind == CudaKernelParam::Kind::TensorMap) {
        if (dialect_) dialect_->require("TMA", k->span);
        std::string n = names_.fresh(p.name);
        tensor_maps_.push_back({&p, n});
        decls.push_back("const __grid_constant__ tl::TensorMap " + n);
        continue;
      }
      if (p.kind == CudaKernelParam::Kind::Buffer) {
        const Buffer& b = func_->params[size_t(p.param_index)].buffer;
        if (!b->is_global())
          fail(ErrorKind::Unsupported, b->span, "parameter '" + b->name + "' is in scope '" + b->scope + "'",
               "kernel parameters are global tensors");
        std::string t = ctype(b->dtype, b->span, "buffer '" + b->name + "'");
        BufferInfo info;
        info.name = names_.fresh(b->name);
        info.owner = b.get();
        info.dtype = b->dtype;
        info.wide_offsets = needs_wide_offsets(b);
        const void* key = buffer_key(b);
        bool used = uses.read.count(key) || uses.written.count(key);
        bool read_only = used && !uses.written.count(key);
        bool restrict = used && !may_alias(*func_, b->name);
        decls.push_back(std::string(read_only ? "const " : "") + t + (restrict ? "* __restrict__ " : "* ") +
                        info.name);
        buffers_[key] = info;
        if (p.var && p.var.get() != b->data.get()) var_names_[p.var.get()] = info.name;
      } else if (p.kind == CudaKernelParam::Kind::Scalar) {
        std::string t = ctype(p.var->dtype, p.var->span, "parameter '" + p.var->name + "'");
        std::string n = names_.fresh(p.var->name);
        var_names_[p.var.get()] = n;
        decls.push_back("const " + t + " " + n);
      } else {
        const Var& v = p.var;
        std::string t = ctype(v->dtype, v->span, "shape variable '" + v->name + "'");
        if (!v->dtype.is_integer())
          fail(ErrorKind::Type, v->span, "shape variable '" + v->name + "' has dtype " + v->dtype.str(),
               "dynamic dimensions are integers");
        std::string n = names_.fresh(v->name);
        if (v->dtype == DataType::Int(64)) {
          decls.push_back("const int64_t " + n);
        } else {
          std::string arg = names_.fresh(v->name + "_i64");
          decls.push_back("const int64_t " + arg);
          shape_locals.emplace_back(v.get(), "const " + t + " " + n, "(" + t + ")" + arg);
        }
        var_names_[v.get()] = n;
        nonneg_.insert(v.get());  // extents are at least 1
      }
    }
    // setmaxnreg acts only under a register cap at entry: one block per multiprocessor.
    bool rebalances = false;
    for_each_expr(k->body, [&](const ExprNode* e) {
      if (auto* c = dynamic_cast<const CallNode*>(e)) rebalances = rebalances || c->op == "set_max_nreg";
    });
    // T.annotate_min_blocks_per_sm(m): the launch bounds' second argument.
    int64_t min_blocks = 0;
    for_each_expr(k->body, [&](const ExprNode* e) {
      auto* c = dynamic_cast<const CallNode*>(e);
      if (c && c->op == "min_blocks_per_sm" && !c->args.empty())
        if (const int64_t* m = const_int(c->args[0])) min_blocks = *m;
    });
    if (rebalances && min_blocks > 1)
      fail(ErrorKind::Unsupported, k->span,
           "T.annotate_min_blocks_per_sm(" + std::to_string(min_blocks) + ") in a warp-specialised kernel: its "
           "register reallocation (setmaxnreg) needs one block per multiprocessor",
           "drop the annotation, or pass the pass config tl.disable_warp_specialized");
    if (rebalances) min_blocks = 1;
    std::string bounds = opts_.launch_bounds || min_blocks
                             ? "__launch_bounds__(" + std::to_string(k->num_threads()) +
                                   (min_blocks ? ", " + std::to_string(min_blocks) : "") + ") "
                             : "";
    if (!k->cluster.empty()) {
      require_arch(90, k->span, "thread-block clusters");
      bounds += "__cluster_dims__(" + std::to_string(k->cluster[0]) + ", " + std::to_string(k->cluster[1]) + ", " +
                std::to_string(k->cluster[2]) + ") ";
    }
    std::string sig = "extern \"C\" __global__ void " + bounds + name + "(";
    for (size_t i = 0; i < decls.size(); ++i) sig += (i ? ", " : "") + decls[i];
    line(sig + ") {");
    ++indent_;
    for (auto& [var, decl, init] : shape_locals)
      if (uses.vars.count(var)) line(decl + " = " + init + ";");
    if (plan.dyn_bytes > 0 || !plan.dyn_offsets.empty())
      line("extern __shared__ __align__(" + std::to_string(kDynSmemBaseAlign) + ") uint8_t tl_dyn_smem[];");
    // Host lets, re-evaluated here (they depend only on parameters and shape variables).
    std::vector<std::string> let_names;
    for (auto* let : site.lets) {
      if (!uses.vars.count(let->var.get())) continue;
      std::string t = ctype(let->var->dtype, let->span, "variable '" + let->var->name + "'");
      Code value = convert(let->value, let->var->dtype);
      std::string n = names_.fresh(let->var->name);
      line("const " + t + " " + n + " = " + value.text + ";");
      var_names_[let->var.get()] = n;
      if (let->var->dtype.is_integer() && nonneg(let->value)) nonneg_.insert(let->var.get());
    }
    // Symbolic strides of the used parameters, once, in int64.
    for (auto& p : func_->params) {
      if (!p.is_buffer()) continue;
      const void* key = buffer_key(p.buffer);
      if (!uses.multi_dim.count(key)) continue;
      BufferInfo& info = buffers_[key];
      auto strides = p.buffer->effective_strides();
      info.strides.resize(strides.size());
      for (size_t d = 0; d < strides.size(); ++d) {
        if (const_int(strides[d])) continue;
        info.strides[d] = names_.fresh(info.name + "_stride" + std::to_string(d));
        line("const int64_t " + info.strides[d] + " = " + emit_int64(strides[d]).text + ";");
      }
    }
    // Block and thread indices that the body uses.
    auto bind_builtin = [&](const Var& v, const std::string& builtin) {
      std::string t = ctype(v->dtype, k->span, "index '" + v->name + "'");
      if (!v->dtype.is_integer())
        fail(ErrorKind::Type, k->span, "block or thread index '" + v->name + "' must be an integer");
      std::string n = names_.fresh(v->name);
      if (uses.vars.count(v.get())) line("const " + t + " " + n + " = (" + t + ")" + builtin + ";");
      var_names_[v.get()] = n;
      nonneg_.insert(v.get());
    };
    // T.use_swizzle: the first two block indices come from the panel-by-panel order.
    const CallNode* swizzle = nullptr;
    for_each_expr(k->body, [&](const ExprNode* e) {
      if (auto* c = dynamic_cast<const CallNode*>(e); c && c->op == "use_swizzle") swizzle = c;
    });
    if (swizzle && k->block_vars.size() >= 2) {
      std::string bx = names_.fresh(k->block_vars[0]->name), by = names_.fresh(k->block_vars[1]->name);
      line("int32_t " + bx + ", " + by + ";");
      std::string order = const_arg(swizzle, 1, "order") ? "true" : "false";
      std::string panel = std::to_string(const_arg(swizzle, 0, "panel size"));
      if (k->cluster.empty())
        line("tl::rasterize<" + panel + ", " + order + ">(" + bx + ", " + by + ");");
      else  // whole clusters move: their blocks keep sharing a row or column of tiles
        line("tl::rasterize_cluster<" + panel + ", " + order + ", " + std::to_string(k->cluster[0]) + ", " +
             std::to_string(k->cluster[1]) + ">(" + bx + ", " + by + ");");
      for (int d = 0; d < 2; ++d) {
        var_names_[k->block_vars[d].get()] = d ? by : bx;
        nonneg_.insert(k->block_vars[d].get());
      }
    }
    for (size_t d = swizzle && k->block_vars.size() >= 2 ? 2 : 0; d < k->block_vars.size(); ++d)
      bind_builtin(k->block_vars[d], std::string("blockIdx.") + "xyz"[d]);
    for (size_t d = 0; d < k->thread_vars.size(); ++d)
      bind_builtin(k->thread_vars[d], std::string("threadIdx.") + "xyz"[d]);
    // The tensor maps are fetched once per block, while the barriers are set up.
    if (!tensor_maps_.empty()) {
      line("if (threadIdx.x == 0) {");
      ++indent_;
      for (auto& [p, map] : tensor_maps_) line("tl::prefetch_tensor_map(" + map + ");");
      --indent_;
      line("}");
    }
    emit_stmt(k->body);
    --indent_;
    line("}");
    plan_ = nullptr;
  }

  std::string language() const { return dialect_ ? dialect_->language() : "CUDA"; }

  void check_kernel_shape(const KernelNode* k) const {
    if (k->grid.empty() || k->grid.size() > 3 || k->grid.size() != k->block_vars.size())
      fail(ErrorKind::Unsupported, k->span, "T.Kernel takes 1 to 3 grid extents on target " + target_,
           "fold the extra dimensions into one block index and recover them with // and %");
    for (size_t d = 0; d < k->grid.size(); ++d) {
      const int64_t* g = const_int(k->grid[d]);
      int64_t limit = d == 0 ? std::numeric_limits<int32_t>::max() : 65535;
      if (g && (*g < 1 || *g > limit))
        fail(ErrorKind::Unsupported, k->span,
             std::string("grid extent ") + "xyz"[d] + " = " + std::to_string(*g) +
                 " is outside " + language() + "'s range 1.." + std::to_string(limit),
             "put the largest extent first (blockIdx.x allows 2^31 - 1 blocks)");
    }
    if (k->threads.empty() || k->threads.size() > 3 || k->thread_vars.size() > k->threads.size())
      fail(ErrorKind::Unsupported, k->span, "T.Kernel takes 1 to 3 thread extents on target " + target_);
    static const int64_t kMaxDim[3] = {1024, 1024, 64};
    for (size_t d = 0; d < k->threads.size(); ++d)
      if (k->threads[d] < 1 || k->threads[d] > kMaxDim[d])
        fail(ErrorKind::Unsupported, k->span,
             std::string("thread extent ") + "xyz"[d] + " = " + std::to_string(k->threads[d]) +
                 " is outside " + language() + "'s range 1.." + std::to_string(kMaxDim[d]));
    if (k->num_threads() > 1024)
      fail(ErrorKind::Unsupported, k->span,
           "a block of " + std::to_string(k->num_threads()) + " threads; " + language() + " allows at most 1024",
           "use fewer threads per block (threads=...) and more blocks");
  }

  // ---------------------------------------------------------------- expressions
  std::string storage_type_name(DataType t) override {
    if (dialect_) return dialect_->storage_type(t, {});
    switch (t.code) {
      case TypeCode::BFloat:
        return "__nv_bfloat16";
      case TypeCode::Float8E4M3:
        return "__nv_fp8_e4m3";
      case TypeCode::Float8E5M2:
        return "__nv_fp8_e5m2";
      default:
        return "__half";
    }
  }

  // Rounds a float or double computed value to a storage float type.
  Code to_storage(const Code& c, DataType from, DataType to) const {
    bool from_double = from == DataType::Float(64);
    std::string arg = from_double || from == DataType::Float(32) ? c.text : "(float)" + wrap(c, kUnary);
    if (dialect_) return {dialect_->to_storage_fn(to, from_double) + "(" + arg + ")"};
    switch (to.code) {
      case TypeCode::Float:
        return {(from_double ? "__double2half(" : "__float2half_rn(") + arg + ")"};
      case TypeCode::BFloat:  // a double rounds to float first, as ml_dtypes does
        return {"__float2bfloat16_rn(" + (from_double ? "(float)" + wrap(c, kUnary) : arg) + ")"};
      case TypeCode::Float8E4M3:
        return {"tl::to_float8_e4m3(" + arg + ")"};
      default:
        return {"tl::to_float8_e5m2(" + arg + ")"};
    }
  }
  Code storage_to_float(const Code& c, DataType from) const {
    if (dialect_) return {dialect_->to_float_fn(from) + "(" + c.text + ")"};
    if (from.code == TypeCode::Float) return {"__half2float(" + c.text + ")"};
    if (from.code == TypeCode::BFloat) return {"__bfloat162float(" + c.text + ")"};
    return {"tl::to_float(" + c.text + ")"};
  }

  Code convert_code(const Code& c, DataType from, DataType to, Span span) override {
    if (from == to) return c;
    std::string t = ctype(to, span);
    if (to.is_bool()) {
      if (is_storage_float(from)) return {storage_to_float(c, from).text + " != 0.0f", kEq};
      return {wrap(c, kRel) + " != 0", kEq};
    }
    if (is_storage_float(to)) {
      if (is_storage_float(from)) return to_storage(storage_to_float(c, from), DataType::Float(32), to);
      return to_storage(c, from, to);
    }
    if (is_storage_float(from)) {
      Code f = storage_to_float(c, from);
      if (to == DataType::Float(32)) return f;
      return {"(" + t + ")" + f.text, kUnary};
    }
    return {"(" + t + ")" + wrap(c, kUnary), kUnary};
  }
  Code finish(const Code& c, DataType t, Span span) override {
    if (is_storage_float(t)) return to_storage(c, DataType::Float(32), t);
    if (t.is_integer() && t.bits < 32) return {"(" + ctype(t, span) + ")" + wrap(c, kUnary), kUnary};
    return c;
  }

  Code float_literal(double v, DataType t) {
    bool single = compute_type(t).bits == 32;
    if (std::isnan(v))
      return {single ? "__int_as_float(0x7fffffff)" : "__longlong_as_double(0x7ff8000000000000LL)"};
    if (std::isinf(v)) {
      std::string inf = single ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
      return v < 0 ? Code{"-" + inf, kUnary} : Code{inf};
    }
    Code lit{finite_float_literal(v, single)};
    if (lit.text[0] == '-') lit.prec = kUnary;
    return lit;
  }

  Code emit_float(const FloatImmNode* n) override {
    Code lit = float_literal(n->value, n->dtype);
    if (is_storage_float(n->dtype)) return to_storage(lit, DataType::Float(32), n->dtype);
    return lit;
  }

  Code emit_int(const IntImmNode* n) override {
    DataType t = n->dtype;
    int64_t v = n->value;
    if (t.is_bool()) return {v ? "true" : "false"};
    if (t.is_int() && t.bits == 32) {
      if (v == std::numeric_limits<int32_t>::min()) return {"(-2147483647 - 1)", kAdd};
      return {std::to_string(v), v < 0 ? kUnary : kPrimary};
    }
    if (t.is_int() && t.bits == 64) {
      if (v == std::numeric_limits<int64_t>::min()) return {"(int64_t)(-9223372036854775807LL - 1)", kUnary};
      return {"(int64_t)" + std::to_string(v) +
                  (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max() ? "LL"
                                                                                                      : ""),
              kUnary};
    }
    if (t.is_uint() && t.bits == 32) return {std::to_string(uint32_t(v)) + "u"};
    if (t.is_uint() && t.bits == 64) return {"(uint64_t)" + std::to_string(uint64_t(v)) + "ull", kUnary};
    if (t.is_uint())
      return {"(" + ctype(t, n->span) + ")" + std::to_string(uint64_t(v) & ((1u << t.bits) - 1)), kUnary};
    if (t.is_int()) {
      Code lit{std::to_string(v), v < 0 ? kUnary : kPrimary};
      return {"(" + ctype(t, n->span) + ")" + wrap(lit, kPrimary), kUnary};
    }
    // An integer immediate of a float dtype (hand-built IR).
    return emit(std::make_shared<FloatImmNode>(t, double(v), n->span));
  }

  static bool is_statement_call(const std::string& op) {
    return op == "print" || op == "sync_threads" || op == "cp_async" || op == "cp_async_commit" ||
           op == "cp_async_wait" || op == "ldmatrix" || op == "mma_sync" || op == "matrix_core" || op == "use_swizzle" || op == "min_blocks_per_sm" || op == "pdl_trigger" ||
           op == "device_assert" ||
           op == "pdl_sync" || op == "sync_grid" || op == "thread_return" ||
           op == "no_set_max_nreg" || op == "wgmma" ||
           op == "wgmma_fence" || op == "wgmma_commit" || op == "wgmma_wait" || op == "fence_proxy_async" ||
           op == "tma_load" || op == "tma_store" || op == "tma_reduce_add" || op == "tma_store_commit" ||
           op == "tma_store_wait_read" ||
           op == "tma_store_wait" ||
           op == "mbarrier_init" || op == "mbarrier_expect_tx" || op == "mbarrier_arrive" ||
           op == "mbarrier_arrive_expect_tx" || op == "mbarrier_init_all" ||
           op == "mbarrier_wait" || op == "cp_async_barrier_noinc" || op == "set_max_nreg" ||
           op == "named_barrier_sync" || op == "named_barrier_arrive" || op == "ws_role" ||
           op == "wait_wgmma" || op == "tma_load_multicast" || op == "cluster_arrive" ||
           op == "cluster_arrive_relaxed" || op == "cluster_wait" || op == "cluster_sync" ||
           op == "fence_barrier_init" || op == "mbarrier_arrive_remote" || op == "mbarrier_arrive_cluster" ||
           op == "warpgroup_turn_wait" || op == "warpgroup_turn_pass" || op == "warpgroup_turn_first" ||
           op == "warpgroup_turn_last" || op == "warpgroup_turn_open" || op == "warpgroup_turn_close";
  }

  Code float_min_max(bool is_max, DataType t, const Code& a, const Code& b, Span span) override {
    if (t != DataType::Float(32)) return Emitter::float_min_max(is_max, t, a, b, span);
    return {std::string(is_max ? "tl::max_nan(" : "tl::min_nan(") + a.text + ", " + b.text + ")"};
  }

  Code emit_call(const CallNode* n) override {
    const std::string& op = n->op;
    Span sp = n->span;
    if (op == "thread_index")
      fail(ErrorKind::Internal, sp, "internal: thread_index() was not lowered to a thread variable",
           "the GPU pipeline binds thread indices to the kernel's thread variables; this is a compiler bug");
    if (is_statement_call(op))
      fail(ErrorKind::Internal, sp, "internal: T." + op + " is used as a value", "call it as a statement");
    if (Code c; emit_extern_call(n, &c)) return c;
    if (op == "atomic_add" || op == "atomic_max" || op == "atomic_min" || op == "atomic_or") return emit_atomic(n);
    if (op == "atomic_load") return {atomic_load_store(n)};
    if (op == "shfl_xor") return emit_shfl_xor(n);
    if (op.rfind("warp_shfl", 0) == 0) {
      // T.shfl_xor / shfl_down / shfl_up / shfl_sync: the whole warp takes part (the
      // headers' tl::shfl* on CUDA and HIP).
      if (n->args.size() != 3) fail(ErrorKind::Internal, sp, "internal: " + op + " takes (value, lane, width)");
      std::string fn = "tl::" + op.substr(5);  // warp_shfl_xor -> tl::shfl_xor
      Code value = convert(n->args[0], n->args[0]->dtype);
      return convert_code({fn + "(" + value.text + ", " + convert(n->args[1], DataType::Int(32)).text + ", " +
                           convert(n->args[2], DataType::Int(32)).text + ")"},
                          n->args[0]->dtype, n->dtype, sp);
    }
    if (op == "block_rank_in_cluster") {
      require_arch(90, sp, "thread-block clusters");
      return {"tl::block_rank_in_cluster()"};
    }
    if (op == "wgmma_desc") {
      // wgmma_desc(shared element, LBO bytes, SBO bytes, swizzle code): a matrix descriptor.
      require_arch(90, sp, "wgmma");
      auto* at = n->args.size() == 4 ? as<BufferLoadNode>(n->args[0]) : nullptr;
      if (!at || !at->buffer->is_shared()) fail(ErrorKind::Internal, sp, "internal: wgmma_desc takes a shared element");
      return {"tl::wgmma_desc(&" + element(at->buffer, at->indices, at->span) + ", " +
              std::to_string(const_arg(n, 1, "LBO")) + ", " + std::to_string(const_arg(n, 2, "SBO")) + ", " +
              std::to_string(const_arg(n, 3, "swizzle")) + ")"};
    }
    return emit_intrinsic(n);
  }

  // language/warp.py's primitives: tl::<op>(...) of the CUDA and HIP headers (masks as
  // 32-bit, predicates as int; a warp reduction in the value's compute type).
  Code emit_warp_primitive(const CallNode* n) override {
    const std::string& op = n->op;
    std::string text = "tl::" + op + "(";
    if (op.rfind("warp_reduce_", 0) == 0) {
      DataType ct = compute_type(n->args[0]->dtype);
      return convert_code({text + convert(n->args[0], ct).text + ")"}, ct, n->dtype, n->span);
    }
    if (op == "match_any_sync" || op == "match_all_sync") {  // (mask, value): the value in its own type
      if (dialect_) dialect_->require("warp match (__match_any_sync / __match_all_sync)", n->span);
      return {text + convert(n->args[0], DataType::UInt(32)).text + ", " + emit(n->args[1]).text + ")"};
    }
    for (size_t i = 0; i < n->args.size(); ++i) {
      bool mask = i == 0 && (op == "any_sync" || op == "all_sync" || op == "ballot_sync" || op == "sync_warp");
      text += (i ? ", " : "") + convert(n->args[i], mask ? DataType::UInt(32) : DataType::Int(32)).text;
    }
    return {text + ")"};
  }

  // atomic_add/max/min(BufferLoad, value[, memory order]): the element's previous value.
  Code emit_atomic(const CallNode* n) {
    const std::string& op = n->op;
    if (!is_atomic_call(n))
      fail(ErrorKind::Internal, n->span, "internal: T." + op + " takes an element, a value and a memory order");
    auto* dst = as<BufferLoadNode>(n->args[0]);
    if (!dst)
      fail(ErrorKind::Type, n->span, "the first argument of T." + op + " must be a buffer element",
           "write T." + op + "(C[i, j], value)");
    const Buffer& b = dst->buffer;
    ctype(b->dtype, dst->span, "buffer '" + b->name + "'");
    if (b->dtype.is_bool())
      fail(ErrorKind::Unsupported, n->span, "T." + op + " on a bool buffer is not supported");
    if (b->scope == scope::kLocalVar || b->scope == scope::kLocal)
      fail(ErrorKind::Unsupported, n->span, "T." + op + " on a per-thread buffer ('" + b->name + "')",
           "atomics update global or shared memory; update a local value directly");
    Code value = convert(n->args[1], b->dtype);
    return {ordered_atomic("tl::" + op + "(&" + element(b, dst->indices, dst->span) + ", " + value.text + ")",
                           atomic_memory_order(n))};
  }

  Code emit_shfl_xor(const CallNode* n) {
    if (n->args.size() != 3)
      fail(ErrorKind::Internal, n->span, "internal: shfl_xor takes (value, lane_mask, width)");
    const Expr& v = n->args[0];
    std::string mask = convert(n->args[1], DataType::Int(32)).text;
    std::string width = convert(n->args[2], DataType::Int(32)).text;
    DataType t = v->dtype;
    Code value = convert(v, t);
    Code r;
    if (dialect_) return convert_code({dialect_->shfl_xor(value.text, mask, width, t)}, t, n->dtype, n->span);
    // The 8-bit floats and bool have no hardware shuffle overload: the header's wrapper widens them.
    if (t.is_bool() || t.code == TypeCode::Float8E4M3 || t.code == TypeCode::Float8E5M2)
      r = {"tl::shfl_xor(" + value.text + ", " + mask + ", " + width + ")"};
    else
      r = {"__shfl_xor_sync(0xffffffffu, " + value.text + ", " + mask + ", " + width + ")"};
    return convert_code(r, t, n->dtype, n->span);
  }

  // A literal that is an int64 wherever it meets an int64 operand.
  Code int64_literal(int64_t v) override {
    if (v == std::numeric_limits<int64_t>::min()) return {"(-9223372036854775807LL - 1)", kAdd};
    bool wide = v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max();
    return {std::to_string(v) + (wide ? "LL" : ""), v < 0 ? kUnary : kPrimary};
  }

  std::string int64_arg(int64_t v) override { return "(int64_t)" + wrap(int64_literal(v), kPrimary); }

  // `name[offset]` (or the scalar of a local.var) for an element of b.
  std::string element(const Buffer& b, const std::vector<Expr>& indices, Span span) override {
    const BufferInfo& info = buffer_info(b, span);
    if (info.scalar) return info.name;
    std::string base = info.name;
    // A T.view with another dtype: the same bytes through a pointer of its own type.
    if (info.owner && b->dtype != info.dtype)
      base = "((" + ctype(b->dtype, span, "buffer '" + b->name + "'") + "*)" + info.name + ")";
    return base + "[" + offset(b, info, indices, span) + "]";
  }

  std::string offset(const Buffer& b, const BufferInfo& info, const std::vector<Expr>& indices, Span span) {
    if (indices.empty()) return "0";
    std::vector<Expr> strides = index_strides(b, indices, span, "internal: ");
    for (auto& i : indices)
      if (!i->dtype.is_integer())
        fail(ErrorKind::Type, span,
             "buffer '" + b->name + "' is indexed with a value of dtype " + i->dtype.str(),
             "indices are integers");
    if (indices.size() == 1 && const_int(strides[0]) && *const_int(strides[0]) == 1)
      return emit(indices[0]).text;
    // Narrow offsets: a buffer of fewer than 2^31 elements indexed with int32 values.
    bool narrow = !info.wide_offsets && (info.owner == b.get() || !needs_wide_offsets(b));
    for (auto& i : indices) narrow = narrow && i->dtype.is_int() && i->dtype.bits <= 32;
    std::vector<std::string> terms;
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t* stride = const_int(strides[d]);
      const int64_t* idx_const = const_int(indices[d]);
      if ((stride && *stride == 0) || (idx_const && *idx_const == 0)) continue;
      Code idx = emit(indices[d]);
      if (stride && *stride == 1) {
        terms.push_back(wrap(idx, kAdd - 1));  // int64 terms around it widen the sum
        continue;
      }
      if (narrow && stride) {
        terms.push_back(wrap(idx, kMul) + " * " + std::to_string(*stride));
        continue;
      }
      Code idx64 = indices[d]->dtype == DataType::Int(64) ? idx : convert(indices[d], DataType::Int(64));
      std::string s;
      if (stride) {
        s = wrap(int64_literal(*stride), kUnary);
      } else if (d < info.strides.size() && !info.strides[d].empty() && info.owner == b.get()) {
        s = info.strides[d];
      } else {
        s = wrap(emit_int64(strides[d]), kUnary);
      }
      terms.push_back(wrap(idx64, kMul) + " * " + s);
    }
    if (terms.empty()) return "0";
    std::string text;
    for (size_t k = 0; k < terms.size(); ++k) text += (k ? " + " : "") + terms[k];
    return text;
  }

  // ---------------------------------------------------------------- statements
  void emit_other_stmt(const Stmt& s) override {
    if (s->kind == StmtKind::TileOp)
      fail(ErrorKind::Internal, s->span,
           "internal: tile operator T." + as<TileOpNode>(s)->op +
               " was not lowered before CUDA code generation",
           "the GPU pipeline lowers every tile operator to thread-level code; this is a compiler bug");
    fail(ErrorKind::Unsupported, s->span, "a T.Kernel inside another T.Kernel",
         "launch the kernels one after another");
  }

  void emit_for(const ForNode* n) override {
    if (n->for_kind == ForKind::Parallel || n->for_kind == ForKind::Pipelined)
      fail(ErrorKind::Internal, n->span,
           std::string("internal: a ") + (n->for_kind == ForKind::Parallel ? "T.Parallel" : "T.Pipelined") +
               " loop over '" + n->var->name + "' was not lowered before CUDA code generation",
           "the GPU pipeline partitions parallel loops over threads and expands pipelines; "
           "this is a compiler bug");
    if (n->for_kind == ForKind::Vectorized && (try_vector_atomic(n) || try_vector_copy(n) || try_vector_store(n)))
      return;
    ctype(n->var->dtype, n->span, "loop variable '" + n->var->name + "'");
    if (!n->var->dtype.is_integer())
      fail(ErrorKind::Type, n->span, "loop variable '" + n->var->name + "' must be an integer");
    emit_loop(n);
  }

  void loop_pragma(const ForNode* n) override {
    if (n->for_kind != ForKind::Unrolled && n->for_kind != ForKind::Vectorized) return;
    // In a kernel whose per-thread arrays exceed the registers, the arrays live in local
    // memory anyway, and unrolling nests of thousands of copies only makes NVRTC run for
    // minutes: a loop whose unrolled nest would hold more than kMaxUnrolledCopies copies
    // of its body stays a loop (the loops inside it are still unrolled).
    if (spills_ && unrolled_copies(n) > kMaxUnrolledCopies) return pragma("unroll 1");
    // T.unroll(..., unroll_factor=k): k iterations at a time.
    auto factor = n->attrs.find("unroll_factor");
    if (factor != n->attrs.end() && std::holds_alternative<int64_t>(factor->second))
      return pragma("unroll " + std::to_string(std::get<int64_t>(factor->second)));
    pragma("unroll");
  }

  // Copies of the innermost body that unrolling n and the unrolled loops inside it makes.
  static int64_t unrolled_copies(const Stmt& s) {
    if (!s) return 1;
    switch (s->kind) {
      case StmtKind::Seq: {
        int64_t most = 1;
        for (auto& x : as<SeqStmtNode>(s)->seq) most = std::max(most, unrolled_copies(x));
        return most;
      }
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        if (f->for_kind != ForKind::Unrolled && f->for_kind != ForKind::Vectorized) return 1;
        return unrolled_copies(f);
      }
      case StmtKind::IfThenElse:
        return std::max(unrolled_copies(as<IfThenElseNode>(s)->then_case),
                        unrolled_copies(as<IfThenElseNode>(s)->else_case));
      case StmtKind::LetStmt:
        return unrolled_copies(as<LetStmtNode>(s)->body);
      case StmtKind::While:
        return unrolled_copies(as<WhileNode>(s)->body);
      case StmtKind::Allocate:
        return unrolled_copies(as<AllocateNode>(s)->body);
      default:
        return 1;
    }
  }
  static int64_t unrolled_copies(const ForNode* n) {
    const int64_t* count = const_int(n->extent);
    return std::min<int64_t>(count ? std::max<int64_t>(*count, 1) : 1, 1 << 20) *
           std::min<int64_t>(unrolled_copies(n->body), 1 << 20);
  }
  static constexpr int64_t kMaxUnrolledCopies = 256;

  // `for v in vectorized(L): dst[base + v] = src[base2 + v]` as one 4/8/16-byte access.
  // A Vectorized loop that is exactly `atomic_add(dst[base + v], value(v))` over 2 float16 /
  // bfloat16 or 2 or 4 float32 lanes (sm_90) is one vector atomic (each element updated
  // atomically, as the scalar loop does); the helper checks the address's alignment and
  // falls back to an atomic per element.
  bool try_vector_atomic(const ForNode* n) {
    const int64_t* lanes = const_int(n->extent);
    const int64_t* lo = const_int(n->min);
    auto* ev = as<EvaluateNode>(n->body);
    auto* call = ev ? as<CallNode>(ev->value) : nullptr;
    if (dialect_ || !lanes || !lo || *lo != 0 || !call || call->op != "atomic_add" || call->args.size() != 2) return false;
    auto* dst = as<BufferLoadNode>(call->args[0]);
    if (!dst || dst->indices.empty() || !(dst->buffer->is_global() || dst->buffer->is_shared())) return false;
    DataType t = dst->buffer->dtype;
    bool pair16 = (t == DataType::Float(16) || t == DataType::BFloat16()) && *lanes == 2 && arch_number(opts_.arch) >= 80;
    bool f32 = t == DataType::Float(32) && (*lanes == 2 || *lanes == 4) && arch_number(opts_.arch) >= 90;
    if (!pair16 && !f32) return false;
    const VarNode* v = n->var.get();
    auto strides = dst->buffer->effective_strides();
    if (dst->indices.size() > 1 && !(const_int(strides.back()) && *const_int(strides.back()) == 1)) return false;
    for (size_t d = 0; d + 1 < dst->indices.size(); ++d)
      if (mentions_var(dst->indices[d], v)) return false;
    bool ok = true;
    Expr base = lane_base(dst->indices.back(), v, &ok);
    if (!ok) return false;
    std::vector<Expr> first(dst->indices.begin(), dst->indices.end() - 1);
    first.push_back(base ? base : make_int(0));
    std::string args = "&" + element(dst->buffer, first, dst->span);
    for (int64_t lane = 0; lane < *lanes; ++lane)
      args += ", " + convert(substitute(call->args[1], {{v, make_int(lane)}}), t).text;
    line("tl::atomic_add_x" + std::to_string(*lanes) + "(" + args + ");");
    return true;
  }

  // The indices of lane 0's element of an access in the vector loop n, or nothing when the
  // access is not `base + v` along its contiguous last index.
  static std::optional<std::vector<Expr>> first_lane(const ForNode* n, const Buffer& b, const std::vector<Expr>& idx) {
    const VarNode* v = n->var.get();
    if (b->scope == scope::kLocalVar || idx.empty()) return std::nullopt;
    auto strides = b->effective_strides();
    if (idx.size() > 1 && !(const_int(strides.back()) && *const_int(strides.back()) == 1)) return std::nullopt;
    for (size_t d = 0; d + 1 < idx.size(); ++d)
      if (mentions_var(idx[d], v)) return std::nullopt;
    bool ok = true;
    Expr base = lane_base(idx.back(), v, &ok);
    if (!ok) return std::nullopt;
    const int64_t* m = const_int(n->min);
    Expr start = m && *m == 0 ? (base ? base : n->min) : (base ? add(base, n->min) : n->min);
    std::vector<Expr> out(idx.begin(), idx.end() - 1);
    out.push_back(start);
    return out;
  }

  static std::vector<Expr> substitute_all(const std::vector<Expr>& xs, const std::unordered_map<const VarNode*, Expr>& m) {
    std::vector<Expr> out;
    for (auto& x : xs) out.push_back(substitute(x, m));
    return out;
  }

  // `dst[base + v] = value(v)` with any value (a T.Parallel body: A[..] + B[..]): the loads of
  // memory that move with the lane are read first as aligned vectors of up to 16 bytes
  // (vectorize_stores checked the alignment of every one), each lane's value is computed
  // from them into an aligned array, stored as one 4/8/16-byte access.
  bool try_vector_store(const ForNode* n) {
    const int64_t* lanes = const_int(n->extent);
    auto* store = as<BufferStoreNode>(n->body);
    if (!lanes || !store || store->buffer->dtype.is_sub_byte() || store->buffer->dtype.lanes != 1) return false;
    // Into registers: each lane's element is assigned; only the loads become vectors.
    bool into_registers = store->buffer->is_local();
    int64_t bytes = *lanes * store->buffer->dtype.bytes();
    const char* vec = bytes == 4 ? "uint32_t" : bytes == 8 ? "uint2" : bytes == 16 ? "uint4" : nullptr;
    if (!vec && !into_registers) return false;
    auto dst_idx = first_lane(n, store->buffer, store->indices);
    if (!dst_idx && !into_registers) return false;
    const VarNode* v = n->var.get();
    struct Hoisted {
      const BufferLoadNode* load;
      Var name;
      std::vector<Expr> first;
      int64_t chunk;
    };
    std::vector<Hoisted> hoisted;
    for_each_expr(std::make_shared<EvaluateNode>(store->value), [&](const ExprNode* e) {
      auto* l = dynamic_cast<const BufferLoadNode*>(e);
      if (!l || l->buffer->is_local() || l->indices.empty() || !mentions_var(l->indices.back(), v)) return;
      for (auto& h : hoisted)
        if (h.load == l) return;
      int64_t eb = l->buffer->dtype.bytes();
      int64_t chunk = std::min<int64_t>(*lanes, 16 / std::max<int64_t>(eb, 1));
      if (l->buffer->dtype.is_sub_byte() || chunk < 1 || *lanes % chunk || (chunk * eb != 4 && chunk * eb != 8 &&
                                                                            chunk * eb != 16))
        return;
      auto first = first_lane(n, l->buffer, l->indices);
      if (!first) return;
      hoisted.push_back({l, make_var(names_.fresh("tl_in"), l->dtype, l->span), *first, chunk});
    });
    if (into_registers && hoisted.empty()) return false;  // nothing to read as a vector: a plain unrolled loop
    std::string t = ctype(store->buffer->dtype, store->span, "the stored value");
    std::string out = names_.fresh("tl_vec");
    line("{");
    ++indent_;
    for (auto& h : hoisted) {
      int64_t eb = h.load->buffer->dtype.bytes();
      const char* chunk_t = h.chunk * eb == 4 ? "uint32_t" : h.chunk * eb == 8 ? "uint2" : "uint4";
      line("alignas(16) " + ctype(h.load->buffer->dtype, h.load->span, "the loaded value") + " " + h.name->name + "[" +
           std::to_string(*lanes) + "];");
      for (int64_t c = 0; c < *lanes; c += h.chunk) {
        std::vector<Expr> at = h.first;
        at.back() = add(at.back(), make_int(c, at.back()->dtype));
        line("*reinterpret_cast<" + std::string(chunk_t) + "*>(&" + h.name->name + "[" + std::to_string(c) +
             "]) = *reinterpret_cast<const " + chunk_t + "*>(&" + element(h.load->buffer, at, h.load->span) + ");");
      }
    }
    // The value with each hoisted load replaced by its array's lane, named per lane below.
    struct Replace : IRMutator {
      const std::vector<Hoisted>* hoisted;
      Expr mutate_load(const Expr& e, const BufferLoadNode* l) override {
        for (auto& h : *hoisted)
          if (h.load == l) return h.name;
        return IRMutator::mutate_load(e, l);
      }
    } replace;
    replace.hoisted = &hoisted;
    Expr value = replace.mutate(store->value);
    if (!into_registers)
      line("alignas(" + std::to_string(bytes) + ") " + t + " " + out + "[" + std::to_string(*lanes) + "];");
    for (int64_t lane = 0; lane < *lanes; ++lane) {
      for (auto& h : hoisted) var_names_[h.name.get()] = h.name->name + "[" + std::to_string(lane) + "]";
      std::unordered_map<const VarNode*, Expr> at_lane = {{v, add(n->min, make_int(lane))}};
      Expr at = substitute(value, at_lane);
      std::string target = into_registers ? element(store->buffer, substitute_all(store->indices, at_lane), store->span)
                                          : out + "[" + std::to_string(lane) + "]";
      line(target + " = " + convert(at, store->buffer->dtype).text + ";");
    }
    for (auto& h : hoisted) var_names_.erase(h.name.get());
    if (into_registers) {
      --indent_;
      line("}");
      return true;
    }
    std::string dst = element(store->buffer, *dst_idx, store->span);
    if (dialect_)
      line("__builtin_memcpy(&" + dst + ", " + out + ", " + std::to_string(bytes) + ");");
    else
      line("*reinterpret_cast<" + std::string(vec) + "*>(&" + dst + ") = *reinterpret_cast<const " + vec + "*>(" + out +
           ");");
    --indent_;
    line("}");
    return true;
  }

  bool try_vector_copy(const ForNode* n) {
    const int64_t* lanes = const_int(n->extent);
    auto* store = as<BufferStoreNode>(n->body);
    if (!lanes || !store) return false;
    auto* cast = as<CastNode>(store->value);
    auto* load = as<BufferLoadNode>(cast ? cast->value : store->value);
    if (!load || (!cast && load->buffer->dtype != store->buffer->dtype)) return false;
    int64_t bytes = *lanes * store->buffer->dtype.bytes();
    const char* vec = bytes == 4 ? "uint32_t" : bytes == 8 ? "uint2" : bytes == 16 ? "uint4" : nullptr;
    if (!vec || store->buffer->dtype.is_sub_byte() || store->buffer->dtype.lanes != 1) return false;
    const VarNode* v = n->var.get();
    auto first_lane = [&](const Buffer& b, const std::vector<Expr>& idx) { return this->first_lane(n, b, idx); };
    // Converting a source in memory: try_vector_store reads it as vectors first.
    if (cast && !load->buffer->is_local()) return false;
    auto dst_idx = first_lane(store->buffer, store->indices);
    auto src_idx = first_lane(load->buffer, load->indices);
    if (!dst_idx || !src_idx) return false;
    std::string dst = element(store->buffer, *dst_idx, store->span);
    std::string v_t = vec;
    if (cast) {
      // Converted lane by lane into an aligned array, stored as one vector.
      std::string t = ctype(store->buffer->dtype, store->span, "the stored value");
      std::string tmp = names_.fresh("tl_vec");
      line("{");
      ++indent_;
      line("alignas(" + std::to_string(bytes) + ") " + t + " " + tmp + "[" + std::to_string(*lanes) + "];");
      for (int64_t lane = 0; lane < *lanes; ++lane) {
        Expr value = substitute(store->value, {{v, add(n->min, make_int(lane))}});
        line(tmp + "[" + std::to_string(lane) + "] = " + convert(value, store->buffer->dtype).text + ";");
      }
      // On AMDGPU the punned read of the array keeps it in scratch; the compiler's memcpy of
      // it is one store from registers (HIP's device memcpy copies byte by byte, which keeps
      // the array in scratch too).
      if (dialect_)
        line("__builtin_memcpy(&" + dst + ", " + tmp + ", " + std::to_string(bytes) + ");");
      else
        line("*reinterpret_cast<" + v_t + "*>(&" + dst + ") = *reinterpret_cast<const " + v_t + "*>(" + tmp + ");");
      --indent_;
      line("}");
      return true;
    }
    std::string src = element(load->buffer, *src_idx, load->span);
    line("*reinterpret_cast<" + v_t + "*>(&" + dst + ") = *reinterpret_cast<const " + v_t + "*>(&" + src +
         ");");
    return true;
  }

  int64_t const_arg(const CallNode* call, size_t i, const std::string& what) {
    if (call->args.size() <= i || !const_int(call->args[i]))
      fail(ErrorKind::Internal, call->span, "internal: " + call->op + " needs a constant " + what);
    return *const_int(call->args[i]);
  }

  void emit_evaluate(const EvaluateNode* n) override {
    auto* call = as<CallNode>(n->value);
    if (!call) {
      if (n->value->kind == ExprKind::IntImm || n->value->kind == ExprKind::FloatImm) return;
      line("(void)(" + emit(n->value).text + ");");
      return;
    }
    const std::string& op = call->op;
    if (op == "print") return emit_print(call);
    if (op == "call_extern") {
      line(emit(n->value).text + ";");
      return;
    }
    if (op == "sync_threads") {
      line("__syncthreads();");
      return;
    }
    if (op == "cp_async") {
      require_arch(80, call->span, "cp.async");
      int64_t bytes = const_arg(call, 2, "byte count");
      if (bytes != 4 && bytes != 8 && bytes != 16)
        fail(ErrorKind::Unsupported, call->span,
             "cp.async copies 4, 8 or 16 bytes, not " + std::to_string(bytes));
      auto* dst = as<BufferLoadNode>(call->args[0]);
      auto* src = as<BufferLoadNode>(call->args[1]);
      if (!dst || !src || !dst->buffer->is_shared() || !src->buffer->is_global())
        fail(ErrorKind::Internal, call->span,
             "internal: cp_async takes (shared element, global element, bytes)");
      std::string operands = "(&" + element(dst->buffer, dst->indices, dst->span) + ", &" +
                             element(src->buffer, src->indices, src->span);
      // A fourth argument: whether the source is inside its tensor (zeros are written if not).
      if (call->args.size() == 4) {
        line("tl::cp_async_zfill<" + std::to_string(bytes) + ">" + operands + ", " + emit(call->args[3]).text + ");");
        return;
      }
      line("tl::cp_async<" + std::to_string(bytes) + ">" + operands + ");");
      return;
    }
    if (op == "use_swizzle") return;  // applied where the block indices are bound
    if (op == "min_blocks_per_sm") return;  // in the launch bounds
    if (op == "device_assert") return line(device_assert_statement(call));  // the message, then a trap
    if (op == "pdl_trigger" || op == "pdl_sync") {  // griddepcontrol (sm_90+; nothing before)
      line("tl::" + op + "();");
      return;
    }
    if (op == "thread_return") return line("return;");
    if (op == "sync_grid") {  // a barrier of the whole grid, launched cooperatively
      if (dialect_)
        fail(ErrorKind::Unsupported, call->span,
             "T.sync_grid is not supported on target " + dialect_->target_name() + " yet: its launcher has no "
             "cooperative launch",
             "split the kernel in two at the grid barrier (a second T.Kernel), or compile for cuda");
      line("tl::grid_sync();");
      return;
    }
    if (op == "no_set_max_nreg") return;  // read by warp specialisation
    if (op == "ldmatrix") {
      // ldmatrix(trans, count, registers, shared element): count 8x8 matrices of 16-bit values.
      require_arch(75, call->span, "ldmatrix");
      int64_t trans = const_arg(call, 0, "transpose flag"), count = const_arg(call, 1, "matrix count");
      auto* dst = call->args.size() == 4 ? as<BufferLoadNode>(call->args[2]) : nullptr;
      auto* src = call->args.size() == 4 ? as<BufferLoadNode>(call->args[3]) : nullptr;
      if (!dst || !src || !src->buffer->is_shared() || (count != 4 && count != 2))
        fail(ErrorKind::Internal, call->span, "internal: ldmatrix takes (trans, 2 or 4, register element, shared element)");
      line(std::string(count == 4 ? "tl::ldmatrix_x4<" : "tl::ldmatrix_x2<") + (trans ? "true" : "false") + ">(&" +
           element(dst->buffer, dst->indices, dst->span) + ", &" + element(src->buffer, src->indices, src->span) + ");");
      return;
    }
    if (op == "mma_sync") {
      // mma_sync(c element, a element, b element): one m16n8k16 (16-bit inputs) or m16n8k32
      // (8-bit inputs) step on four accumulators; the operand types pick the instruction.
      auto* c = call->args.size() == 3 ? as<BufferLoadNode>(call->args[0]) : nullptr;
      auto* a = call->args.size() == 3 ? as<BufferLoadNode>(call->args[1]) : nullptr;
      auto* b = call->args.size() == 3 ? as<BufferLoadNode>(call->args[2]) : nullptr;
      if (!c || !a || !b) fail(ErrorKind::Internal, call->span, "internal: mma_sync takes (c, a, b) elements");
      bool fp8 = a->buffer->dtype.code == TypeCode::Float8E4M3 || a->buffer->dtype.code == TypeCode::Float8E5M2;
      require_arch(fp8 ? 89 : 80, call->span, fp8 ? "float8 mma.sync" : "mma.sync");
      std::string shape = a->buffer->dtype.bytes() == 1 ? "m16n8k32" : "m16n8k16";
      line("tl::mma_" + shape + "(&" + element(c->buffer, c->indices, c->span) + ", &" +
           element(a->buffer, a->indices, a->span) + ", &" + element(b->buffer, b->indices, b->span) + ");");
      return;
    }
    if (op == "matrix_core") {
      // matrix_core(c element, a element, b element, function, accumulators, inputs per
      // lane): one MFMA / WMMA instruction through the HIP header (tl::mfma_f32_32x32x8f16...).
      auto* c = call->args.size() == 6 ? as<BufferLoadNode>(call->args[0]) : nullptr;
      auto* a = call->args.size() == 6 ? as<BufferLoadNode>(call->args[1]) : nullptr;
      auto* b = call->args.size() == 6 ? as<BufferLoadNode>(call->args[2]) : nullptr;
      auto* fn = call->args.size() == 6 ? as<StringImmNode>(call->args[3]) : nullptr;
      if (!c || !a || !b || !fn)
        fail(ErrorKind::Internal, call->span, "internal: matrix_core takes (c, a, b) elements, a function and two counts");
      if (!dialect_)
        fail(ErrorKind::Unsupported, call->span, "AMD matrix instructions (" + fn->value + ") cannot run on target cuda");
      dialect_->require("AMD matrix instructions", call->span);
      line("tl::" + fn->value + "(&" + element(c->buffer, c->indices, c->span) + ", &" +
           element(a->buffer, a->indices, a->span) + ", &" + element(b->buffer, b->indices, b->span) + ");");
      return;
    }
    if (op == "wgmma") return emit_wgmma(call);
    if (op == "wgmma_fence" || op == "wgmma_wait") {
      // The accumulators' registers are fenced so that the compiler keeps their reads and
      // writes on the right side of the asynchronous instructions.
      require_arch(90, call->span, "wgmma");
      bool wait = op == "wgmma_wait";
      auto* acc = as<BufferLoadNode>(call->args.at(wait ? 1 : 0));
      int64_t count = const_arg(call, wait ? 2 : 1, "register count");
      if (!acc) fail(ErrorKind::Internal, call->span, "internal: " + op + " takes the accumulator's first register");
      if (!wait) group_buffers_.insert(acc->buffer.get());
      std::string first = element(acc->buffer, acc->indices, acc->span);
      if (wait) line("tl::wgmma_wait<" + std::to_string(const_arg(call, 0, "group count")) + ">();");
      line("#pragma unroll");
      // float16 accumulators live in pairs, one 32-bit register each.
      if (acc->buffer->dtype == DataType::Float(16))
        line("for (int tl_i = 0; tl_i < " + std::to_string(count / 2) +
             "; ++tl_i) tl::fence_operand(reinterpret_cast<int*>(&" + first + ")[tl_i]);");
      else
        line("for (int tl_i = 0; tl_i < " + std::to_string(count) + "; ++tl_i) tl::fence_operand((&" + first + ")[tl_i]);");
      if (!wait) line("tl::wgmma_fence();");
      return;
    }
    if (op == "cluster_arrive" || op == "cluster_arrive_relaxed" || op == "cluster_wait" || op == "cluster_sync" ||
        op == "fence_barrier_init") {
      require_arch(90, call->span, "thread-block clusters");
      line("tl::" + op + "();");
      return;
    }
    if (op == "tma_load" || op == "tma_load_multicast" || op == "tma_store" || op == "tma_reduce_add") {
      require_arch(90, call->span, "TMA");
      TensorMapSpec spec = tma_spec_of(call);
      auto* g = as<BufferLoadNode>(call->args[0]);
      std::string map;
      for (auto& [p, name] : tensor_maps_)
        if (func_->params[size_t(p->param_index)].buffer.get() == g->buffer.get() && p->tma.box == spec.box &&
            p->tma.swizzle_bytes == spec.swizzle_bytes && p->tma.order == spec.order)
          map = name;
      if (map.empty()) fail(ErrorKind::Internal, call->span, "internal: no tensor map parameter for a TMA copy");
      auto* smem = as<BufferLoadNode>(call->args[1]);
      auto* bar = as<BufferLoadNode>(call->args[2]);
      bool load = op != "tma_store" && op != "tma_reduce_add";
      if (!smem || (load && !bar))
        fail(ErrorKind::Internal, call->span, "internal: " + op + " takes shared (and mbarrier) elements");
      std::string text = "tl::" + op + "(" + map + ", &" + element(smem->buffer, smem->indices, smem->span);
      if (load) text += ", &" + element(bar->buffer, bar->indices, bar->span);
      size_t rank = spec.box.size();
      if (op == "tma_load_multicast")
        text += ", (uint16_t)" + std::to_string(const_arg(call, 5 + 2 * rank, "cluster mask"));
      for (size_t d = rank; d-- > 0;) text += ", " + convert(call->args[5 + rank + d], DataType::Int(32)).text;
      if (const CallNode* policy = l2_policy_of(call))
        text += ", tl::l2_policy<" + std::to_string(const_arg(policy, 0, "L2 policy")) + ">()";
      line(text + ");");
      return;
    }
    if (op == "tma_store_commit") {
      require_arch(90, call->span, "TMA");
      line("tl::tma_store_commit();");
      return;
    }
    if (op == "tma_store_wait_read" || op == "tma_store_wait") {
      require_arch(90, call->span, "TMA");
      line("tl::" + op + "<" + std::to_string(const_arg(call, 0, "group count")) + ">();");
      return;
    }
    if (op == "mbarrier_init_all") {
      // T.alloc_barrier: one thread initialises every barrier of the array, then the block
      // waits, so that nobody arrives or waits on an uninitialised barrier.
      require_arch(90, call->span, "mbarrier");
      auto* bar = as<BufferLoadNode>(call->args.at(0));
      line("if (threadIdx.x == 0) {");
      ++indent_;
      for (size_t a = 1; a < call->args.size(); ++a)
        line("tl::mbarrier_init(&" + element(bar->buffer, bar->indices, bar->span) + " + " + std::to_string(a - 1) +
             ", " + convert(call->args[a], DataType::UInt(32)).text + ");");
      --indent_;
      line("}");
      // In a cluster, the other blocks may arrive on these barriers and copy into this
      // block: the initialisation is published to the whole cluster.
      if (current_kernel_ && !current_kernel_->cluster.empty()) {
        line("if (threadIdx.x == 0) tl::fence_barrier_init();");
        line("tl::cluster_sync();");
      } else {
        line("__syncthreads();");
      }
      return;
    }
    if (op == "mbarrier_init" || op == "mbarrier_expect_tx" || op == "mbarrier_arrive" || op == "mbarrier_wait" ||
        op == "mbarrier_arrive_expect_tx" || op == "mbarrier_arrive_remote" || op == "mbarrier_arrive_cluster") {
      require_arch(90, call->span, "mbarrier");
      auto* bar = as<BufferLoadNode>(call->args.at(0));
      if (!bar) fail(ErrorKind::Internal, call->span, "internal: " + op + " takes an mbarrier element");
      std::string text = "tl::" + op + "(&" + element(bar->buffer, bar->indices, bar->span);
      for (size_t a = 1; a < call->args.size(); ++a) text += ", " + convert(call->args[a], DataType::UInt(32)).text;
      line(text + ");");
      return;
    }
    if (op == "cp_async_barrier_noinc") {
      // The barrier's pending count was set for these arrivals (T.alloc_barrier's count):
      // each thread arrives once its earlier cp.async copies have landed.
      require_arch(90, call->span, "mbarrier");
      auto* bar = as<BufferLoadNode>(call->args.at(0));
      if (!bar) fail(ErrorKind::Internal, call->span, "internal: cp_async_barrier_noinc takes an mbarrier element");
      line("tl::cp_async_mbarrier_arrive_noinc(&" + element(bar->buffer, bar->indices, bar->span) + ");");
      return;
    }
    if (op == "set_max_nreg") {
      require_arch(90, call->span, "setmaxnreg");
      line("tl::set_max_nreg<" + std::to_string(const_arg(call, 0, "registers")) + ", " +
           (const_arg(call, 1, "increase") ? "true" : "false") + ">();");
      return;
    }
    if (op == "warpgroup_turn_wait" || op == "warpgroup_turn_pass" || op == "warpgroup_turn_first" ||
        op == "warpgroup_turn_last" || op == "warpgroup_turn_open" || op == "warpgroup_turn_close") {
      if (dialect_) dialect_->require("named barriers", call->span);
      line("tl::" + op + "(" + std::to_string(const_arg(call, 0, "barrier id")) + ");");
      return;
    }
    if (op == "named_barrier_sync" || op == "named_barrier_arrive") {
      if (dialect_) dialect_->require("named barriers", call->span);
      line("tl::" + op + "(" + std::to_string(const_arg(call, 0, "barrier id")) + ", " +
           std::to_string(const_arg(call, 1, "thread count")) + ");");
      return;
    }
    if (op == "wait_wgmma") {
      if (dialect_) dialect_->require("wgmma", call->span);
      // T.wait_wgmma(n): the wait, then every wgmma accumulator of the kernel fenced, since
      // any of them may be read next, except those of the n groups committed last (in
      // program order), which stay in flight: touching their registers before they
      // complete makes ptxas wait for them there (C7517) or serialise every wgmma (C7514).
      const int64_t in_flight_groups = const_arg(call, 0, "group count");
      std::set<const BufferNode*> in_flight;
      for (size_t g = committed_groups_.size(); g-- > 0 && committed_groups_.size() - g <= size_t(in_flight_groups);)
        in_flight.insert(committed_groups_[g].begin(), committed_groups_[g].end());
      std::vector<std::pair<std::string, int64_t>> accs;
      bool any = false;
      for_each_expr(current_kernel_->body, [&](const ExprNode* e) {
        auto* c = dynamic_cast<const CallNode*>(e);
        if (!c || c->op != "wgmma_fence") return;
        auto* acc = as<BufferLoadNode>(c->args[0]);
        any = true;
        if (in_flight.count(acc->buffer.get())) return;
        accs.push_back({element(acc->buffer, acc->indices, acc->span), const_arg(c, 1, "register count")});
      });
      if (!any) return;  // the kernel's gemms completed inside T.gemm
      line("tl::wgmma_wait<" + std::to_string(in_flight_groups) + ">();");
      for (auto& [first, count] : accs) {
        line("#pragma unroll");
        line("for (int tl_i = 0; tl_i < " + std::to_string(count) + "; ++tl_i) tl::fence_operand((&" + first + ")[tl_i]);");
      }
      // A operands in registers too: the tensor cores read them until the wait, so their
      // registers must not be given to new values before it.
      std::set<const BufferNode*> seen;
      for_each_expr(current_kernel_->body, [&](const ExprNode* e) {
        auto* c = dynamic_cast<const CallNode*>(e);
        if (!c || c->op != "wgmma" || c->args.size() < 2) return;
        auto* a = as<BufferLoadNode>(c->args[1]);
        if (!a || !a->buffer->is_local() || in_flight.count(a->buffer.get()) || !seen.insert(a->buffer.get()).second)
          return;
        int64_t elems = 1;
        for (auto& d : a->buffer->shape) elems *= *const_int(d);
        int64_t words = elems * a->buffer->dtype.bits / 32;
        line("#pragma unroll");
        line("for (int tl_i = 0; tl_i < " + std::to_string(words) + "; ++tl_i) tl::fence_operand(reinterpret_cast<int*>(&" +
             element(a->buffer, {make_int(0)}, a->span) + ")[tl_i]);");
      });
      return;
    }
    if (op == "wgmma_commit") {
      require_arch(90, call->span, "wgmma");
      committed_groups_.push_back(std::move(group_buffers_));
      group_buffers_.clear();
      line("tl::wgmma_commit();");
      return;
    }
    if (op == "fence_proxy_async") {
      require_arch(90, call->span, "fence.proxy.async");
      line("tl::fence_proxy_async();");
      return;
    }
    if (op == "cp_async_commit") {
      require_arch(80, call->span, "cp.async");
      line("tl::cp_async_commit();");
      return;
    }
    if (op == "cp_async_wait") {
      require_arch(80, call->span, "cp.async");
      int64_t pending = const_arg(call, 0, "group count");
      line("tl::cp_async_wait<" + std::to_string(pending) + ">();");
      return;
    }
    if (op == "sync_warp") {  // a statement of language/warp.py
      line(emit_warp_primitive(call).text + ";");
      return;
    }
    if (op == "atomic_store") return line(atomic_load_store(call) + ";");
    if (op == "atomic_add" || op == "atomic_max" || op == "atomic_min" || op == "atomic_or") {
      line(emit_atomic(call).text + ";");
      return;
    }
    line("(void)(" + emit(n->value).text + ");");
  }

  // wgmma(c element, a, b descriptor, n, trans_a, trans_b, input type, scale-d): one
  // wgmma.mma_async m64nNk; a is a descriptor, or a register element of A (four 32-bit
  // registers from there). The accumulators are the N / 2 registers from c on; scale-d 0
  // overwrites them with A B instead of adding to them.
  void emit_wgmma(const CallNode* call) {
    Span sp = call->span;
    require_arch(90, sp, "wgmma");
    auto* acc = call->args.size() == 8 ? as<BufferLoadNode>(call->args[0]) : nullptr;
    auto* types = call->args.size() == 8 ? as<StringImmNode>(call->args[6]) : nullptr;
    if (!acc || !types)
      fail(ErrorKind::Internal, sp, "internal: wgmma takes (c, a, b, n, trans_a, trans_b, type, scale-d)");
    int64_t n = const_arg(call, 3, "N"), trans_a = const_arg(call, 4, "trans_a"), trans_b = const_arg(call, 5, "trans_b");
    bool int_acc = acc->buffer->dtype.is_integer();
    bool f16_acc = acc->buffer->dtype == DataType::Float(16);  // two per 32-bit register
    const std::string& in = types->value;
    bool half = in == "f16" || in == "bf16";
    auto* a_reg = as<BufferLoadNode>(call->args[1]);
    if (a_reg) group_buffers_.insert(a_reg->buffer.get());
    int64_t regs = f16_acc ? n / 4 : n / 2;
    std::string first = element(acc->buffer, acc->indices, acc->span);
    std::string ins = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k" + (half ? "16" : "32") + "." +
                      (int_acc ? "s32" : f16_acc ? "f16" : "f32") + "." + in + "." + in;
    std::string d = "{";
    for (int64_t i = 0; i < regs; ++i) d += (i ? ", %" : "%") + std::to_string(i);
    d += "}";
    int64_t next = regs;
    std::string a_operand;
    std::vector<std::string> inputs;
    if (a_reg) {
      std::string a0 = element(a_reg->buffer, a_reg->indices, a_reg->span);
      a_operand = "{";
      for (int r = 0; r < 4; ++r) {
        a_operand += (r ? ", %" : "%") + std::to_string(next++);
        inputs.push_back("\"r\"(reinterpret_cast<const uint32_t*>(&" + a0 + ")[" + std::to_string(r) + "])");
      }
      a_operand += "}";
    } else {
      a_operand = "%" + std::to_string(next++);
      inputs.push_back("\"l\"(" + emit(call->args[1]).text + ")");
    }
    std::string b_operand = "%" + std::to_string(next++);
    inputs.push_back("\"l\"(" + emit(call->args[2]).text + ")");
    // After d, a, b: scale-d (p: 1 adds to the accumulators, 0 overwrites them), then for
    // floats imm-scale-a and imm-scale-b (1), then for 16-bit inputs the transpose flags
    // (only B's with A in registers).
    std::string scale_d = "1";
    if (const int64_t* v = const_int(call->args[7])) {
      scale_d = *v ? "1" : "0";
    } else {
      scale_d = "%" + std::to_string(next++);
      inputs.push_back("\"r\"(int(" + emit(call->args[7]).text + "))");
    }
    if (!half && (trans_a || trans_b)) fail(ErrorKind::Internal, sp, "internal: 8-bit wgmma operands are K-major");
    std::string tail = "p";
    if (!int_acc) tail += ", 1, 1";
    if (half && !a_reg) tail += ", " + std::to_string(trans_a);
    if (half) tail += ", " + std::to_string(trans_b);
    line("asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + scale_d + ", 0;\\n" + ins + " " + d + ", " + a_operand + ", " +
         b_operand + ", " + tail + ";\\n}\\n\"");
    ++indent_;
    std::string outs;
    for (int64_t i = 0; i < regs; ++i)
      outs += std::string(i ? ", " : "") +
              (f16_acc ? "\"+r\"(reinterpret_cast<uint32_t*>(&" + first + ")[" + std::to_string(i) + "])"
                       : (int_acc ? "\"+r\"(" : "\"+f\"(") + std::string("(&") + first + ")[" + std::to_string(i) + "])");
    line(": " + outs);
    std::string ins_text;
    for (size_t i = 0; i < inputs.size(); ++i) ins_text += (i ? ", " : "") + inputs[i];
    line(": " + ins_text + ");");
    --indent_;
  }

  void require_arch(int min_arch, Span span, const std::string& feature) {
    if (dialect_) return dialect_->require(feature, span);
    int a = arch_number(opts_.arch);
    if (a && a < min_arch)
      fail(ErrorKind::Unsupported, span,
           feature + " needs sm_" + std::to_string(min_arch) + " or newer; the target is " + opts_.arch,
           "compile for a newer architecture or copy through registers");
  }

  // printf of the pieces on one line, prefixed with the block and thread indices.
  void emit_print(const CallNode* call) {
    std::string fmt = "block (%d, %d, %d) thread (%d, %d, %d): ";
    std::string args =
        "(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, "
        "(int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z";
    for (const Expr& a : call->args) {
      if (auto* s = as<StringImmNode>(a)) {
        for (char c : s->value) fmt += c == '%' ? std::string("%%") : std::string(1, c);
        continue;
      }
      DataType t = a->dtype;
      check_dtype(t, a->span, "a printed value");
      if (t.is_bool()) {
        fmt += "%s";
        args += ", tl::bool_str(" + convert(a, t).text + ")";
      } else if (t.is_float()) {
        fmt += "%.9g";
        args += ", (double)" + wrap(convert(a, compute_type(t)), kUnary);
      } else if (t.is_int()) {
        fmt += "%lld";
        args += ", (long long)" + wrap(emit(a), kUnary);
      } else if (t.is_uint()) {
        fmt += "%llu";
        args += ", (unsigned long long)" + wrap(emit(a), kUnary);
      } else {
        fail(ErrorKind::Unsupported, a->span, "a value of dtype " + t.str() + " cannot be printed");
      }
    }
    line("printf(" + string_literal(fmt + "\n") + ", " + args + ");");
  }

  void emit_allocate(const AllocateNode* n) override {
    const Buffer& b = n->buffer;
    std::string t = ctype(b->dtype, n->span, "buffer '" + b->name + "'");
    BufferInfo info;
    info.name = names_.fresh(b->name);
    info.owner = b.get();
    info.dtype = b->dtype;
    if (b->scope == scope::kLocalVar) {
      info.scalar = true;
      auto it = n->attrs.find("init");
      std::string init;
      if (it != n->attrs.end() && std::holds_alternative<Expr>(it->second))
        init = convert(std::get<Expr>(it->second), b->dtype).text;
      else
        init = convert(make_int(0), b->dtype).text;  // zero: never read garbage
      line(t + " " + info.name + " = " + init + ";");
    } else if (b->scope == scope::kShared) {
      int64_t count = shared_buffer_bytes(b, n->span) / b->dtype.bytes();
      // clang (HIP) takes the standard attribute only before the declaration's other specifiers.
      line(std::string(dialect_ ? "alignas(16) __shared__ " : "__shared__ alignas(16) ") + t + " " + info.name + "[" + std::to_string(count > 0 ? count : 1) +
           "];");
    } else if (b->scope == scope::kSharedDyn) {
      shared_buffer_bytes(b, n->span);
      int64_t off = plan_->dyn_offsets.at(n);
      line(t + "* " + info.name + " = reinterpret_cast<" + t + "*>(tl_dyn_smem + " + std::to_string(off) +
           ");");
    } else if (b->scope == scope::kLocal || b->scope == scope::kFragment) {
      int64_t count = b->const_size();
      if (count < 0)
        fail(ErrorKind::Unsupported, n->span,
             "per-thread buffer '" + b->name + "' has a symbolic size, which target cuda does not support",
             "give local buffers constant shapes");
      // Aligned for the widest vector access its size allows.
      int64_t bytes = std::max<int64_t>(count, 1) * b->dtype.bytes(), align = 1;
      while (align < 16 && bytes % (align * 2) == 0) align *= 2;
      std::string prefix = align > b->dtype.bytes() ? "alignas(" + std::to_string(align) + ") " : "";
      line(prefix + t + " " + info.name + "[" + std::to_string(count > 0 ? count : 1) + "];");
    } else {
      fail(ErrorKind::Unsupported, n->span,
           "allocation of buffer '" + b->name + "' in scope '" + b->scope + "' inside a kernel",
           "allocate global tensors on the host and pass them as parameters");
    }
    info.wide_offsets = false;
    with_buffer(b, info, [&] { emit_stmt(n->body); });
  }

  PrimFunc func_;
  std::vector<std::pair<const CudaKernelParam*, std::string>> tensor_maps_;  // this kernel's, with their names
  const KernelNode* current_kernel_ = nullptr;
  // The register buffers (accumulators, A operands) of the wgmma groups committed so far in
  // the kernel, in program order, and of the group being issued: T.wait_wgmma(n) leaves the
  // last n groups' registers alone.
  std::vector<std::set<const BufferNode*>> committed_groups_;
  std::set<const BufferNode*> group_buffers_;
  bool spills_ = false;  // the kernel's per-thread arrays exceed the registers
  CudaCodegenOptions opts_;
  const GpuDialect* dialect_ = nullptr;  // null: CUDA
  std::vector<CudaKernelParam> params_;
  std::unordered_map<const void*, BufferInfo> buffers_;
  const SharedMemoryUse* plan_ = nullptr;
};

}  // namespace

std::string codegen_cuda(const PrimFunc& lowered, const CudaCodegenOptions& opts) {
  if (!lowered) fail(ErrorKind::Internal, {}, "internal: codegen_cuda called without a function");
  return CodeGenCUDA(lowered, opts).run();
}

std::vector<CudaKernelInfo> cuda_kernel_infos(const PrimFunc& lowered) {
  if (!lowered) fail(ErrorKind::Internal, {}, "internal: cuda_kernel_infos called without a function");
  auto sites = find_kernels(lowered);
  auto params = kernel_params(*lowered);
  std::vector<CudaKernelInfo> out;
  for (size_t i = 0; i < sites.size(); ++i) {
    const KernelNode* k = sites[i].kernel;
    CudaKernelInfo info;
    info.name = kernel_name(*lowered, i, sites.size());
    // Grid extents over parameters only: substitute the host lets, innermost first.
    for (size_t d = 0; d < 3; ++d) {
      Expr g = d < k->grid.size() ? k->grid[d] : make_int(1);
      for (auto it = sites[i].lets.rbegin(); it != sites[i].lets.rend(); ++it)
        g = substitute(g, {{(*it)->var.get(), (*it)->value}});
      info.grid[d] = g;
    }
    for (size_t d = 0; d < k->threads.size() && d < 3; ++d) info.block[d] = k->threads[d];
    SharedMemoryUse plan = shared_memory_use(k);
    info.dynamic_shared_bytes = plan.dyn_bytes;
    info.static_shared_bytes = plan.static_bytes;
    info.params = params;
    for_each_expr(k->body, [&](const ExprNode* e) {
      auto* c = dynamic_cast<const CallNode*>(e);
      info.programmatic_launch = info.programmatic_launch || (c && c->op == "pdl_sync");
      info.cooperative_launch = info.cooperative_launch || (c && c->op == "sync_grid");
    });
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace tl
