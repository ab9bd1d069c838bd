#include "codegen/c_like.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/intrinsics.h"
#include "ir/op.h"

namespace tl::c_like {

bool is_reserved_name(const std::string& s) {
  static const std::unordered_set<std::string> kReserved = {
      // C++ keywords
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
      "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval",
      "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
      "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
      "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "restrict",
      // Names the generated code or the standard headers use.
      "args", "tl", "std", "main", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
      "uint32_t", "uint64_t", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "NULL", "EOF", "INFINITY",
      "NAN", "errno", "assert", "stdin", "stdout", "stderr", "offsetof", "BUFSIZ", "CHAR_BIT", "INT_MAX",
      "INT_MIN", "UINT_MAX", "HUGE_VAL", "HUGE_VALF", "FLT_MAX", "DBL_MAX", "isnan", "isinf", "signbit",
      "fpclassify", "isfinite", "isnormal", "unix", "linux", "environ", "printf",
  };
  return kReserved.count(s) > 0;
}

std::string sanitize(const std::string& hint) {
  std::string s;
  for (char c : hint) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty()) s = "v";
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  // A leading underscore or a double underscore belongs to the implementation.
  for (size_t p; (p = s.find("__")) != std::string::npos;) s.replace(p, 2, "_");
  if (s[0] == '_') s = "v" + s;
  return s;
}

std::string NameTable::fresh(const std::string& hint) {
  std::string s = sanitize(hint);
  if (is_reserved_name(s) || (extra_ && extra_->count(s))) s += "_";
  std::string name = s;
  for (int k = 1; used_.count(name); ++k) name = s + "_" + std::to_string(k);
  used_.insert(name);
  return name;
}

std::string finite_float_literal(double v, bool single) {
  char buf[64];
  for (int digits = single ? 6 : 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (single ? std::strtof(buf, nullptr) == float(v) : std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (single) s += "f";
  return s;
}

std::string string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '?':
        out += "\\?";  // no trigraphs
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03o", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

// ------------------------------------------------------------------ types

bool is_storage_float(DataType t) {
  return (t.code == TypeCode::Float && t.bits == 16) || t.code == TypeCode::BFloat ||
         t.code == TypeCode::Float8E4M3 || t.code == TypeCode::Float8E5M2;
}

DataType common_type(DataType a, DataType b) {
  if (a == b) return a;
  DataType ca = compute_type(a), cb = compute_type(b);
  if (ca.is_float() != cb.is_float()) return ca.is_float() ? ca : cb;
  if (ca.is_bool()) return cb;
  if (cb.is_bool()) return ca;
  if (ca.bits != cb.bits) return ca.bits > cb.bits ? ca : cb;
  return ca.is_uint() ? ca : cb;
}

// ------------------------------------------------------------------ Emitter: output, scopes, types

void Emitter::line(const std::string& s) {
  if (!s.empty()) out_ << std::string(size_t(indent_) * 2, ' ') << s;
  out_ << '\n';
}

Emitter::SavedVar Emitter::bind(const Var& v, const std::string& name, bool nonneg) {
  SavedVar saved;
  auto it = var_names_.find(v.get());
  if (it != var_names_.end()) saved.name = it->second;
  saved.nonneg = nonneg_.count(v.get()) > 0;
  var_names_[v.get()] = name;
  if (nonneg)
    nonneg_.insert(v.get());
  else
    nonneg_.erase(v.get());
  return saved;
}

void Emitter::unbind(const Var& v, const SavedVar& saved) {
  if (saved.name)
    var_names_[v.get()] = *saved.name;
  else
    var_names_.erase(v.get());
  if (saved.nonneg)
    nonneg_.insert(v.get());
  else
    nonneg_.erase(v.get());
}

std::string Emitter::var_name(const VarNode* v, Span span) {
  auto it = var_names_.find(v);
  if (it != var_names_.end()) return it->second;
  Span where = span.defined() ? span : v->span;
  unbound_var(v, where);
  fail(ErrorKind::Internal, where, internal_ + "variable '" + v->name + "' is used outside its scope",
       "this is a compiler bug; please report it");
}

void Emitter::check_dtype(DataType t, Span span, const std::string& what) {
  if (t.is_sub_byte())
    fail(ErrorKind::Unsupported, span,
         what + " has dtype " + t.str() + ", which target " + target_ +
             " does not support: sub-byte types exist only as packed storage",
         "store the data as int8/uint8 and unpack the values with shifts and masks");
  if (t.lanes != 1)
    fail(ErrorKind::Unsupported, span,
         what + " has vector dtype " + t.str() + ", which target " + target_ + " does not support",
         "write the lanes as a T.vectorized loop over scalars");
}

void Emitter::emit_prelude(const PrimFuncNode& f) {
  auto it = f.attrs.find("prelude");
  if (it == f.attrs.end() || !std::holds_alternative<std::string>(it->second)) return;
  line("// Imported by the program (T.import_source / T.Kernel(prelude=)).");
  out_ << std::get<std::string>(it->second) << "\n";
}

bool Emitter::may_alias(const PrimFuncNode& f, const std::string& param) {
  auto it = f.attrs.find("non_restrict");
  if (it == f.attrs.end() || !std::holds_alternative<std::string>(it->second)) return false;
  std::stringstream names(std::get<std::string>(it->second));
  for (std::string name; std::getline(names, name, ',');)
    if (name == param) return true;
  return false;
}

bool Emitter::emit_extern_call(const CallNode* n, Code* out) {
  if (n->op == "call_extern") {
    auto* name = n->args.empty() ? nullptr : as<StringImmNode>(n->args[0]);
    if (!name) fail(ErrorKind::Internal, n->span, internal_ + "call_extern without a function name");
    std::string text = name->value + "(";
    for (size_t i = 1; i < n->args.size(); ++i) text += (i > 1 ? ", " : "") + emit(n->args[i]).text;
    *out = {text + ")", kPrimary};
    return true;
  }
  if (n->op == "address_of") {
    auto* at = n->args.size() == 2 ? as<BufferLoadNode>(n->args[0]) : nullptr;
    if (!at) fail(ErrorKind::Internal, n->span, internal_ + "address_of takes a buffer element and an offset");
    std::string addr = "(&" + element(at->buffer, at->indices, at->span) + ")";
    const int64_t* off = const_int(n->args[1]);
    if (!off || *off != 0) addr = "(" + addr + " + " + emit(n->args[1]).text + ")";
    *out = {addr, kPrimary};
    return true;
  }
  if (n->op == "reinterpret") {
    const Expr& v = n->args.at(0);
    if (v->dtype.bits != n->dtype.bits || v->dtype.lanes != n->dtype.lanes)
      fail(ErrorKind::Type, n->span,
           "T.reinterpret: " + v->dtype.str() + " and " + n->dtype.str() + " are not of the same width",
           "reinterpret between types of the same number of bits (T.cast converts values)");
    *out = {"tl::bit_cast<" + ctype(n->dtype, n->span) + ">(" + emit(v).text + ")", kPrimary};
    return true;
  }
  return false;
}

std::string Emitter::ctype(DataType t, Span span, const std::string& what) {
  check_dtype(t, span, what);
  if (is_storage_float(t)) return storage_type_name(t);
  switch (t.code) {
    case TypeCode::Int:
    case TypeCode::UInt:
      if (t.bits != 8 && t.bits != 16 && t.bits != 32 && t.bits != 64) break;
      return std::string(t.is_uint() ? "uint" : "int") + std::to_string(t.bits) + "_t";
    case TypeCode::Float:
      if (t.bits == 32) return "float";
      if (t.bits == 64) return "double";
      break;
    case TypeCode::Bool:
      return "bool";
    case TypeCode::Handle:
      return "void*";
    default:
      break;
  }
  fail(ErrorKind::Unsupported, span,
       what + " has dtype " + t.str() + ", which target " + target_ + " does not support");
}

// ------------------------------------------------------------------ Emitter: expressions

Code Emitter::convert(const Expr& e, DataType t) {
  // Immediates are written directly in the wanted type.
  if (auto* i = as<IntImmNode>(e); i && (t.is_integer() || t.is_bool()))
    return emit_int(std::make_shared<IntImmNode>(t, i->value, e->span).get());
  if (auto* i = as<IntImmNode>(e); i && t.is_float())
    return emit(std::make_shared<FloatImmNode>(t, double(i->value), e->span));
  if (auto* f = as<FloatImmNode>(e); f && t.is_float())
    return emit(std::make_shared<FloatImmNode>(t, f->value, e->span));
  return convert_code(emit(e), e->dtype, t, e->span);
}

Code Emitter::emit(const Expr& e) {
  check_dtype(e->dtype, e->span, "an expression");
  switch (e->kind) {
    case ExprKind::IntImm:
      return emit_int(as<IntImmNode>(e));
    case ExprKind::FloatImm:
      return emit_float(as<FloatImmNode>(e));
    case ExprKind::StringImm:
      fail(ErrorKind::Internal, e->span, internal_ + "a string is used as a value",
           "strings may only be printed");
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
  fail(ErrorKind::Internal, e->span, internal_ + "unknown expression kind");
}

bool Emitter::divisor_is_safe(const Expr& e) {
  auto* i = as<IntImmNode>(e);
  return i && i->value != 0 && (i->value != -1 || e->dtype.is_uint());
}

bool Emitter::nonneg(const Expr& e) {
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
      case BinaryOp::BitAnd:
        return nonneg(b->a) || nonneg(b->b);
      case BinaryOp::BitOr:
      case BinaryOp::BitXor:
        return nonneg(b->a) && nonneg(b->b);
      case BinaryOp::ShiftRight:  // (x << s may wrap into the sign bit: bit tricks do that)
        return nonneg(b->a);
      default:
        return false;
    }
  }
  return false;
}

// max and min of floats, NaN-propagating as numpy's maximum and minimum are: C's
// comparison `a < b ? b : a` alone drops a NaN second operand. The headers' tl::max and
// tl::min keep the comparison form (integers, and what they are used for inside the
// headers); an immediately called lambda evaluates each operand once.
Code Emitter::float_min_max(bool is_max, DataType t, const Code& a, const Code& b, Span span) {
  std::string type = ctype(t, span);
  std::string pick = is_max ? "x < y" : "y < x";
  return {"[](" + type + " x, " + type + " y) { return " + pick + " || y != y ? y : x; }(" + a.text + ", " + b.text +
          ")"};
}

Code Emitter::emit_binary(const BinaryNode* n) {
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
    const char* op = ">=";
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
        break;
    }
    return {wrap(a, prec) + " " + op + " " + wrap(b, prec - 1), prec};
  }
  if (is_bitwise(n->op)) return emit_bitwise(n);
  DataType ct = compute_type(rt);
  if (ct.is_bool()) ct = DataType::Int(32);
  Code a = convert(n->a, ct), b = convert(n->b, ct);
  bool is_float = ct.is_float();
  auto infix = [&](const char* op, int prec) {
    return Code{wrap(a, prec) + " " + op + " " + wrap(b, prec - 1), prec};
  };
  auto fn = [&](const char* name) { return Code{std::string(name) + "(" + a.text + ", " + b.text + ")"}; };
  // C's / and % where the divisor is a constant that cannot trap (not 0, not -1); the
  // tl:: helpers, which give numpy's 0 for a zero divisor, elsewhere.
  bool plain_divisor = is_float || divisor_is_safe(n->b);
  bool fast = !is_float && nonneg(n->a) && divisor_is_safe(n->b);
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
      r = plain_divisor ? infix("/", kMul) : fn("tl::truncdiv");
      break;
    case BinaryOp::Mod:
      r = is_float ? fn("tl::fmod") : plain_divisor ? infix("%", kMul) : fn("tl::truncmod");
      break;
    case BinaryOp::FloorDiv:
      r = fast ? infix("/", kMul) : fn("tl::floordiv");
      break;
    case BinaryOp::FloorMod:
      r = fast ? infix("%", kMul) : fn("tl::floormod");
      break;
    case BinaryOp::Min:
    case BinaryOp::Max:
      r = is_float ? float_min_max(n->op == BinaryOp::Max, ct, a, b, sp)
                   : fn(n->op == BinaryOp::Max ? "tl::max" : "tl::min");
      break;
    default:
      fail(ErrorKind::Internal, sp, internal_ + "unexpected operator " + binary_op_name(n->op));
  }
  if (rt.is_bool()) return convert_code(r, ct, rt, sp);
  return finish(r, rt, sp);
}

Code Emitter::emit_bitwise(const BinaryNode* n) {
  DataType t = n->dtype;
  Span sp = n->span;
  if (!t.is_integer())
    fail(ErrorKind::Internal, sp, internal_ + std::string(binary_op_name(n->op)) + " of " + t.str() + " values");
  // Operands narrower than int are promoted by C, and finish() truncates the result: & | ^
  // commute with the extension, and the low bits of ~ and of the shifts are the type's own.
  Code a = convert(n->a, t), b = convert(n->b, t);
  // Operands that are themselves binary operations get parentheses, which C does not need
  // but compilers ask for (-Wparentheses) and readers prefer.
  auto infix = [&](const char* op, int prec) { return Code{wrap(a, kUnary) + " " + op + " " + wrap(b, kUnary), prec}; };
  Code r;
  switch (n->op) {
    case BinaryOp::BitAnd:
      r = infix("&", kBitAnd);
      break;
    case BinaryOp::BitOr:
      r = infix("|", kBitOr);
      break;
    case BinaryOp::BitXor: {
      auto* ones = as<IntImmNode>(n->b);
      if (ones && ones->value == all_ones_value(t))
        r = {"~" + wrap(a, kUnary), kUnary};  // ~x is stored as x ^ all-ones
      else
        r = infix("^", kBitXor);
      break;
    }
    case BinaryOp::ShiftLeft: {
      // C++17 leaves a signed << undefined when the value is negative or its bits leave the
      // unsigned range: shift the unsigned bits (a constant 0 or 1 never does either).
      auto* one = as<IntImmNode>(n->a);
      if (t.is_int() && !(one && (one->value == 0 || one->value == 1))) {
        std::string ut = ctype(DataType::UInt(t.bits), sp);
        r = {"(" + ctype(t, sp) + ")((" + ut + ")" + wrap(a, kUnary) + " << " + wrap(b, kUnary) + ")", kUnary};
      } else {
        r = infix("<<", kShift);
      }
      break;
    }
    default:  // ShiftRight: arithmetic for signed operands on every compiler we target
      r = infix(">>", kShift);
      break;
  }
  return finish(r, t, sp);
}

Code Emitter::emit_intrinsic(const CallNode* n) {
  const std::string& op = n->op;
  Span sp = n->span;
  std::string unavailable = "intrinsic '" + op + "' is not available on target " + target_;
  const IntrinsicInfo* info = find_intrinsic(op);
  if (!info) fail(ErrorKind::Unsupported, sp, unavailable);
  if (info->arity >= 0 && int(n->args.size()) != info->arity)
    fail(ErrorKind::Internal, sp,
         internal_ + "T." + op + " called with " + std::to_string(n->args.size()) + " argument(s)");
  if (info->math) {
    DataType ct = compute_type(n->dtype);
    if (!ct.is_float()) ct = DataType::Float(32);
    std::string text = "tl::" + op + "(";
    for (size_t i = 0; i < n->args.size(); ++i) text += (i ? ", " : "") + convert(n->args[i], ct).text;
    text += ")";
    return convert_code({text}, ct, n->dtype.is_float() ? n->dtype : ct, sp);
  }
  if (is_warp_primitive(op)) return emit_warp_primitive(n);
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
  if (op == "isfinite") {
    if (!xt.is_float()) return {"true"};
    return {"tl::isfinite(" + convert(x, compute_type(xt)).text + ")"};
  }
  if (op == "popcount" || op == "clz") return {"tl::" + op + "(" + emit(x).text + ")"};

  fail(ErrorKind::Unsupported, sp, unavailable);
}

Code Emitter::emit_int64(const Expr& e) {
  DataType i64 = DataType::Int(64);
  if (auto* i = as<IntImmNode>(e)) return int64_literal(i->value);
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
      return imm ? int64_arg(imm->value) : emit_int64(x).text;
    };
    auto fn = [&](const char* name) {
      return Code{std::string(name) + "(" + arg(b->a) + ", " + arg(b->b) + ")"};
    };
    bool fast = nonneg(b->a) && divisor_is_safe(b->b);
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

// ------------------------------------------------------------------ Emitter: statements

void Emitter::emit_stmt(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::Seq:
      for (auto& x : as<SeqStmtNode>(s)->seq) emit_stmt(x);
      return;
    case StmtKind::For:
      return emit_for(as<ForNode>(s));
    case StmtKind::IfThenElse:
      return emit_if(as<IfThenElseNode>(s));
    case StmtKind::While: {
      auto* n = as<WhileNode>(s);
      line("while (" + convert(n->cond, DataType::Bool()).text + ") {");
      emit_block(n->body);
      line("}");
      return;
    }
    case StmtKind::BufferStore:
      return emit_store(as<BufferStoreNode>(s));
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
      if (auto* c = as<CallNode>(as<EvaluateNode>(s)->value); c && c->op == "loop_break") return line("break;");
      if (auto* c = as<CallNode>(as<EvaluateNode>(s)->value); c && c->op == "loop_continue") return line("continue;");
      return emit_evaluate(as<EvaluateNode>(s));
    case StmtKind::Allocate:
      return emit_allocate(as<AllocateNode>(s));
    case StmtKind::TileOp:
    case StmtKind::Kernel:
      return emit_other_stmt(s);
  }
}

void Emitter::emit_store(const BufferStoreNode* n) {
  std::string lhs = element(n->buffer, n->indices, n->span);
  Code value = convert(n->value, n->buffer->dtype);
  line(lhs + " = " + value.text + ";");
}

void Emitter::emit_block(const Stmt& body) {
  ++indent_;
  emit_stmt(body);
  --indent_;
}

void Emitter::emit_if(const IfThenElseNode* n) {
  line("if (" + convert(n->cond, DataType::Bool()).text + ") {");
  emit_block(n->then_case);
  if (n->else_case) {
    line("} else {");
    emit_block(n->else_case);
  }
  line("}");
}

void Emitter::emit_loop(const ForNode* n) {
  DataType vt = n->var->dtype;
  std::string t = ctype(vt, n->span, "loop variable '" + n->var->name + "'");
  std::string name = names_.fresh(n->var->name);
  Code mn = convert(n->min, vt);
  Code ext = convert(n->extent, vt);
  std::string bound;
  const int64_t* m = const_int(n->min);
  if (m && *m == 0) {
    bound = wrap(ext, kRel - 1);
  } else {
    // Evaluate the end once; the loop then has a canonical form (what OpenMP wants).
    std::string end = names_.fresh(name + "_end");
    line("const " + t + " " + end + " = " + wrap(mn, kAdd) + " + " + wrap(ext, kAdd - 1) + ";");
    bound = end;
  }
  loop_pragma(n);
  line("for (" + t + " " + name + " = " + mn.text + "; " + name + " < " + bound + "; ++" + name + ") {");
  bool nn = vt.is_integer() && nonneg(n->min);
  with_var(n->var, name, nn, [&] { emit_block(n->body); });
  line("}");
}

std::vector<Expr> Emitter::index_strides(const Buffer& b, const std::vector<Expr>& indices, Span span,
                                         const std::string& prefix) {
  std::vector<Expr> strides = b->effective_strides();
  if (indices.size() == 1 && strides.size() != 1) return {make_int(1)};  // an already flattened index
  if (indices.size() != strides.size())
    fail(ErrorKind::Internal, span,
         prefix + "buffer '" + b->name + "' has " + std::to_string(strides.size()) +
             " dimension(s) but is indexed with " + std::to_string(indices.size()));
  return strides;
}

bool Emitter::is_atomic_call(const CallNode* n) {
  return (n->op == "atomic_add" || n->op == "atomic_max" || n->op == "atomic_min" || n->op == "atomic_or") &&
         (n->args.size() == 2 || n->args.size() == 3);
}

int Emitter::atomic_memory_order(const CallNode* n) const {
  if (n->args.size() < 3) return 0;
  const int64_t* order = const_int(n->args[2]);
  if (!order || *order < 0 || *order > 5)
    fail(ErrorKind::Internal, n->span, internal_ + "T." + n->op + "'s memory order is not a constant from 0 to 5");
  return int(*order);
}

std::string Emitter::ordered_atomic(const std::string& call, int order) {
  if (order == 0) return call;
  std::string o = std::to_string(order);
  return "(tl::atomic_fence_before<" + o + ">(), tl::atomic_fence_after<" + o + ">(" + call + "))";
}

bool Emitter::is_warp_primitive(const std::string& op) {
  static const std::set<std::string> ops = {
      "warp_size",       "any_sync",        "all_sync",        "ballot_sync",     "activemask",
      "sync_warp",       "syncthreads_count", "syncthreads_and", "syncthreads_or", "warp_reduce_sum",
      "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand", "warp_reduce_bitor", "match_any_sync",
      "match_all_sync"};
  return ops.count(op) > 0;
}

Code Emitter::emit_warp_primitive(const CallNode* n) {
  fail(ErrorKind::Unsupported, n->span,
       "T." + n->op + " on target " + target_ + ": it needs the threads of a GPU warp or block",
       target_ == "cpu" ? "the CPU back end runs each block as one program; write the warp's or block's work "
                          "with T.Parallel and T.reduce_* instead"
                        : "");
}

std::string Emitter::atomic_load_store(const CallNode* n) {
  bool load = n->op == "atomic_load";
  size_t at = load ? 1 : 2;
  auto* elem = n->args.empty() ? nullptr : as<BufferLoadNode>(n->args[0]);
  const int64_t* order = n->args.size() == at + 1 ? const_int(n->args[at]) : nullptr;
  if (!elem || !order)
    fail(ErrorKind::Internal, n->span, internal_ + "T." + n->op + " takes a buffer element, " +
                                           (load ? "" : "a value, ") + "and its memory order");
  std::string address = "&" + element(elem->buffer, elem->indices, elem->span), o = std::to_string(*order);
  if (load) return "tl::atomic_load<" + o + ">(" + address + ")";
  return "tl::atomic_store<" + o + ">(" + address + ", " + convert(n->args[1], elem->buffer->dtype).text + ")";
}

std::string Emitter::device_assert_statement(const CallNode* n) {
  auto* text = n->args.size() == 2 ? as<StringImmNode>(n->args[1]) : nullptr;
  if (!text) fail(ErrorKind::Internal, n->span, internal_ + "device_assert takes a condition and a message");
  return "if (!(" + convert(n->args[0], DataType::Bool()).text + ")) tl::device_assert_fail(" +
         string_literal(text->value) + ");";
}

}  // namespace tl::c_like
