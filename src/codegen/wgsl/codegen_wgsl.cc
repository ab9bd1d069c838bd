#include "codegen/wgsl/codegen_wgsl.h"

#include <cmath>
#include <functional>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/intrinsics.h"
#include "ir/op.h"
#include "transform/simplify.h"

namespace tl {
namespace {

[[noreturn]] void unsupported(Span span, const std::string& what, const std::string& hint = "") {
  fail(ErrorKind::Unsupported, span, "not supported on webgpu: " + what,
       hint.empty() ? "run this kernel on target=\"cpu\" or \"cuda\"" : hint);
}

bool is_reserved(const std::string& s) {
  static const std::unordered_set<std::string> words = {
      "array", "atomic", "bool", "f16", "f32", "i32", "u32", "vec2", "vec3", "vec4", "mat2x2", "mat3x3", "mat4x4",
      "ptr", "sampler", "struct", "alias", "break", "case", "const", "const_assert", "continue", "continuing",
      "default", "diagnostic", "discard", "else", "enable", "false", "fn", "for", "if", "let", "loop", "override",
      "requires", "return", "switch", "true", "var", "while", "main", "wid", "lid", "lindex", "sg_lane", "sg_size",
      "P", "Params", "select",
      "min", "max", "abs", "exp", "log", "sqrt", "floor", "ceil", "round", "trunc", "pow", "sin", "cos", "tan",
      "tanh", "exp2", "log2", "bitcast", "workgroupBarrier", "self", "target", "type", "in", "out", "do", "mod"};
  // WGSL's reserved words (the specification's list): a buffer or variable named so (a tile
  // named `shared`) would not compile.
  static const std::unordered_set<std::string> wgsl_reserved = {
      "NULL", "Self", "abstract", "active", "alignas", "alignof", "as", "asm", "asm_fragment", "async",
      "attribute", "auto", "await", "become", "binding_array", "cast", "catch", "class", "co_await", "co_return",
      "co_yield", "coherent", "column_major", "common", "compile", "compile_fragment", "concept", "const_cast",
      "consteval", "constexpr", "constinit", "crate", "debugger", "decltype", "delete", "demote",
      "demote_to_helper", "dynamic_cast", "enum", "explicit", "export", "extends", "extern", "external",
      "fallthrough", "filter", "final", "finally", "friend", "from", "fxgroup", "get", "goto", "groupshared",
      "highp", "impl", "implements", "import", "inline", "instanceof", "interface", "layout", "lowp", "macro",
      "macro_rules", "match", "mediump", "meta", "module", "move", "mut", "mutable", "namespace", "new", "nil",
      "noexcept", "noinline", "nointerpolation", "noperspective", "null", "nullptr", "of", "operator", "package",
      "packoffset", "partition", "pass", "patch", "pixelfragment", "precise", "precision", "premerge", "priv",
      "protected", "pub", "public", "readonly", "ref", "regardless", "register", "reinterpret_cast", "require",
      "resource", "restrict", "set", "shared", "sizeof", "smooth", "snorm", "static", "static_assert",
      "static_cast", "std", "subroutine", "super", "template", "this", "thread_local", "throw", "trait", "try",
      "typedef", "typeid", "typename", "typeof", "union", "unless", "unorm", "unsafe", "unsized", "use", "using",
      "varying", "virtual", "volatile", "wgsl", "where", "with", "writeonly", "yield",
      "private", "storage", "uniform", "workgroup", "function", "read", "write", "read_write"};
  return words.count(s) || wgsl_reserved.count(s) || s.rfind("tl_", 0) == 0 || s.rfind("__", 0) == 0;
}

class WgslCodegen {
 public:
  explicit WgslCodegen(const WgslOptions& options) : options_(options) {}

  WgslKernel run(const PrimFunc& f) {
    if (f->attrs.count("prelude"))
      fail(ErrorKind::Unsupported, f->span,
           "not supported on webgpu: imported source (T.import_source, T.Kernel(prelude=)) is C++/CUDA, which "
           "a WGSL shader cannot include",
           "run this kernel on target=\"cpu\" or \"cuda\"");
    // Host level: lets, then one kernel.
    std::vector<const LetStmtNode*> lets;
    Stmt s = f->body;
    while (auto* l = as<LetStmtNode>(s)) {
      lets.push_back(l);
      s = l->body;
    }
    auto* k = as<KernelNode>(s);
    if (!k)
      unsupported(f->span, "a function with several T.Kernel blocks or host code around its kernel",
                  "write one T.Kernel per function for target webgpu");
    kernel_.grid = k->grid;
    for (size_t d = 0; d < k->threads.size() && d < 3; ++d) kernel_.workgroup_size[d] = k->threads[d];

    collect_atomic_targets(k->body);
    // Parameters: buffers are bindings, scalars and dynamic dimensions uniforms.
    std::unordered_set<const VarNode*> written = storage_written(k->body);  // also through T.reshape/T.view
    for (size_t i = 0; i < f->params.size(); ++i) {
      const Param& p = f->params[i];
      if (p.is_buffer()) {
        std::string t = storage_type(p.buffer->dtype, p.buffer->span, "parameter '" + p.buffer->name + "'");
        std::string name = fresh(p.buffer->name);
        buffer_names_[p.buffer.get()] = name;
        if (p.buffer->data) data_names_[p.buffer->data.get()] = name;
        if (p.buffer->data) data_dtypes_[p.buffer->data.get()] = p.buffer->dtype;
        bool w = p.buffer->data && written.count(p.buffer->data.get()) > 0;
        kernel_.buffers.push_back({int(i), name, p.buffer->dtype, w});
        header_ << "@group(0) @binding(" << std::to_string(kernel_.buffers.size() - 1) << ") var<storage, "
                << (w ? "read_write" : "read") << "> " << name << ": array<" << element_type(p.buffer, t) << ">;\n";
      } else {
        add_uniform(int(i), p.var);
      }
    }
    for (const Var& v : shape_vars(*f)) add_uniform(-1, v);
    if (!kernel_.uniforms.empty()) {
      header_ << "struct Params {\n";
      for (auto& u : kernel_.uniforms) header_ << "  " << u.name << ": " << scalar_type(u.dtype, f->span) << ",\n";
      header_ << "}\n@group(0) @binding(" << std::to_string(kernel_.buffers.size()) << ") var<uniform> P: Params;\n";
    }

    indent_ = 1;
    for (auto& u : uniform_vars_) line("let " + u.second + " = " + u.first + ";");
    for (auto* l : lets) emit_let_binding(l->var, l->value);
    const char* axes = "xyz";
    for (size_t d = 0; d < k->block_vars.size(); ++d) bind_index(k->block_vars[d], std::string("wid.") + axes[d]);
    for (size_t d = 0; d < k->thread_vars.size(); ++d) bind_index(k->thread_vars[d], std::string("lid.") + axes[d]);
    emit_stmt(k->body);

    std::string params = "@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>";
    std::string check;
    if (uses_subgroups_) {
      // Shuffles were lowered for subgroups of options_.subgroup consecutive threads. WebGPU
      // promises neither the size nor that order, so every thread checks both and, where
      // they do not hold, raises the status word: the runtime then discards the results and
      // runs the kernel compiled without subgroup operations.
      kernel_.status_binding = int(kernel_.buffers.size()) + (kernel_.uniforms.empty() ? 0 : 1);
      header_ << "@group(0) @binding(" << std::to_string(kernel_.status_binding)
              << ") var<storage, read_write> tl_status: atomic<u32>;\n";
      params += ", @builtin(local_invocation_index) lindex: u32, @builtin(subgroup_invocation_id) sg_lane: u32, "
                "@builtin(subgroup_size) sg_size: u32";
      std::string n = std::to_string(options_.subgroup);
      check = "  if (sg_size != " + n + "u || sg_lane != lindex % " + n + "u) {\n    atomicStore(&tl_status, 1u);\n  }\n";
    }
    std::ostringstream src;
    src << "// Generated by the TileLang WebGPU back end from '" << f->name << "'.\n";
    if (uses_f16_) src << "enable f16;\n";
    src << header_.str() << helpers() << workgroup_.str();
    src << "@compute @workgroup_size(" << std::to_string(kernel_.workgroup_size[0]) << ", "
        << std::to_string(kernel_.workgroup_size[1]) << ", " << std::to_string(kernel_.workgroup_size[2]) << ")\n"
        << "fn main(" << params << ") {\n"
        << check << body_.str() << "}\n";
    kernel_.source = src.str();
    return kernel_;
  }

 private:
  // ---------------------------------------------------------------- names and types
  std::string fresh(const std::string& hint) {
    std::string base;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
    while (base.size() > 1 && base[0] == '_') base = base.substr(1);
    if (base == "_") base = "v";
    std::string name = base;
    for (int i = 1; is_reserved(name) || used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  std::string scalar_type(DataType t, Span span, const std::string& what = "a value") {
    if (t.lanes != 1) unsupported(span, "vector dtype " + t.str() + " for " + what);
    if (t.is_bool()) return "bool";
    if (t == DataType::Float(32)) return "f32";
    if (t == DataType::Float(16)) {
      if (!options_.has_f16)
        unsupported(span, "float16 for " + what + ": the adapter has no shader-f16",
                    "use float32, or a GPU whose WebGPU adapter offers shader-f16");
      uses_f16_ = true;
      return "f16";
    }
    // Index arithmetic is 32-bit here; 64-bit integers are carried as i32.
    if (t == DataType::Int(32) || t == DataType::Int(64)) return "i32";
    if (t == DataType::UInt(32)) return "u32";
    unsupported(span, "dtype " + t.str() + " for " + what, "use float32, float16 or int32 on target webgpu");
  }
  std::string storage_type(DataType t, Span span, const std::string& what) {
    if (t.is_bool()) unsupported(span, "bool buffers (" + what + ")", "store 0/1 in an int32 buffer");
    return scalar_type(t, span, what);
  }

  void add_uniform(int param_index, const Var& v) {
    DataType t = v->dtype;
    DataType field = t.is_float() ? DataType::Float(32) : t.is_uint() ? DataType::UInt(32) : DataType::Int(32);
    if (t.is_float() && t != DataType::Float(32)) unsupported(v->span, "scalar parameter '" + v->name + "' of " + t.str());
    std::string name = fresh(v->name);
    kernel_.uniforms.push_back({param_index, name, field});
    std::string local = fresh(v->name + "_v");
    uniform_vars_.push_back({"P." + name, local});
    var_names_[v.get()] = local;
    if (!t.is_float()) nonneg_.insert(v.get());
    // Shape variables are extents (never negative); scalars may be anything.
    if (param_index >= 0) nonneg_.erase(v.get());
  }

  void bind_index(const Var& v, const std::string& builtin) {
    std::string n = fresh(v->name);
    line("let " + n + ": i32 = i32(" + builtin + ");");
    var_names_[v.get()] = n;
    nonneg_.insert(v.get());
  }

  // ---------------------------------------------------------------- atomics
  // WGSL atomics live in atomic<i32>/atomic<u32> storage, so a buffer that a T.atomic_*
  // updates is declared so throughout the kernel (float32 as its bits in atomic<u32>) and
  // every access to it goes through atomicLoad / atomicStore.
  void collect_atomic_targets(const Stmt& body) {
    struct Targets : IRVisitor {
      std::vector<std::pair<Buffer, Span>> found;
      using IRVisitor::visit;
      void visit_call(const CallNode* n) override {
        if (n->op.rfind("atomic_", 0) == 0 && !n->args.empty())
          if (auto* l = dynamic_cast<const BufferLoadNode*>(n->args[0].get())) found.push_back({l->buffer, n->span});
        IRVisitor::visit_call(n);
      }
    } t;
    t.visit(body);
    for (auto& [b, span] : t.found) {
      DataType d = b->dtype;
      if (!(d == DataType::Float(32) || d == DataType::Int(32) || d == DataType::UInt(32)))
        unsupported(span, "atomics on " + d.str() + " (buffer '" + b->name + "'); WGSL's are 32-bit",
                    "accumulate in float32 or int32");
      if (b->scope == scope::kLocalVar || b->scope == scope::kLocal || b->scope == scope::kFragment)
        fail(ErrorKind::Unsupported, span, "an atomic update of the per-thread buffer '" + b->name + "'",
             "atomics update global or shared memory; update a local value directly");
      atomic_buffers_.insert(b.get());
      if (b->data) atomic_data_.insert(b->data.get());
    }
  }
  bool is_atomic(const Buffer& b) const {
    return atomic_buffers_.count(b.get()) || (b->data && atomic_data_.count(b->data.get()));
  }
  // The array element type of a buffer's declaration (scalar type t unless atomic).
  std::string element_type(const Buffer& b, const std::string& t) const {
    if (!is_atomic(b)) return t;
    return b->dtype == DataType::Int(32) ? "atomic<i32>" : "atomic<u32>";
  }
  // The dtype b's storage was declared with, when b is a T.view that reads it as another
  // one. WGSL has no pointer casts: a view is a bitcast of each element, so both types must
  // be 32-bit scalars (float32, int32, uint32).
  std::optional<DataType> reinterpreted(const Buffer& b, Span span) {
    if (!b->data) return std::nullopt;
    auto it = data_dtypes_.find(b->data.get());
    if (it == data_dtypes_.end() || it->second == b->dtype) return std::nullopt;
    auto word = [](DataType t) {
      return t == DataType::Float(32) || t == DataType::Int(32) || t == DataType::UInt(32);
    };
    if (!word(it->second) || !word(b->dtype) || is_atomic(b))
      unsupported(span, "T.view '" + b->name + "' reading " + it->second.str() + " storage as " + b->dtype.str() +
                            " (WGSL reinterprets only 32-bit elements, one for one, outside atomics)",
                  "view between float32, int32 and uint32, or keep the dtype and change only the shape");
    return it->second;
  }
  std::string atomic_load(const Buffer& b, const std::string& elem) const {
    std::string v = "atomicLoad(&" + elem + ")";
    return b->dtype == DataType::Float(32) ? "bitcast<f32>(" + v + ")" : v;
  }
  // WGSL's atomics are relaxed, and its barriers order memory within a workgroup only:
  // no order across workgroups can be given to an atomic.
  void reject_memory_order(const CallNode* n) {
    if (n->args.size() == 3)
      unsupported(n->span, "T." + n->op + " with a memory order (WGSL's atomics are relaxed and it has no "
                           "fence across workgroups)",
                  "drop memory_order, and pass results between workgroups through separate kernel launches");
  }
  // T.atomic_load / atomic_store: WGSL's atomicLoad / atomicStore are relaxed.
  void reject_load_store_order(const CallNode* n, size_t at) {
    const int64_t* order = n->args.size() == at + 1 ? const_int(n->args[at]) : nullptr;
    if (!order || *order != 0)
      unsupported(n->span, "T." + n->op + " with a memory order other than relaxed (WGSL's atomics are relaxed "
                           "and it has no fence across workgroups)",
                  "pass memory_order=\"relaxed\", or pass results between workgroups through separate launches");
  }
  // A T.atomic_add/max/min statement: native for integers, a compare-exchange loop on the
  // bits for float32. The returned previous value is not available.
  void emit_atomic_update(const CallNode* n) {
    auto* dst = as<BufferLoadNode>(n->args.at(0));
    const Buffer& b = dst->buffer;
    std::string elem = element(b, dst->indices, dst->span);
    std::string value = convert(n->args.at(1), b->dtype);
    std::string fn = n->op == "atomic_add" ? "Add" : n->op == "atomic_max" ? "Max" : n->op == "atomic_or" ? "Or" : "Min";
    if (b->dtype != DataType::Float(32)) return line("atomic" + fn + "(&" + elem + ", " + value + ");");
    std::string combined = n->op == "atomic_add" ? "bitcast<f32>(tl_old) + tl_value"
                           : n->op == "atomic_max" ? "max(bitcast<f32>(tl_old), tl_value)"
                                                   : "min(bitcast<f32>(tl_old), tl_value)";
    line("{");
    ++indent_;
    line("let tl_value: f32 = " + value + ";");
    line("var tl_old: u32 = atomicLoad(&" + elem + ");");
    line("loop {");
    ++indent_;
    line("let tl_swap = atomicCompareExchangeWeak(&" + elem + ", tl_old, bitcast<u32>(" + combined + "));");
    line("if (tl_swap.exchanged) { break; }");
    line("tl_old = tl_swap.old_value;");
    --indent_;
    line("}");
    --indent_;
    line("}");
  }

  // ---------------------------------------------------------------- output
  void line(const std::string& s) { body_ << std::string(2 * indent_, ' ') << s << "\n"; }

  std::string helpers() {
    std::string h;
    // Remainders of signed values are a - (a / b) * b, not `%`: through wgpu 0.32 and
    // NVIDIA's Vulkan driver (H200), i32 `%` was wrong for 70% of operands with a negative
    // side (273 % -5 gave 273, -461 % 15 gave 5) while `/` was right. `&` where `&&` would
    // branch.
    if (need_truncmod_)
      h += "fn tl_truncmod(a: i32, b: i32) -> i32 {\n  return select(a - (a / b) * b, 0, b == 0);\n}\n";
    // Float max and min return NaN when an operand is NaN, as numpy's maximum and minimum do
    // (WGSL's may return the other operand). NaN is read from the bits, which no assumption
    // of finite math can fold away. An f16 is widened to f32 first (exact, NaN stays NaN):
    // naga refuses the bitcast of a vec2<f16> to u32 that WGSL allows.
    for (const std::string& t : nan_min_max_) {
      std::string bits = t == "f16" ? "(bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u"
                                    : "(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u";
      h += "fn tl_isnan_" + t + "(x: " + t + ") -> bool {\n  return " + bits + ";\n}\n";
      for (const char* f : {"max", "min"})
        h += "fn tl_" + std::string(f) + "_" + t + "(a: " + t + ", b: " + t + ") -> " + t +
             " {\n  return select(select(" + f + "(a, b), b, tl_isnan_" + t + "(b)), a, tl_isnan_" + t + "(a));\n}\n";
    }
    if (need_floordiv_)
      h += "fn tl_floordiv(a: i32, b: i32) -> i32 {\n  let q = a / b;\n  let r = a - q * b;\n"
           "  return select(select(q, q - 1, (r != 0) & ((r < 0) != (b < 0))), 0, b == 0);\n}\n";
    if (need_floormod_)
      h += "fn tl_floormod(a: i32, b: i32) -> i32 {\n  let r = a - (a / b) * b;\n"
           "  return select(select(r, r + b, (r != 0) & ((r < 0) != (b < 0))), 0, b == 0);\n}\n";
    return h;
  }

  // ---------------------------------------------------------------- expressions
  static bool divisor_is_safe(const Expr& e) {
    auto* i = as<IntImmNode>(e);
    return i && i->value != 0 && (i->value != -1 || e->dtype.is_uint());
  }
  static std::string t_zero(DataType t) { return t.is_uint() ? "0u" : "0"; }
  bool nonneg(const Expr& e) {
    if (auto* i = as<IntImmNode>(e)) return i->value >= 0;
    if (auto* v = as<VarNode>(e)) return nonneg_.count(v) > 0;
    if (auto* b = as<BinaryNode>(e)) {
      switch (b->op) {
        case BinaryOp::Add:
        case BinaryOp::Mul:
        case BinaryOp::FloorDiv:
        case BinaryOp::FloorMod:
        case BinaryOp::Div:
        case BinaryOp::Mod:
        case BinaryOp::Min:
        case BinaryOp::Max:
        case BinaryOp::BitOr:
        case BinaryOp::BitXor: return nonneg(b->a) && nonneg(b->b);
        case BinaryOp::BitAnd: return nonneg(b->a) || nonneg(b->b);
        case BinaryOp::ShiftRight: return nonneg(b->a);  // (x << s may wrap into the sign bit)
        default: return false;
      }
    }
    if (auto* c = as<CastNode>(e)) return c->value->dtype.is_int() && nonneg(c->value);
    return false;
  }

  std::string float_literal(double v, DataType t, Span span) {
    std::string type = scalar_type(t, span);
    if (std::isnan(v)) return type + "(bitcast<f32>(0x7fc00000u))";
    if (std::isinf(v)) return type + "(bitcast<f32>(" + std::string(v > 0 ? "0x7f800000u" : "0xff800000u") + "))";
    // Text through snprintf, not a stream: nothing here depends on the process's locale or
    // on the stream library another library in the process may bring.
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return "(" + s + (t == DataType::Float(16) ? "h" : "f") + ")";
  }

  std::string int_literal(int64_t v, DataType t, Span span) {
    if (t.is_bool()) return v ? "true" : "false";
    if (t.is_float()) return float_literal(double(v), t, span);
    if (t.is_uint()) return std::to_string(uint32_t(v)) + "u";
    scalar_type(t, span);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      unsupported(span, "the 64-bit constant " + std::to_string(v) + " (indices are 32-bit on webgpu)");
    if (v == std::numeric_limits<int32_t>::min()) return "(-2147483647i - 1i)";
    return v < 0 ? "(" + std::to_string(v) + "i)" : std::to_string(v) + "i";
  }

  // e as a value of dtype t.
  std::string convert(const Expr& e, DataType t) {
    std::string s = emit(e);
    DataType from = e->dtype;
    if (scalar_type(from, e->span) == scalar_type(t, e->span)) return s;
    return scalar_type(t, e->span) + "(" + s + ")";
  }

  std::string element(const Buffer& b, const std::vector<Expr>& indices, Span span) {
    auto it = buffer_names_.find(b.get());
    if (it == buffer_names_.end() && b->data) {
      auto d = data_names_.find(b->data.get());
      if (d != data_names_.end()) it = buffer_names_.emplace(b.get(), d->second).first;
    }
    if (it == buffer_names_.end())
      fail(ErrorKind::Internal, span, "internal: buffer '" + b->name + "' is not in scope in the WGSL code generator");
    if (scalars_.count(b.get())) return it->second;
    std::vector<Expr> strides = b->effective_strides();
    std::string flat;
    if (indices.size() == 1) {
      flat = convert(indices[0], DataType::Int(32));
    } else {
      if (indices.size() != strides.size())
        fail(ErrorKind::Internal, span, "internal: buffer '" + b->name + "' indexed with the wrong rank");
      for (size_t d = 0; d < indices.size(); ++d) {
        std::string term = convert(indices[d], DataType::Int(32));
        const int64_t* st = const_int(strides[d]);
        if (!st || *st != 1) term = "(" + term + " * " + convert(strides[d], DataType::Int(32)) + ")";
        flat += (d ? " + " : "") + term;
      }
    }
    return it->second + "[" + flat + "]";
  }

  std::string emit(const Expr& e) {
    switch (e->kind) {
      case ExprKind::IntImm: return int_literal(as<IntImmNode>(e)->value, e->dtype, e->span);
      case ExprKind::FloatImm: return float_literal(as<FloatImmNode>(e)->value, e->dtype, e->span);
      case ExprKind::StringImm: unsupported(e->span, "strings (T.print)");
      case ExprKind::Var: {
        auto it = var_names_.find(as<VarNode>(e));
        if (it == var_names_.end())
          fail(ErrorKind::Internal, e->span, "internal: variable '" + as<VarNode>(e)->name + "' is not in scope");
        return it->second;
      }
      case ExprKind::Binary: return emit_binary(as<BinaryNode>(e));
      case ExprKind::Not: return "(!" + convert(as<NotNode>(e)->a, DataType::Bool()) + ")";
      case ExprKind::Select: {
        auto* s = as<SelectNode>(e);
        return "select(" + convert(s->false_value, e->dtype) + ", " + convert(s->true_value, e->dtype) + ", " +
               convert(s->cond, DataType::Bool()) + ")";
      }
      case ExprKind::Cast: {
        auto* c = as<CastNode>(e);
        if (e->dtype.is_bool()) {
          if (c->value->dtype.is_bool()) return emit(c->value);
          return "(" + emit(c->value) + " != " + int_literal(0, c->value->dtype, e->span) + ")";
        }
        return scalar_type(e->dtype, e->span) + "(" + emit(c->value) + ")";
      }
      case ExprKind::BufferLoad: {
        auto* l = as<BufferLoadNode>(e);
        std::string elem = element(l->buffer, l->indices, l->span);
        if (auto stored = reinterpreted(l->buffer, l->span)) return "bitcast<" + scalar_type(l->buffer->dtype, l->span) + ">(" + elem + ")";
        return is_atomic(l->buffer) ? atomic_load(l->buffer, elem) : elem;
      }
      case ExprKind::Call: return emit_call(as<CallNode>(e));
    }
    fail(ErrorKind::Internal, e->span, "internal: unknown expression");
  }

  std::string emit_binary(const BinaryNode* n) {
    Span sp = n->span;
    bool cmp = n->op == BinaryOp::EQ || n->op == BinaryOp::NE || n->op == BinaryOp::LT || n->op == BinaryOp::LE ||
               n->op == BinaryOp::GT || n->op == BinaryOp::GE;
    bool logic = n->op == BinaryOp::And || n->op == BinaryOp::Or;
    DataType t = logic ? DataType::Bool() : cmp ? n->a->dtype : n->dtype;
    std::string a = convert(n->a, t), b = convert(n->b, t);
    auto infix = [&](const char* op) { return "(" + a + " " + op + " " + b + ")"; };
    bool fl = t.is_float();
    switch (n->op) {
      case BinaryOp::Add: return infix("+");
      case BinaryOp::Sub: return infix("-");
      case BinaryOp::Mul: return infix("*");
      // WGSL's integer a / 0 is a and a % 0 is 0; numpy's (and the other back ends') are 0.
      case BinaryOp::Div:
        if (fl || divisor_is_safe(n->b)) return infix("/");
        return "select(" + infix("/") + ", " + t_zero(t) + ", " + b + " == " + t_zero(t) + ")";
      case BinaryOp::Mod:
        if (fl || t.is_uint() || (nonneg(n->a) && nonneg(n->b))) return infix("%");
        need_truncmod_ = true;
        return "tl_truncmod(" + a + ", " + b + ")";
      case BinaryOp::FloorDiv:
        if (fl) return "floor(" + a + " / " + b + ")";
        if ((t.is_uint() || nonneg(n->a)) && divisor_is_safe(n->b)) return infix("/");
        if (t.is_uint() || (nonneg(n->a) && nonneg(n->b)))
          return "select(" + infix("/") + ", " + t_zero(t) + ", " + b + " == " + t_zero(t) + ")";
        need_floordiv_ = true;
        return "tl_floordiv(" + a + ", " + b + ")";
      case BinaryOp::FloorMod:
        if (fl) return "(" + a + " - floor(" + a + " / " + b + ") * " + b + ")";
        if (t.is_uint() || (nonneg(n->a) && nonneg(n->b))) return infix("%");
        need_floormod_ = true;
        return "tl_floormod(" + a + ", " + b + ")";
      case BinaryOp::Min:
      case BinaryOp::Max: {
        const char* f = n->op == BinaryOp::Max ? "max" : "min";
        if (!fl) return std::string(f) + "(" + a + ", " + b + ")";
        std::string type = scalar_type(t, sp);
        nan_min_max_.insert(type);
        return "tl_" + std::string(f) + "_" + type + "(" + a + ", " + b + ")";
      }
      case BinaryOp::EQ: return infix("==");
      case BinaryOp::NE: return infix("!=");
      case BinaryOp::LT: return infix("<");
      case BinaryOp::LE: return infix("<=");
      case BinaryOp::GT: return infix(">");
      case BinaryOp::GE: return infix(">=");
      case BinaryOp::And: return infix("&&");
      case BinaryOp::Or: return infix("||");
      // WGSL's bit operations have C's meaning on i32 and u32 (>> of an i32 is arithmetic).
      case BinaryOp::BitAnd: return infix("&");
      case BinaryOp::BitOr: return infix("|");
      case BinaryOp::BitXor: {
        auto* ones = as<IntImmNode>(n->b);
        if (ones && ones->value == all_ones_value(t)) return "(~" + a + ")";  // ~x is x ^ all-ones
        return infix("^");
      }
      case BinaryOp::ShiftLeft:
      case BinaryOp::ShiftRight: {
        // The amount is a u32, taken modulo 32: a 64-bit shift (carried as i32) beyond 31 bits
        // cannot be written.
        const int64_t* amount = const_int(n->b);
        if (t.bits > 32 && (!amount || *amount >= 32))
          unsupported(sp, "a shift of a " + t.str() + " value by " +
                              (amount ? std::to_string(*amount) + " bits" : std::string("a variable amount")) +
                              " (64-bit integers are carried as i32)",
                      "shift 32-bit values");
        return "(" + a + (n->op == BinaryOp::ShiftLeft ? " << u32(" : " >> u32(") + b + "))";
      }
    }
    fail(ErrorKind::Internal, sp, "internal: unknown binary operator");
  }

  std::string emit_call(const CallNode* n) {
    const std::string& op = n->op;
    Span sp = n->span;
    if (op == "atomic_load") {
      auto* src = as<BufferLoadNode>(n->args.at(0));
      reject_load_store_order(n, 1);
      return atomic_load(src->buffer, element(src->buffer, src->indices, src->span));
    }
    if (op.rfind("atomic_", 0) == 0) {
      // The previous value: WGSL's integer atomics return it; its float atomics are
      // compare-exchange loops, statements that cannot stand in an expression.
      reject_memory_order(n);
      auto* dst = n->args.size() == 2 ? as<BufferLoadNode>(n->args[0]) : nullptr;
      if (!dst || !(dst->buffer->dtype == DataType::Int(32) || dst->buffer->dtype == DataType::UInt(32)))
        unsupported(sp, "the value T." + op + " returns on a float buffer (WGSL's float atomics are compare-exchange loops)",
                    "call T." + op + " as a statement, or keep the counter in an int32 buffer");
      std::string fn = op == "atomic_add" ? "Add" : op == "atomic_max" ? "Max" : op == "atomic_or" ? "Or" : "Min";
      return "atomic" + fn + "(&" + element(dst->buffer, dst->indices, dst->span) + ", " +
             convert(n->args[1], dst->buffer->dtype) + ")";
    }
    if (op == "print") unsupported(sp, "T.print");
    if (op.rfind("warp_shfl", 0) == 0)
      unsupported(sp, "T." + op.substr(5) + " (a warp shuffle of 32 lanes; WebGPU's subgroups have no fixed size)",
                  "exchange values through a shared buffer");
    if (op == "shfl_xor") {
      // Lowered for options_.subgroup lanes (Target::warp_size); the butterfly partner.
      if (options_.subgroup < 2)
        fail(ErrorKind::Internal, sp, "internal: a shuffle reached WGSL for a target without subgroups");
      if (!(n->dtype == DataType::Float(32) || n->dtype == DataType::Float(16) || n->dtype == DataType::Int(32) ||
            n->dtype == DataType::UInt(32)))
        unsupported(sp, "a subgroup shuffle of " + n->dtype.str());
      uses_subgroups_ = true;
      return "subgroupShuffleXor(" + emit(n->args.at(0)) + ", u32(" + emit(n->args.at(1)) + "))";
    }
    const IntrinsicInfo* info = find_intrinsic(op);
    if (!info) unsupported(sp, "the intrinsic '" + op + "'");
    if (op == "isnan" || op == "isinf") {
      const Expr& x = n->args.at(0);
      if (!x->dtype.is_float()) return "false";
      std::string v = emit(x);
      if (op == "isnan") return "(" + v + " != " + v + ")";
      return "(abs(" + v + ") == " + float_literal(INFINITY, x->dtype, sp) + ")";
    }
    if (op == "isfinite") {
      const Expr& x = n->args.at(0);
      if (!x->dtype.is_float()) return "true";
      std::string v = emit(x);
      return "(" + v + " == " + v + " && abs(" + v + ") != " + float_literal(INFINITY, x->dtype, sp) + ")";
    }
    if (op == "popcount" || op == "clz") {
      const Expr& x = n->args.at(0);
      if (x->dtype.bits != 32) unsupported(sp, "T." + op + " of a " + x->dtype.str() + " (WGSL's integers are 32-bit)");
      return "i32(" + std::string(op == "popcount" ? "countOneBits" : "countLeadingZeros") + "(" + emit(x) + "))";
    }
    if (op == "abs") return "abs(" + emit(n->args.at(0)) + ")";
    if (!info->math) unsupported(sp, "the intrinsic '" + op + "'");
    DataType ct = n->dtype.is_float() ? n->dtype : DataType::Float(32);
    std::vector<std::string> a;
    for (auto& x : n->args) a.push_back(convert(x, ct));
    std::string x = a[0], r;
    std::string type = scalar_type(ct, sp);
    static const std::unordered_map<std::string, std::string> direct = {
        {"exp", "exp"},     {"exp2", "exp2"}, {"log", "log"},     {"log2", "log2"},   {"sqrt", "sqrt"},
        {"rsqrt", "inverseSqrt"}, {"tanh", "tanh"}, {"sin", "sin"}, {"cos", "cos"}, {"tan", "tan"},
        {"floor", "floor"}, {"ceil", "ceil"}, {"trunc", "trunc"}, {"pow", "pow"},
        {"acos", "acos"},   {"asin", "asin"}, {"atan", "atan"},   {"sinh", "sinh"},   {"cosh", "cosh"},
        {"asinh", "asinh"}, {"acosh", "acosh"}, {"atanh", "atanh"}, {"atan2", "atan2"},
        {"nearbyint", "round"}};  // WGSL's round: half to even
    if (auto it = direct.find(op); it != direct.end()) {
      r = it->second + "(" + x + (a.size() > 1 ? ", " + a[1] : "") + ")";
    } else if (op == "exp10") {
      r = "exp2(" + x + " * " + type + "(3.321928094887362))";
    } else if (op == "log10") {
      r = "(log2(" + x + ") * " + type + "(0.30102999566398120))";
    } else if (op == "log1p") {
      r = "log(" + type + "(1.0) + " + x + ")";
    } else if (op == "sigmoid") {
      r = "(" + type + "(1.0) / (" + type + "(1.0) + exp(-" + x + ")))";
    } else if (op == "round") {  // half away from zero, as C's round
      r = "(sign(" + x + ") * floor(abs(" + x + ") + " + type + "(0.5)))";
    } else if (op == "fmod") {
      r = "(" + x + " - " + a[1] + " * trunc(" + x + " / " + a[1] + "))";
    } else if (op == "fma") {
      r = "fma(" + x + ", " + a[1] + ", " + a[2] + ")";
    } else if (op == "hypot") {
      r = "length(vec2<" + type + ">(" + x + ", " + a[1] + "))";
    } else if (op == "ldexp") {
      r = "ldexp(" + x + ", i32(" + a[1] + "))";
    } else if (op == "copysign" && ct == DataType::Float(32)) {
      r = "bitcast<f32>((bitcast<u32>(" + x + ") & 0x7fffffffu) | (bitcast<u32>(" + a[1] + ") & 0x80000000u))";
    } else {
      unsupported(sp, "T." + op);
    }
    return n->dtype.is_float() ? r : scalar_type(n->dtype, sp) + "(" + r + ")";
  }

  // ---------------------------------------------------------------- statements
  void emit_let_binding(const Var& v, const Expr& value) {
    std::string n = fresh(v->name);
    line("let " + n + ": " + scalar_type(v->dtype, v->span) + " = " + convert(value, v->dtype) + ";");
    var_names_[v.get()] = n;
    if (v->dtype.is_int() && nonneg(value)) nonneg_.insert(v.get());
  }

  void emit_stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (auto& x : as<SeqStmtNode>(s)->seq) emit_stmt(x);
        return;
      case StmtKind::For: return emit_for(as<ForNode>(s));
      case StmtKind::While: {
        auto* n = as<WhileNode>(s);
        line("while (" + convert(n->cond, DataType::Bool()) + ") {");
        ++indent_;
        emit_stmt(n->body);
        --indent_;
        line("}");
        return;
      }
      case StmtKind::IfThenElse: {
        auto* n = as<IfThenElseNode>(s);
        line("if (" + convert(n->cond, DataType::Bool()) + ") {");
        ++indent_;
        emit_stmt(n->then_case);
        --indent_;
        if (n->else_case) {
          line("} else {");
          ++indent_;
          emit_stmt(n->else_case);
          --indent_;
        }
        line("}");
        return;
      }
      case StmtKind::BufferStore: {
        auto* n = as<BufferStoreNode>(s);
        std::string elem = element(n->buffer, n->indices, n->span), value = convert(n->value, n->buffer->dtype);
        if (auto stored = reinterpreted(n->buffer, n->span))
          return line(elem + " = bitcast<" + scalar_type(*stored, n->span) + ">(" + value + ");");
        if (!is_atomic(n->buffer)) return line(elem + " = " + value + ";");
        if (n->buffer->dtype == DataType::Float(32)) value = "bitcast<u32>(" + value + ")";
        return line("atomicStore(&" + elem + ", " + value + ");");
      }
      case StmtKind::LetStmt: {
        auto* n = as<LetStmtNode>(s);
        line("{");
        ++indent_;
        emit_let_binding(n->var, n->value);
        emit_stmt(n->body);
        --indent_;
        line("}");
        return;
      }
      case StmtKind::Evaluate: return emit_evaluate(as<EvaluateNode>(s));
      case StmtKind::Allocate: return emit_allocate(as<AllocateNode>(s));
      case StmtKind::TileOp:
        fail(ErrorKind::Internal, s->span, "internal: tile operator T." + as<TileOpNode>(s)->op + " was not lowered");
      case StmtKind::Kernel: unsupported(s->span, "a T.Kernel inside another T.Kernel");
    }
  }

  void emit_for(const ForNode* n) {
    if (n->for_kind == ForKind::Parallel || n->for_kind == ForKind::Pipelined)
      fail(ErrorKind::Internal, n->span, "internal: a T.Parallel/T.Pipelined loop reached WGSL code generation");
    // Unrolled loops are written out: WGSL has no unroll hint, and a fragment indexed by
    // a loop counter stays in memory where constant indices let the driver keep it in
    // registers.
    const int64_t* lo = const_int(n->min);
    const int64_t* count = const_int(n->extent);
    if ((n->for_kind == ForKind::Unrolled || n->for_kind == ForKind::Vectorized) && lo && count &&
        *count * unroll_copies_ <= kMaxUnrolledCopies) {
      unroll_copies_ *= std::max<int64_t>(*count, 1);
      for (int64_t i = *lo; i < *lo + *count; ++i) {
        std::unordered_map<const VarNode*, Expr> value = {{n->var.get(), make_int(i, n->var->dtype, n->span)}};
        arith::Analyzer folder;  // knows nothing: folds constants only
        line("{");
        ++indent_;
        emit_stmt(simplify_stmt(substitute(n->body, value), folder));
        --indent_;
        line("}");
      }
      unroll_copies_ /= std::max<int64_t>(*count, 1);
      return;
    }
    std::string v = fresh(n->var->name), end = fresh(n->var->name + "_end");
    line("{");
    ++indent_;
    line("let " + end + ": i32 = " + convert(add_expr(n->min, n->extent), DataType::Int(32)) + ";");
    line("for (var " + v + ": i32 = " + convert(n->min, DataType::Int(32)) + "; " + v + " < " + end + "; " + v +
         "++) {");
    ++indent_;
    var_names_[n->var.get()] = v;
    if (nonneg(n->min)) nonneg_.insert(n->var.get());
    emit_stmt(n->body);
    --indent_;
    line("}");
    --indent_;
    line("}");
  }
  static Expr add_expr(const Expr& a, const Expr& b) {
    const int64_t* x = const_int(a);
    if (x && *x == 0) return b;
    return std::make_shared<BinaryNode>(BinaryOp::Add, b->dtype, a, b, b->span);
  }

  void emit_evaluate(const EvaluateNode* n) {
    auto* call = as<CallNode>(n->value);
    if (!call) return;
    if (call->op == "sync_threads") return line("workgroupBarrier();");
    if (call->op == "loop_break") return line("break;");
    if (call->op == "loop_continue") return line("continue;");
    if (call->op == "atomic_store") {
      auto* dst = as<BufferLoadNode>(call->args.at(0));
      reject_load_store_order(call, 2);
      std::string value = convert(call->args.at(1), dst->buffer->dtype);
      if (dst->buffer->dtype == DataType::Float(32)) value = "bitcast<u32>(" + value + ")";
      return line("atomicStore(&" + element(dst->buffer, dst->indices, dst->span) + ", " + value + ");");
    }
    if (call->op == "atomic_add" || call->op == "atomic_max" || call->op == "atomic_min" ||
        call->op == "atomic_or") {
      reject_memory_order(call);
      if (call->args.size() != 2 || !as<BufferLoadNode>(call->args[0]))
        fail(ErrorKind::Internal, call->span, "internal: T." + call->op + " takes a buffer element and a value");
      return emit_atomic_update(call);
    }
    if (call->op == "use_swizzle") return;  // block order: a CUDA L2 optimisation
    if (call->op == "min_blocks_per_sm") return;  // a register budget hint for CUDA / HIP compilers
    if (call->op == "pdl_trigger" || call->op == "pdl_sync") return;  // dispatches run in order
    if (call->op == "thread_return") return line("return;");
    if (call->op == "sync_grid")
      fail(ErrorKind::Unsupported, call->span,
           "T.sync_grid is not supported on target webgpu: WebGPU has no cooperative dispatch",
           "split the kernel in two at the grid barrier (a second T.Kernel)");
    if (call->op == "device_assert") return;  // no way to report it from a shader
    if (call->op == "no_set_max_nreg") return;  // a hint to Hopper's warp specialisation
    if (call->op == "wait_wgmma") return;   // T.gemm is synchronous here
    if (call->op == "cp_async" || call->op == "cp_async_commit" || call->op == "cp_async_wait" ||
        call->op == "ldmatrix" || call->op == "mma_sync" || call->op == "matrix_core")
      fail(ErrorKind::Internal, call->span, "internal: the CUDA instruction '" + call->op + "' reached WGSL");
    line("_ = " + emit(n->value) + ";");
  }

  void emit_allocate(const AllocateNode* n) {
    const Buffer& b = n->buffer;
    std::string t = scalar_type(b->dtype, n->span, "buffer '" + b->name + "'");
    std::string name = fresh(b->name);
    buffer_names_[b.get()] = name;
    if (b->data) data_names_[b->data.get()] = name;
    if (b->data) data_dtypes_[b->data.get()] = b->dtype;
    if (b->scope == scope::kLocalVar) {
      scalars_.insert(b.get());
      auto it = n->attrs.find("init");
      std::string init = it != n->attrs.end() && std::holds_alternative<Expr>(it->second)
                             ? convert(std::get<Expr>(it->second), b->dtype)
                             : convert(std::make_shared<IntImmNode>(DataType::Int(32), 0, n->span), b->dtype);
      line("var " + name + ": " + t + " = " + init + ";");
      emit_stmt(n->body);
      return;
    }
    int64_t count = b->const_size();
    if (count < 0) unsupported(n->span, "buffer '" + b->name + "' of symbolic size", "give tiles constant shapes");
    count = std::max<int64_t>(count, 1);
    if (b->is_shared()) {
      workgroup_ << "var<workgroup> " << name << ": array<" << element_type(b, t) << ", " << std::to_string(count)
                 << ">;\n";
      kernel_.workgroup_bytes += count * (b->dtype == DataType::Float(16) ? 2 : std::max(4, b->dtype.bytes()));
    } else if (b->scope == scope::kLocal || b->scope == scope::kFragment) {
      line("var " + name + ": array<" + t + ", " + std::to_string(count) + ">;");
    } else {
      unsupported(n->span, "allocation of '" + b->name + "' in scope '" + b->scope + "' inside a kernel");
    }
    emit_stmt(n->body);
  }

  WgslOptions options_;
  WgslKernel kernel_;
  std::ostringstream header_, workgroup_, body_;
  int indent_ = 0;
  // Copies of a statement that nested written-out loops make at most (the rest stay loops).
  static constexpr int64_t kMaxUnrolledCopies = 64;
  int64_t unroll_copies_ = 1;
  std::set<std::string> nan_min_max_;  // the float types whose max/min helpers are used
  std::unordered_map<const VarNode*, DataType> data_dtypes_;  // the dtype each storage is declared with
  bool uses_f16_ = false, uses_subgroups_ = false, need_truncmod_ = false, need_floordiv_ = false, need_floormod_ = false;
  std::unordered_set<std::string> used_;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_set<const VarNode*> nonneg_;
  std::unordered_map<const BufferNode*, std::string> buffer_names_;
  std::unordered_map<const VarNode*, std::string> data_names_;
  std::unordered_set<const BufferNode*> scalars_;
  std::unordered_set<const BufferNode*> atomic_buffers_;  // targets of T.atomic_* (see collect_atomic_targets)
  std::unordered_set<const VarNode*> atomic_data_;
  std::vector<std::pair<std::string, std::string>> uniform_vars_;  // (P.field, local name)
};

}  // namespace

WgslKernel codegen_wgsl(const PrimFunc& f, const WgslOptions& options) { return WgslCodegen(options).run(f); }

}  // namespace tl
