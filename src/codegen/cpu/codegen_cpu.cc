// C++ for the host compiler from loop-level IR.
//
// Execution model: each KernelNode is one OpenMP parallel region. Each thread allocates
// the block-private buffers (shared, fragment, local) once, then takes blocks from a
// `#pragma omp for` over the grid; a block runs its body as one sequential program in
// which T.Parallel loops are plain loops (innermost ones marked `omp simd`). The block
// loops are nested with the last block index outermost, so blockIdx.x varies fastest,
// as in CUDA's linear block order; correctness does not depend on the order.
//
// Typing: the C++ expression for an IR expression of dtype t has the C++ type of t
// (tl::half_t for float16, ...). Arithmetic on the 16- and 8-bit float types is done
// in float and each result rounded back to its dtype, which is what the IR means.
// Flattened buffer offsets are computed in int64.
#include "codegen/cpu/codegen_cpu.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "codegen/c_like.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/intrinsics.h"

namespace tl {
namespace {

using namespace c_like;  // Code, wrap, the precedence constants, NameTable, sanitize, string_literal

// ------------------------------------------------------------------ types

bool is_storage_float(DataType t) {
  return (t.code == TypeCode::Float && t.bits == 16) || t.code == TypeCode::BFloat ||
         t.code == TypeCode::Float8E4M3 || t.code == TypeCode::Float8E5M2;
}

// The type arithmetic of dtype t is carried out in.
DataType compute_type(DataType t) { return is_storage_float(t) ? DataType::Float(32) : t; }

void check_dtype(DataType t, Span span, const std::string& what) {
  if (t.is_sub_byte())
    fail(ErrorKind::Unsupported, span,
         what + " has dtype " + t.str() +
             ", which target cpu does not support: sub-byte types exist only "
             "as packed storage",
         "store the data as int8/uint8 and unpack the values with shifts and masks");
  if (t.lanes != 1)
    fail(ErrorKind::Unsupported, span,
         what + " has vector dtype " + t.str() + ", which target cpu does not support",
         "write the lanes as a T.vectorized loop over scalars");
}

std::string ctype(DataType t, Span span, const std::string& what = "a value") {
  check_dtype(t, span, what);
  switch (t.code) {
    case TypeCode::Int:
    case TypeCode::UInt: {
      if (t.bits != 8 && t.bits != 16 && t.bits != 32 && t.bits != 64) break;
      return std::string(t.is_uint() ? "uint" : "int") + std::to_string(t.bits) + "_t";
    }
    case TypeCode::Float:
      if (t.bits == 16) return "tl::half_t";
      if (t.bits == 32) return "float";
      if (t.bits == 64) return "double";
      break;
    case TypeCode::BFloat:
      return "tl::bfloat16_t";
    case TypeCode::Float8E4M3:
      return "tl::float8_e4m3_t";
    case TypeCode::Float8E5M2:
      return "tl::float8_e5m2_t";
    case TypeCode::Bool:
      return "bool";
    case TypeCode::Handle:
      return "void*";
    default:
      break;
  }
  fail(ErrorKind::Unsupported, span, what + " has dtype " + t.str() + ", which target cpu does not support");
}

// The dtype two operands meet in when the IR left them different (hand-built IR).
DataType common_type(DataType a, DataType b) {
  if (a == b) return a;
  DataType ca = compute_type(a), cb = compute_type(b);
  if (ca.is_float() != cb.is_float()) return ca.is_float() ? ca : cb;
  if (ca.is_bool()) return cb;
  if (cb.is_bool()) return ca;
  if (ca.bits != cb.bits) return ca.bits > cb.bits ? ca : cb;
  return ca.is_uint() ? ca : cb;
}

// ------------------------------------------------------------------ literals

// Infinities and NaNs through std::numeric_limits; finite values as the shortest exact decimal.
std::string float_literal(double v, bool single) {
  const char* t = single ? "float" : "double";
  if (std::isnan(v)) return std::string("std::numeric_limits<") + t + ">::quiet_NaN()";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  return c_like::finite_float_literal(v, single);
}

// ------------------------------------------------------------------ small analyses

bool mentions_var(const Expr& e, const VarNode* v) {
  bool found = false;
  struct Finder : IRVisitor {
    const VarNode* target;
    bool* found;
    void visit_var(const VarNode* n) override {
      if (n == target) *found = true;
    }
  } finder;
  finder.target = v;
  finder.found = &found;
  finder.visit(e);
  return found;
}

// Whether a Parallel/Vectorized loop may be marked `omp simd`: innermost, no calls with
// side effects, no allocations, and every store addresses an element that moves with the
// loop variable (a store to a fixed address, e.g. a local.var accumulator, is a
// loop-carried dependence).
bool simd_safe(const ForNode* loop) {
  struct Checker : IRVisitor {
    const VarNode* var;
    bool ok = true;
    void visit_for(const ForNode*) override { ok = false; }
    void visit_allocate(const AllocateNode*) override { ok = false; }
    void visit_kernel(const KernelNode*) override { ok = false; }
    void visit_tile_op(const TileOpNode*) override { ok = false; }
    void visit_evaluate(const EvaluateNode* n) override {
      if (n->value->kind == ExprKind::Call) ok = false;
    }
    void visit_call(const CallNode* n) override {
      if (n->op == "print" || n->op.rfind("atomic_", 0) == 0) ok = false;
      IRVisitor::visit_call(n);
    }
    void visit_store(const BufferStoreNode* n) override {
      bool moves = false;
      for (auto& i : n->indices) moves = moves || mentions_var(i, var);
      if (!moves || n->buffer->scope == scope::kLocalVar) ok = false;
      IRVisitor::visit_store(n);
    }
  } checker;
  checker.var = loop->var.get();
  checker.visit(loop->body);
  return checker.ok;
}

// ------------------------------------------------------------------ the generator

struct BufferInfo {
  std::string name;
  bool scalar = false;               // local.var: a plain variable
  std::vector<std::string> strides;  // precomputed int64 stride names (params), else empty
};

class CodeGenCPU {
 public:
  std::string run(const PrimFunc& f) {
    func_ = f;
    // The runtime looks the entry up as "<name>_entry".
    std::string entry = sanitize(f->name) + "_entry";
    names_.reserve(entry);
    line("// Generated by the TileLang CPU back end from '" + f->name + "'.");
    line("#include \"tl/cpu/tl_cpu.h\"");
    line("");
    line("extern \"C\" int32_t " + entry + "(void* const* args) {");
    ++indent_;
    emit_params();
    emit_stmt(f->body);
    line("return 0;");
    --indent_;
    line("}");
    return out_.str();
  }

 private:
  // ---------------------------------------------------------------- output helpers
  void line(const std::string& s) {
    if (!s.empty()) out_ << std::string(size_t(indent_) * 2, ' ') << s;
    out_ << '\n';
  }
  // Pragmas start in column 0 of their own line; keep them indented for readability.
  void pragma(const std::string& s) { line("#pragma " + s); }

  // ---------------------------------------------------------------- scopes
  std::string bind_var(const Var& v) {
    std::string name = names_.fresh(v->name);
    var_names_[v.get()] = name;
    return name;
  }
  // Binds v for the duration of fn, restoring any outer binding afterwards.
  template <typename Fn>
  void with_var(const Var& v, const std::string& name, bool nonneg, Fn fn) {
    auto it = var_names_.find(v.get());
    std::optional<std::string> previous;
    if (it != var_names_.end()) previous = it->second;
    bool was_nonneg = nonneg_.count(v.get()) > 0;
    var_names_[v.get()] = name;
    if (nonneg)
      nonneg_.insert(v.get());
    else
      nonneg_.erase(v.get());
    fn();
    if (previous)
      var_names_[v.get()] = *previous;
    else
      var_names_.erase(v.get());
    if (was_nonneg)
      nonneg_.insert(v.get());
    else
      nonneg_.erase(v.get());
  }

  const BufferInfo& buffer_info(const Buffer& b, Span span) {
    auto it = buffers_.find(b->data ? (const void*)b->data.get() : (const void*)b.get());
    if (it == buffers_.end())
      fail(ErrorKind::Internal, span, "buffer '" + b->name + "' is used outside its allocation",
           "this is a compiler bug; please report it with the kernel");
    return it->second;
  }
  static const void* buffer_key(const Buffer& b) {
    return b->data ? (const void*)b->data.get() : (const void*)b.get();
  }

  // ---------------------------------------------------------------- parameters
  void emit_params() {
    const auto& params = func_->params;
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      std::string arg = "args[" + std::to_string(i) + "]";
      if (p.is_buffer()) {
        const Buffer& b = p.buffer;
        std::string t = ctype(b->dtype, b->span, "buffer '" + b->name + "'");
        BufferInfo info;
        info.name = names_.fresh(b->name);
        line(t + "* __restrict__ " + info.name + " = (" + t + "*)" + arg + ";");
        buffers_[buffer_key(b)] = info;
        if (p.var && p.var.get() != b->data.get()) var_names_[p.var.get()] = info.name;
      } else {
        std::string t = ctype(p.var->dtype, p.var->span, "parameter '" + p.var->name + "'");
        line("const " + t + " " + bind_var(p.var) + " = *(" + t + "*)" + arg + ";");
      }
    }
    auto svars = shape_vars(*func_);
    for (size_t k = 0; k < svars.size(); ++k) {
      const Var& v = svars[k];
      if (var_names_.count(v.get())) continue;  // also a scalar parameter
      std::string t = ctype(v->dtype, v->span, "shape variable '" + v->name + "'");
      std::string arg = "args[" + std::to_string(params.size() + k) + "]";
      line("const " + t + " " + bind_var(v) + " = (" + t + ")*(int64_t*)" + arg + ";");
      nonneg_.insert(v.get());  // extents are at least 1
    }
    // Symbolic strides of the parameters, once, in int64.
    for (auto& p : params) {
      if (!p.is_buffer()) continue;
      BufferInfo& info = buffers_[buffer_key(p.buffer)];
      auto strides = p.buffer->effective_strides();
      info.strides.resize(strides.size());
      for (size_t d = 0; d < strides.size(); ++d) {
        if (const_int(strides[d])) continue;
        info.strides[d] = names_.fresh(info.name + "_stride" + std::to_string(d));
        line("const int64_t " + info.strides[d] + " = " + emit_int64(strides[d]).text + ";");
      }
    }
  }

  // ---------------------------------------------------------------- expressions
  // e converted to the C++ type of dtype t.
  Code convert(const Expr& e, DataType t) {
    // Immediates are written directly in the wanted type.
    if (auto* i = as<IntImmNode>(e); i && (t.is_integer() || t.is_bool()))
      return emit_int(std::make_shared<IntImmNode>(t, i->value, e->span).get());
    if (auto* i = as<IntImmNode>(e); i && t.is_float())
      return emit(std::make_shared<FloatImmNode>(t, double(i->value), e->span));
    if (auto* f = as<FloatImmNode>(e); f && t.is_float())
      return emit(std::make_shared<FloatImmNode>(t, f->value, e->span));
    Code c = emit(e);
    return convert_code(c, e->dtype, t, e->span);
  }
  Code convert_code(const Code& c, DataType from, DataType to, Span span) {
    if (from == to) return c;
    std::string t = ctype(to, span);
    if (to.is_bool()) {
      if (is_storage_float(from)) return {"(float)" + wrap(c, kUnary) + " != 0.0f", kEq};
      return {wrap(c, kRel) + " != 0", kEq};
    }
    if (is_storage_float(to)) {
      // Doubles round directly; everything else goes through float.
      if (from == DataType::Float(64) || from == DataType::Float(32)) return {t + "(" + c.text + ")"};
      return {t + "((float)" + wrap(c, kUnary) + ")"};
    }
    if (is_storage_float(from)) {
      if (to == DataType::Float(32)) return {"(float)" + wrap(c, kUnary), kUnary};
      return {"(" + t + ")(float)" + wrap(c, kUnary), kUnary};
    }
    return {"(" + t + ")" + wrap(c, kUnary), kUnary};
  }
  // Rounds a value computed in compute_type(t) back to t where they differ.
  Code finish(const Code& c, DataType t, Span span) {
    if (is_storage_float(t)) return {ctype(t, span) + "(" + c.text + ")"};
    if (t.is_integer() && t.bits < 32) return {ctype(t, span) + "(" + c.text + ")"};
    return c;
  }

  Code emit(const Expr& e) {
    check_dtype(e->dtype, e->span, "an expression");
    switch (e->kind) {
      case ExprKind::IntImm:
        return emit_int(as<IntImmNode>(e));
      case ExprKind::FloatImm: {
        auto* n = as<FloatImmNode>(e);
        DataType ct = compute_type(n->dtype);
        Code lit{float_literal(n->value, ct.bits == 32)};
        if (lit.text[0] == '-') lit.prec = kUnary;
        if (is_storage_float(n->dtype)) return {ctype(n->dtype, n->span) + "(" + lit.text + ")"};
        return lit;
      }
      case ExprKind::StringImm:
        fail(ErrorKind::Internal, e->span, "a string is used as a value", "strings may only be printed");
      case ExprKind::Var:
        return {var_name(as<VarNode>(e), e->span)};
      case ExprKind::Binary:
        return emit_binary(as<BinaryNode>(e));
      case ExprKind::Not:
        return {"!" + wrap(convert(as<NotNode>(e)->a, DataType::Bool()), kUnary), kUnary};
      case ExprKind::Select: {
        auto* n = as<SelectNode>(e);
        // Only the chosen side is evaluated: the other may be a guarded out-of-bounds load.
        Code c = convert(n->cond, DataType::Bool());
        Code t = convert(n->true_value, n->dtype), f = convert(n->false_value, n->dtype);
        return {wrap(c, kOrOr) + " ? " + wrap(t, kTernary) + " : " + wrap(f, kTernary), kTernary};
      }
      case ExprKind::Cast: {
        auto* n = as<CastNode>(e);
        return convert(n->value, n->dtype);
      }
      case ExprKind::BufferLoad: {
        auto* n = as<BufferLoadNode>(e);
        return {element(n->buffer, n->indices, n->span)};
      }
      case ExprKind::Call:
        return emit_call(as<CallNode>(e));
    }
    fail(ErrorKind::Internal, e->span, "unknown expression kind");
  }

  Code emit_int(const IntImmNode* n) {
    DataType t = n->dtype;
    int64_t v = n->value;
    if (t.is_bool()) return {v ? "true" : "false"};
    if (t.is_int() && t.bits == 32) {
      if (v == std::numeric_limits<int32_t>::min()) return {"(-2147483647 - 1)", kAdd};
      return {std::to_string(v), v < 0 ? kUnary : kPrimary};
    }
    if (t.is_int() && t.bits == 64) {
      if (v == std::numeric_limits<int64_t>::min()) return {"(-9223372036854775807L - 1)", kAdd};
      return {"int64_t(" + std::to_string(v) + ")"};
    }
    if (t.is_uint() && t.bits == 32) return {std::to_string(uint32_t(v)) + "u"};
    if (t.is_uint() && t.bits == 64) return {"uint64_t(" + std::to_string(uint64_t(v)) + "u)"};
    if (t.is_uint())
      return {ctype(t, n->span) + "(" + std::to_string(uint64_t(v) & ((1u << t.bits) - 1)) + ")"};
    if (t.is_int()) return {ctype(t, n->span) + "(" + std::to_string(v) + ")"};
    // An integer immediate of a float dtype (hand-built IR).
    return emit(std::make_shared<FloatImmNode>(t, double(v), n->span));
  }

  std::string var_name(const VarNode* v, Span span) {
    auto it = var_names_.find(v);
    if (it != var_names_.end()) return it->second;
    if (thread_vars_.count(v)) fail_thread_use(span.defined() ? span : v->span);
    fail(ErrorKind::Internal, span.defined() ? span : v->span,
         "variable '" + v->name + "' is used outside its scope", "this is a compiler bug; please report it");
  }

  [[noreturn]] static void fail_thread_use(Span span) {
    fail(ErrorKind::Unsupported, span,
         "thread index used on target cpu: the CPU back end runs each block as one tile-level program "
         "and has no threads",
         "express per-element work with T.Parallel, or compile for a GPU target");
  }

  // Non-negative integer expressions: division and remainder by a positive amount can
  // then use C's operators, which vectorise better than the floor forms.
  bool nonneg(const Expr& e) {
    if (auto* i = as<IntImmNode>(e)) return i->value >= 0;
    if (e->dtype.is_uint()) return true;
    if (auto* v = as<VarNode>(e)) return nonneg_.count(v) > 0;
    if (auto* c = as<CastNode>(e))
      return c->dtype.is_integer() && c->value->dtype.is_integer() && c->dtype.bits >= c->value->dtype.bits &&
             nonneg(c->value);
    if (auto* s = as<SelectNode>(e)) return nonneg(s->true_value) && nonneg(s->false_value);
    if (auto* b = as<BinaryNode>(e)) {
      switch (b->op) {
        case BinaryOp::Add:
        case BinaryOp::Mul:
        case BinaryOp::Min:
        case BinaryOp::Div:
        case BinaryOp::Mod:
        case BinaryOp::FloorDiv:
          return nonneg(b->a) && nonneg(b->b);
        case BinaryOp::FloorMod:
          return nonneg(b->b);
        case BinaryOp::Max:
          return nonneg(b->a) || nonneg(b->b);
        default:
          return false;
      }
    }
    return false;
  }

  Code emit_binary(const BinaryNode* n) {
    DataType rt = n->dtype;
    Span sp = n->span;
    if (is_logical(n->op)) {
      Code a = convert(n->a, DataType::Bool()), b = convert(n->b, DataType::Bool());
      if (n->op == BinaryOp::And) return {wrap(a, kAndAnd) + " && " + wrap(b, kAndAnd - 1), kAndAnd};
      return {wrap(a, kOrOr) + " || " + wrap(b, kAndAnd), kOrOr};
    }
    if (is_comparison(n->op)) {
      DataType ct = compute_type(common_type(n->a->dtype, n->b->dtype));
      Code a = convert(n->a, ct), b = convert(n->b, ct);
      const char* op = nullptr;
      int prec = kRel;
      switch (n->op) {
        case BinaryOp::EQ:
          op = "==";
          prec = kEq;
          break;
        case BinaryOp::NE:
          op = "!=";
          prec = kEq;
          break;
        case BinaryOp::LT:
          op = "<";
          break;
        case BinaryOp::LE:
          op = "<=";
          break;
        case BinaryOp::GT:
          op = ">";
          break;
        default:
          op = ">=";
          break;
      }
      return {wrap(a, prec) + " " + op + " " + wrap(b, prec - 1), prec};
    }
    DataType ct = compute_type(rt);
    if (ct.is_bool()) ct = DataType::Int(32);
    Code a = convert(n->a, ct), b = convert(n->b, ct);
    bool is_float = ct.is_float();
    auto infix = [&](const char* op, int prec) {
      return Code{wrap(a, prec) + " " + op + " " + wrap(b, prec - 1), prec};
    };
    auto fn = [&](const char* name) { return Code{std::string(name) + "(" + a.text + ", " + b.text + ")"}; };
    Code r;
    switch (n->op) {
      case BinaryOp::Add:
        r = infix("+", kAdd);
        break;
      case BinaryOp::Sub:
        r = infix("-", kAdd);
        break;
      case BinaryOp::Mul:
        r = infix("*", kMul);
        break;
      case BinaryOp::Div:
        r = infix("/", kMul);
        break;
      case BinaryOp::Mod:
        r = is_float ? fn("tl::fmod") : infix("%", kMul);
        break;
      case BinaryOp::FloorDiv:
        r = (!is_float && nonneg(n->a) && nonneg(n->b)) ? infix("/", kMul) : fn("tl::floordiv");
        break;
      case BinaryOp::FloorMod:
        r = (!is_float && nonneg(n->a) && nonneg(n->b)) ? infix("%", kMul) : fn("tl::floormod");
        break;
      case BinaryOp::Min:
        r = fn("tl::min");
        break;
      case BinaryOp::Max:
        r = fn("tl::max");
        break;
      default:
        fail(ErrorKind::Internal, sp, std::string("unexpected operator ") + binary_op_name(n->op));
    }
    if (rt.is_bool()) return convert_code(r, ct, rt, sp);
    return finish(r, rt, sp);
  }

  Code emit_call(const CallNode* n) {
    const std::string& op = n->op;
    Span sp = n->span;
    if (op == "thread_index") fail_thread_use(sp);
    if (op == "print" || op.rfind("atomic_", 0) == 0)
      fail(ErrorKind::Internal, sp, "T." + op + " is used as a value", "call it as a statement");
    const IntrinsicInfo* info = find_intrinsic(op);
    if (!info) {
      fail(ErrorKind::Unsupported, sp, "intrinsic '" + op + "' is not available on target cpu");
    }
    if (info->arity >= 0 && int(n->args.size()) != info->arity)
      fail(ErrorKind::Internal, sp,
           "T." + op + " called with " + std::to_string(n->args.size()) + " argument(s)");
    if (info->math) {
      DataType ct = compute_type(n->dtype);
      if (!ct.is_float()) ct = DataType::Float(32);
      std::string text = "tl::" + op + "(";
      for (size_t i = 0; i < n->args.size(); ++i) text += (i ? ", " : "") + convert(n->args[i], ct).text;
      text += ")";
      return convert_code({text}, ct, n->dtype.is_float() ? n->dtype : ct, sp);
    }
    const Expr& x = n->args[0];
    DataType xt = x->dtype;
    if (op == "abs") {
      DataType ct = compute_type(xt);
      if (ct.is_bool()) return emit(x);
      Code r{"tl::abs(" + convert(x, ct).text + ")"};
      return convert_code(finish(r, xt, sp), xt, n->dtype, sp);
    }
    if (op == "isnan" || op == "isinf") {
      if (!xt.is_float()) return {"false"};
      return {"tl::" + op + "(" + convert(x, compute_type(xt)).text + ")"};
    }
    fail(ErrorKind::Unsupported, sp, "intrinsic '" + op + "' is not available on target cpu");
  }

  // An int64 rendering of an integer expression: every variable is widened before any
  // arithmetic, so products of extents cannot overflow int32.
  Code emit_int64(const Expr& e) {
    DataType i64 = DataType::Int(64);
    if (auto* i = as<IntImmNode>(e)) return {std::to_string(i->value), i->value < 0 ? kUnary : kPrimary};
    if (auto* v = as<VarNode>(e)) {
      std::string name = var_name(v, e->span);
      return v->dtype == i64 ? Code{name} : Code{"(int64_t)" + name, kUnary};
    }
    if (auto* b = as<BinaryNode>(e); b && b->dtype.is_int()) {
      auto infix = [&](const char* op, int prec) {
        return Code{wrap(emit_int64(b->a), prec) + " " + op + " " + wrap(emit_int64(b->b), prec - 1), prec};
      };
      // Both arguments of the tl:: helpers must be int64_t exactly (one template type).
      auto arg = [&](const Expr& x) {
        auto* imm = as<IntImmNode>(x);
        return imm ? "int64_t(" + std::to_string(imm->value) + ")" : emit_int64(x).text;
      };
      auto fn = [&](const char* name) {
        return Code{std::string(name) + "(" + arg(b->a) + ", " + arg(b->b) + ")"};
      };
      bool fast = nonneg(b->a) && nonneg(b->b);
      switch (b->op) {
        case BinaryOp::Add:
          return infix("+", kAdd);
        case BinaryOp::Sub:
          return infix("-", kAdd);
        case BinaryOp::Mul:
          return infix("*", kMul);
        case BinaryOp::FloorDiv:
          return fast ? infix("/", kMul) : fn("tl::floordiv");
        case BinaryOp::FloorMod:
          return fast ? infix("%", kMul) : fn("tl::floormod");
        case BinaryOp::Min:
          return fn("tl::min");
        case BinaryOp::Max:
          return fn("tl::max");
        default:
          break;
      }
    }
    if (auto* c = as<CastNode>(e);
        c && c->value->dtype.is_int() && c->dtype.is_int() && c->dtype.bits >= c->value->dtype.bits)
      return emit_int64(c->value);
    return convert(e, i64);
  }

  // `name[offset]` (or the scalar of a local.var) for an element of b.
  std::string element(const Buffer& b, const std::vector<Expr>& indices, Span span) {
    const BufferInfo& info = buffer_info(b, span);
    if (info.scalar) return info.name;
    return info.name + "[" + offset(b, info, indices, span) + "]";
  }

  std::string offset(const Buffer& b, const BufferInfo& info, const std::vector<Expr>& indices, Span span) {
    if (indices.empty()) return "0";
    std::vector<Expr> strides = b->effective_strides();
    if (indices.size() == 1 && strides.size() != 1) {
      strides = {make_int(1)};  // an already flattened index
    } else if (indices.size() != strides.size()) {
      fail(ErrorKind::Internal, span,
           "buffer '" + b->name + "' has " + std::to_string(strides.size()) +
               " dimension(s) but is indexed with " + std::to_string(indices.size()));
    }
    if (indices.size() == 1 && const_int(strides[0]) && *const_int(strides[0]) == 1) {
      Code idx = emit(indices[0]);
      if (!indices[0]->dtype.is_integer()) idx = convert(indices[0], DataType::Int(64));
      return idx.text;
    }
    std::vector<std::string> terms;
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t* stride = const_int(strides[d]);
      const int64_t* idx_const = const_int(indices[d]);
      if ((stride && *stride == 0) || (idx_const && *idx_const == 0)) continue;
      Code idx = emit(indices[d]);
      if (stride && *stride == 1 && indices[d]->dtype.is_integer()) {
        terms.push_back(wrap(idx, kAdd - 1));  // int64 terms around it widen the sum
        continue;
      }
      Code idx64 = indices[d]->dtype == DataType::Int(64) ? idx : convert(indices[d], DataType::Int(64));
      std::string s;
      if (stride) {
        s = std::to_string(*stride);
      } else if (d < info.strides.size() && !info.strides[d].empty() &&
                 strides.size() == info.strides.size()) {
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
  void emit_stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (auto& x : as<SeqStmtNode>(s)->seq) emit_stmt(x);
        return;
      case StmtKind::For:
        return emit_for(as<ForNode>(s));
      case StmtKind::IfThenElse:
        return emit_if(as<IfThenElseNode>(s));
      case StmtKind::BufferStore: {
        auto* n = as<BufferStoreNode>(s);
        std::string lhs = element(n->buffer, n->indices, n->span);
        Code value = convert(n->value, n->buffer->dtype);
        if (is_storage_float(n->buffer->dtype) && !buffer_info(n->buffer, n->span).scalar) {
          // Copy the bits: GCC does not vectorise loops that copy small structs.
          line(lhs + ".bits = " + wrap(value, kPrimary) + ".bits;");
        } else {
          line(lhs + " = " + value.text + ";");
        }
        return;
      }
      case StmtKind::LetStmt: {
        auto* n = as<LetStmtNode>(s);
        std::string t = ctype(n->var->dtype, n->span, "variable '" + n->var->name + "'");
        Code value = convert(n->value, n->var->dtype);
        bool nn = n->var->dtype.is_integer() && nonneg(n->value);
        std::string name = names_.fresh(n->var->name);
        line("const " + t + " " + name + " = " + value.text + ";");
        with_var(n->var, name, nn, [&] { emit_stmt(n->body); });
        return;
      }
      case StmtKind::Evaluate:
        return emit_evaluate(as<EvaluateNode>(s));
      case StmtKind::Allocate:
        return emit_allocate(as<AllocateNode>(s));
      case StmtKind::TileOp:
        fail(ErrorKind::Internal, s->span,
             "tile operator T." + as<TileOpNode>(s)->op + " reached code generation",
             "the CPU pipeline lowers every tile operator first; this is a compiler bug");
      case StmtKind::Kernel:
        return emit_kernel(as<KernelNode>(s));
    }
  }

  void emit_block(const Stmt& body) {
    ++indent_;
    emit_stmt(body);
    --indent_;
  }

  void emit_for(const ForNode* n) {
    DataType vt = n->var->dtype;
    std::string t = ctype(vt, n->span, "loop variable '" + n->var->name + "'");
    if (n->for_kind == ForKind::Pipelined)
      fail(ErrorKind::Internal, n->span, "a T.Pipelined loop reached CPU code generation",
           "the CPU pipeline turns pipelined loops into serial ones; this is a compiler bug");
    std::string name = names_.fresh(n->var->name);
    Code mn = convert(n->min, vt);
    Code ext = convert(n->extent, vt);
    std::string bound;
    const int64_t* m = const_int(n->min);
    if (m && *m == 0) {
      bound = wrap(ext, kRel - 1);
    } else {
      // Evaluate the end once; the loop then has the canonical form OpenMP wants.
      std::string end = names_.fresh(name + "_end");
      line("const " + t + " " + end + " = " + wrap(mn, kAdd) + " + " + wrap(ext, kAdd - 1) + ";");
      bound = end;
    }
    switch (n->for_kind) {
      case ForKind::Parallel:
      case ForKind::Vectorized:
        if (simd_safe(n)) pragma("omp simd");
        break;
      case ForKind::Unrolled: {
        const int64_t* e = const_int(n->extent);
        pragma("GCC unroll " + std::to_string(e && *e > 0 && *e <= 64 ? *e : 8));
        break;
      }
      default:
        break;
    }
    line("for (" + t + " " + name + " = " + mn.text + "; " + name + " < " + bound + "; ++" + name + ") {");
    bool nn = vt.is_integer() && nonneg(n->min);
    with_var(n->var, name, nn, [&] { emit_block(n->body); });
    line("}");
  }

  void emit_if(const IfThenElseNode* n) {
    line("if (" + convert(n->cond, DataType::Bool()).text + ") {");
    emit_block(n->then_case);
    if (n->else_case) {
      line("} else {");
      emit_block(n->else_case);
    }
    line("}");
  }

  void emit_evaluate(const EvaluateNode* n) {
    auto* call = as<CallNode>(n->value);
    if (!call) {
      if (n->value->kind == ExprKind::IntImm || n->value->kind == ExprKind::FloatImm) return;
      line("(void)(" + emit(n->value).text + ");");
      return;
    }
    const std::string& op = call->op;
    if (op == "print") {
      std::string text = "tl::print(";
      for (size_t i = 0; i < call->args.size(); ++i) {
        const Expr& a = call->args[i];
        text += i ? ", " : "";
        if (auto* s = as<StringImmNode>(a)) {
          text += string_literal(s->value);
        } else if (is_storage_float(a->dtype)) {
          text += convert(a, DataType::Float(32)).text;
        } else {
          text += emit(a).text;
        }
      }
      line(text + ");");
      return;
    }
    if (op == "atomic_add" || op == "atomic_max" || op == "atomic_min") {
      if (call->args.size() != 2)
        fail(ErrorKind::Internal, call->span, "T." + op + " takes an element and a value");
      auto* dst = as<BufferLoadNode>(call->args[0]);
      if (!dst)
        fail(ErrorKind::Type, call->span, "the first argument of T." + op + " must be a buffer element",
             "write T." + op + "(C[i, j], value)");
      std::string t = ctype(dst->buffer->dtype, dst->span, "buffer '" + dst->buffer->name + "'");
      if (dst->buffer->dtype.is_bool())
        fail(ErrorKind::Unsupported, call->span, "T." + op + " on a bool buffer is not supported");
      Code value = convert(call->args[1], dst->buffer->dtype);
      line("tl::" + op + "(&" + element(dst->buffer, dst->indices, dst->span) + ", " + value.text + ");");
      return;
    }
    line("(void)(" + emit(n->value).text + ");");
  }

  // Element count of b as an int64 expression (vars in scope at the point of the call).
  std::string size_code(const Buffer& b) {
    int64_t n = b->const_size();
    if (n >= 0) return std::to_string(n);
    std::string s;
    for (size_t d = 0; d < b->shape.size(); ++d)
      s += (d ? " * " : "") + wrap(emit_int64(b->shape[d]), kMul - 1);
    return s.empty() ? "1" : s;
  }

  // Declares the storage of a block-private buffer and registers its name.
  void declare_buffer(const Buffer& b, Span span) {
    std::string t = ctype(b->dtype, span, "buffer '" + b->name + "'");
    BufferInfo info;
    info.name = names_.fresh(b->name);
    int64_t n = b->const_size();
    // Small tiles live on the stack, where the compiler sees they cannot alias;
    // large ones (shared tiles) on the heap, off the limited OpenMP thread stacks.
    int64_t bytes = n * b->dtype.bytes();
    if (n >= 0 && bytes <= kStackBytesPerBuffer && stack_bytes_ + bytes <= kStackBytesPerKernel) {
      stack_bytes_ += bytes;
      line("alignas(64) " + t + " " + info.name + "[" + std::to_string(n > 0 ? n : 1) + "];");
    } else {
      std::string storage = names_.fresh(info.name + "_storage");
      line("tl::AlignedArray<" + t + "> " + storage + "(" + size_code(b) + ");");
      line(t + "* __restrict__ " + info.name + " = " + storage + ".get();");
    }
    buffers_[buffer_key(b)] = info;
  }

  void emit_allocate(const AllocateNode* n) {
    const Buffer& b = n->buffer;
    if (b->scope == scope::kLocalVar) {
      std::string t = ctype(b->dtype, n->span, "variable '" + b->name + "'");
      BufferInfo info;
      info.name = names_.fresh(b->name);
      info.scalar = true;
      std::string init;
      auto it = n->attrs.find("init");
      if (it != n->attrs.end() && std::holds_alternative<Expr>(it->second)) {
        init = convert(std::get<Expr>(it->second), b->dtype).text;
      } else {
        init = convert(make_int(0), b->dtype).text;  // zero: never read garbage
      }
      line(t + " " + info.name + " = " + init + ";");
      with_buffer(b, info, [&] { emit_stmt(n->body); });
      return;
    }
    if (hoisted_.count(n)) {
      emit_stmt(n->body);  // storage declared once per thread, before the block loop
      return;
    }
    auto saved = saved_buffer(b);
    declare_buffer(b, n->span);
    emit_stmt(n->body);
    restore_buffer(b, saved);
  }

  std::optional<BufferInfo> saved_buffer(const Buffer& b) {
    auto it = buffers_.find(buffer_key(b));
    if (it == buffers_.end()) return std::nullopt;
    return it->second;
  }
  void restore_buffer(const Buffer& b, const std::optional<BufferInfo>& saved) {
    if (saved)
      buffers_[buffer_key(b)] = *saved;
    else
      buffers_.erase(buffer_key(b));
  }
  template <typename Fn>
  void with_buffer(const Buffer& b, const BufferInfo& info, Fn fn) {
    auto saved = saved_buffer(b);
    buffers_[buffer_key(b)] = info;
    fn();
    restore_buffer(b, saved);
  }

  // Allocations inside a kernel whose size depends only on values defined before it
  // (constants, parameters, shape variables, host lets): allocated once per thread.
  std::vector<const AllocateNode*> hoistable_allocations(const KernelNode* k) {
    std::vector<const AllocateNode*> out;
    std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
      if (!s) return;
      switch (s->kind) {
        case StmtKind::Seq:
          for (auto& x : as<SeqStmtNode>(s)->seq) walk(x);
          return;
        case StmtKind::For:
          return walk(as<ForNode>(s)->body);
        case StmtKind::IfThenElse:
          walk(as<IfThenElseNode>(s)->then_case);
          walk(as<IfThenElseNode>(s)->else_case);
          return;
        case StmtKind::LetStmt:
          return walk(as<LetStmtNode>(s)->body);
        case StmtKind::Allocate: {
          auto* a = as<AllocateNode>(s);
          if (a->buffer->scope != scope::kLocalVar) {
            bool outer = true;
            for (auto& e : a->buffer->shape) {
              for_each_var(e, [&](const VarNode* v) { outer = outer && var_names_.count(v) > 0; });
            }
            if (outer) out.push_back(a);
          }
          return walk(a->body);
        }
        default:
          return;
      }
    };
    walk(k->body);
    return out;
  }
  static void for_each_var(const Expr& e, const std::function<void(const VarNode*)>& fn) {
    struct V : IRVisitor {
      const std::function<void(const VarNode*)>* fn;
      void visit_var(const VarNode* v) override { (*fn)(v); }
    } visitor;
    visitor.fn = &fn;
    visitor.visit(e);
  }

  void emit_kernel(const KernelNode* k) {
    if (in_kernel_)
      fail(ErrorKind::Unsupported, k->span, "a T.Kernel inside another T.Kernel",
           "launch the kernels one after another");
    if (k->grid.size() > 3 || k->grid.size() != k->block_vars.size())
      fail(ErrorKind::Unsupported, k->span, "T.Kernel takes 1 to 3 grid extents on target cpu",
           "fold the extra dimensions into one block index and recover them with // and %");
    line("{");
    ++indent_;
    std::string grid_desc;
    std::vector<std::string> extents;
    for (size_t d = 0; d < k->grid.size(); ++d) {
      if (const int64_t* g = const_int(k->grid[d])) {
        extents.push_back(std::to_string(*g));
      } else {
        std::string name = names_.fresh("grid_" + std::string(1, "xyz"[d]));
        line("const int64_t " + name + " = " + emit_int64(k->grid[d]).text + ";");
        extents.push_back(name);
      }
    }
    in_kernel_ = true;
    stack_bytes_ = 0;
    for (auto& tv : k->thread_vars) thread_vars_.insert(tv.get());
    pragma("omp parallel");
    line("{");
    ++indent_;
    auto hoisted = hoistable_allocations(k);
    std::vector<std::pair<Buffer, std::optional<BufferInfo>>> saved;
    for (auto* a : hoisted) {
      saved.emplace_back(a->buffer, saved_buffer(a->buffer));
      declare_buffer(a->buffer, a->span);
      hoisted_.insert(a);
    }
    size_t dims = k->block_vars.size();
    if (dims > 0)
      pragma(std::string("omp for") + (dims > 1 ? " collapse(" + std::to_string(dims) + ")" : "") +
             " schedule(dynamic)");
    // Block loops: the last block index outermost, so bx varies fastest.
    std::vector<std::string> block_names(dims);
    for (size_t i = 0; i < dims; ++i) {
      size_t d = dims - 1 - i;
      const Var& v = k->block_vars[d];
      std::string t = ctype(v->dtype, k->span, "block index '" + v->name + "'");
      block_names[d] = names_.fresh(v->name);
      line("for (" + t + " " + block_names[d] + " = 0; " + block_names[d] + " < " + extents[d] + "; ++" +
           block_names[d] + ") {");
      ++indent_;
    }
    std::function<void(size_t)> bind = [&](size_t d) {
      if (d == dims) return emit_stmt(k->body);
      with_var(k->block_vars[d], block_names[d], true, [&] { bind(d + 1); });
    };
    bind(0);
    for (size_t i = 0; i < dims; ++i) {
      --indent_;
      line("}");
    }
    for (auto* a : hoisted) hoisted_.erase(a);
    for (auto& [b, info] : saved) restore_buffer(b, info);
    --indent_;
    line("}");
    for (auto& tv : k->thread_vars) thread_vars_.erase(tv.get());
    in_kernel_ = false;
    --indent_;
    line("}");
  }

  static constexpr int64_t kStackBytesPerBuffer = 16 * 1024;
  static constexpr int64_t kStackBytesPerKernel = 64 * 1024;

  PrimFunc func_;
  std::ostringstream out_;
  int indent_ = 0;
  NameTable names_;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_set<const VarNode*> nonneg_;
  std::unordered_set<const VarNode*> thread_vars_;
  std::unordered_map<const void*, BufferInfo> buffers_;
  std::unordered_set<const AllocateNode*> hoisted_;
  bool in_kernel_ = false;
  int64_t stack_bytes_ = 0;  // stack arrays declared in the current kernel
};

}  // namespace

std::string codegen_cpu(const PrimFunc& lowered) {
  if (!lowered) fail(ErrorKind::Internal, {}, "codegen_cpu called without a function");
  return CodeGenCPU().run(lowered);
}

}  // namespace tl
