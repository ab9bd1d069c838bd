#include "ir/op.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/error.h"
#include "ir/intrinsics.h"

namespace tl {

namespace {
const IntrinsicInfo kIntrinsics[] = {
    {"exp", 1, true},      {"exp2", 1, true},      {"exp10", 1, true},   {"log", 1, true},
    {"log2", 1, true},     {"log10", 1, true},     {"log1p", 1, true},   {"sqrt", 1, true},
    {"rsqrt", 1, true},    {"tanh", 1, true},      {"sigmoid", 1, true}, {"sin", 1, true},
    {"cos", 1, true},      {"tan", 1, true},       {"erf", 1, true},     {"floor", 1, true},
    {"ceil", 1, true},     {"round", 1, true},     {"trunc", 1, true},   {"pow", 2, true},
    {"fmod", 2, true},     {"abs", 1, false},      {"isnan", 1, false},  {"isinf", 1, false},
    {"acos", 1, true},     {"asin", 1, true},      {"atan", 1, true},    {"sinh", 1, true},
    {"cosh", 1, true},     {"asinh", 1, true},     {"acosh", 1, true},   {"atanh", 1, true},
    {"nearbyint", 1, true}, {"atan2", 2, true},    {"copysign", 2, true}, {"hypot", 2, true},
    {"nextafter", 2, true}, {"ldexp", 2, true},    {"fma", 3, true},     {"isfinite", 1, false},
    {"popcount", 1, false}, {"clz", 1, false},  // bits set / leading zero bits of a 32- or 64-bit integer
    // Warp and block primitives of CUDA / HIP (language/warp.py): the target's warp size;
    // votes and a ballot over a lane mask; a warp barrier; block barriers with a predicate;
    // a value reduced over the warp's lanes.
    {"warp_size", 0, false},   {"any_sync", 2, false},  {"all_sync", 2, false},  {"ballot_sync", 2, false},
    {"activemask", 0, false},  {"sync_warp", 1, false}, {"syncthreads_count", 1, false},
    {"syncthreads_and", 1, false}, {"syncthreads_or", 1, false}, {"warp_reduce_sum", 1, false},
    {"warp_reduce_max", 1, false}, {"warp_reduce_min", 1, false}, {"warp_reduce_bitand", 1, false},
    {"warp_reduce_bitor", 1, false}, {"match_any_sync", 2, false}, {"match_all_sync", 2, false},
    {"thread_index", 1, false},  // index of the thread within the block, per dimension
    {"thread_range", 2, false},  // `with T.ws(...)`: whether the thread is in [lo, hi) of the block
    {"block_rank_in_cluster", 0, false},  // rank of the block in its thread-block cluster
    {"print", -1, false},        // T.print of scalars
};

bool is_literal(const Expr& e) {
  // Python literals arrive as int32 / float32 immediates without a span of their own:
  // we treat every immediate as adaptable, which is what users expect of `x + 1`.
  return e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm;
}

bool is_true_const(const Expr& e) {
  auto* v = const_int(e);
  return v && *v != 0;
}

int64_t wrap(int64_t v, DataType t) {
  if (t.is_bool()) return v != 0;
  if (t.bits >= 64) return v;
  uint64_t mask = (uint64_t(1) << t.bits) - 1;
  uint64_t u = uint64_t(v) & mask;
  if (t.is_int() && (u >> (t.bits - 1))) u |= ~mask;
  return int64_t(u);
}

int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

const char* bitwise_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::BitAnd: return "&";
    case BinaryOp::BitOr: return "|";
    case BinaryOp::BitXor: return "^";
    case BinaryOp::ShiftLeft: return "<<";
    default: return ">>";
  }
}

std::string int_text(DataType t, int64_t v) { return t.is_uint() ? std::to_string(uint64_t(v)) : std::to_string(v); }

// The bitwise operators: the logical ones on two bools, C's on integers.
Expr bitwise(BinaryOp op, Expr a, Expr b, Span span) {
  std::string sym = bitwise_symbol(op);
  for (const Expr* x : {&a, &b}) {
    DataType t = (*x)->dtype;
    if (!t.is_integer() && !t.is_bool())
      fail(ErrorKind::Type, span, "operator '" + sym + "' takes integers, got " + t.str(),
           "bitwise operators apply to integer values (T.reinterpret gives the bits of a float as an integer)");
  }
  if (a->dtype.is_bool() || b->dtype.is_bool()) {
    // A literal 0 or 1 next to a bool is a bool, as in promote().
    auto boolish = [](const Expr& x) {
      if (x->dtype.is_bool()) return true;
      auto* v = as<IntImmNode>(x);
      return v && (v->value == 0 || v->value == 1);
    };
    std::string other = (a->dtype.is_bool() ? b : a)->dtype.str();
    if (is_shift(op))
      fail(ErrorKind::Type, span, "operator '" + sym + "' takes integers, got bool",
           "cast the condition to an integer first, e.g. T.Cast(\"int32\", c)");
    if (!boolish(a) || !boolish(b))
      fail(ErrorKind::Type, span, "operator '" + sym + "' on a bool and an " + other,
           "'" + sym + "' of two conditions is logical, e.g. (a > 0) " + sym + " (b > 0), and of two integers "
           "bitwise; cast the condition to an integer (T.Cast(\"" + other + "\", c)) to combine it with one");
    a = cast(DataType::Bool(), a, span);
    b = cast(DataType::Bool(), b, span);
    BinaryOp logical = op == BinaryOp::BitAnd ? BinaryOp::And : op == BinaryOp::BitOr ? BinaryOp::Or : BinaryOp::NE;
    return binary(logical, std::move(a), std::move(b), span);
  }
  DataType t = promote(a, b);
  a = cast(t, a, span);
  b = cast(t, b, span);
  auto* ia = as<IntImmNode>(a);
  auto* ib = as<IntImmNode>(b);
  if (is_shift(op) && ib && !(ib->value >= 0 && ib->value < t.bits))
    fail(ErrorKind::Type, span,
         "shift amount " + int_text(t, ib->value) + " is out of range for " + t.str() + " (0 to " +
             std::to_string(t.bits - 1) + ")",
         "shift by less than the width of the type (cast the value to a wider type first)");
  if (ia && ib) return std::make_shared<IntImmNode>(t, *fold_bitwise(op, t, ia->value, ib->value), span);
  // Identities: x | 0, x ^ 0, x << 0, x >> 0 and x & ~0 are x; x & 0 is 0.
  int64_t ones = all_ones_value(t);
  if (ib && ib->value == 0 && op != BinaryOp::BitAnd) return a;
  if (ia && ia->value == 0 && (op == BinaryOp::BitOr || op == BinaryOp::BitXor)) return b;
  if (op == BinaryOp::BitAnd) {
    if ((ia && ia->value == 0) || (ib && ib->value == 0)) return make_int(0, t, span);
    if (ib && ib->value == ones) return a;
    if (ia && ia->value == ones) return b;
  }
  return std::make_shared<BinaryNode>(op, t, std::move(a), std::move(b), span);
}
}  // namespace

int64_t all_ones_value(DataType t) { return wrap(-1, t); }

std::optional<int64_t> fold_bitwise(BinaryOp op, DataType t, int64_t x, int64_t y) {
  uint64_t ux = uint64_t(x);
  switch (op) {
    case BinaryOp::BitAnd: return wrap(x & y, t);
    case BinaryOp::BitOr: return wrap(x | y, t);
    case BinaryOp::BitXor: return wrap(x ^ y, t);
    case BinaryOp::ShiftLeft:
    case BinaryOp::ShiftRight: {
      if (t.is_bool() || y < 0 || y >= t.bits) return std::nullopt;
      if (op == BinaryOp::ShiftLeft) return wrap(int64_t(ux << y), t);
      // Signed: arithmetic (the value is sign-extended, so shifting the int64 is exact);
      // unsigned: logical (the value is zero-extended, uint64 its bit pattern).
      if (t.is_int()) return x < 0 ? ~(~x >> y) : x >> y;
      return wrap(int64_t(ux >> y), t);
    }
    default: return std::nullopt;
  }
}

const IntrinsicInfo* find_intrinsic(const std::string& name) {
  for (auto& i : kIntrinsics)
    if (name == i.name) return &i;
  return nullptr;
}

DataType promote(const Expr& a, const Expr& b) {
  DataType ta = a->dtype, tb = b->dtype;
  if (ta == tb) return ta;
  bool la = is_literal(a), lb = is_literal(b);
  // A literal adopts the other side's type, unless it is a float literal meeting an integer.
  if (la && !lb) {
    if (!(a->kind == ExprKind::FloatImm && !tb.is_float())) return tb;
  }
  if (lb && !la) {
    if (!(b->kind == ExprKind::FloatImm && !ta.is_float())) return ta;
  }
  if (ta.is_bool()) return tb;
  if (tb.is_bool()) return ta;
  if (ta.is_float() != tb.is_float()) return ta.is_float() ? ta : tb;
  if (ta.is_float()) {
    // float16 and bfloat16 meet in float32; otherwise the wider wins.
    if (ta.bits == tb.bits) return DataType::Float(std::max<int>(32, ta.bits));
    return ta.bits > tb.bits ? ta : tb;
  }
  if (ta.bits != tb.bits) return ta.bits > tb.bits ? ta : tb;
  return ta.is_uint() ? ta : tb;
}

Expr cast(DataType t, Expr v, Span span) {
  if (v->dtype == t) return v;
  if (auto* i = as<IntImmNode>(v)) {
    if (t.is_integer() || t.is_bool()) return std::make_shared<IntImmNode>(t, wrap(i->value, t), span);
    if (t.is_float()) return std::make_shared<FloatImmNode>(t, double(i->value), span);
  }
  if (auto* f = as<FloatImmNode>(v)) {
    if (t.is_float()) return std::make_shared<FloatImmNode>(t, f->value, span);
    if ((t.is_integer() || t.is_bool()) && std::isfinite(f->value))
      return std::make_shared<IntImmNode>(t, wrap(int64_t(f->value), t), span);
  }
  return std::make_shared<CastNode>(t, std::move(v), span);
}

Expr binary(BinaryOp op, Expr a, Expr b, Span span) {
  if (a->dtype.is_handle() || b->dtype.is_handle())
    fail(ErrorKind::Type, span, std::string("operator '") + binary_op_name(op) + "' applied to a buffer",
         "index the buffer (A[i, j]) to get an element");
  if (is_bitwise(op)) return bitwise(op, std::move(a), std::move(b), span);
  DataType t;
  if (is_logical(op)) {
    t = DataType::Bool();
    a = cast(t, a, span);
    b = cast(t, b, span);
  } else {
    t = promote(a, b);
    a = cast(t, a, span);
    b = cast(t, b, span);
  }
  DataType result = is_comparison(op) || is_logical(op) ? DataType::Bool() : t;

  // Fold constants.
  auto* ia = as<IntImmNode>(a);
  auto* ib = as<IntImmNode>(b);
  if (ia && ib) {
    int64_t x = ia->value, y = ib->value, r = 0;
    bool ok = true;
    switch (op) {
      case BinaryOp::Add: r = x + y; break;
      case BinaryOp::Sub: r = x - y; break;
      case BinaryOp::Mul: r = x * y; break;
      case BinaryOp::Div: ok = y != 0; if (ok) r = x / y; break;
      case BinaryOp::Mod: ok = y != 0; if (ok) r = x % y; break;
      case BinaryOp::FloorDiv: ok = y != 0; if (ok) r = fdiv(x, y); break;
      case BinaryOp::FloorMod: ok = y != 0; if (ok) r = x - fdiv(x, y) * y; break;
      case BinaryOp::Min: r = std::min(x, y); break;
      case BinaryOp::Max: r = std::max(x, y); break;
      case BinaryOp::EQ: r = x == y; break;
      case BinaryOp::NE: r = x != y; break;
      case BinaryOp::LT: r = x < y; break;
      case BinaryOp::LE: r = x <= y; break;
      case BinaryOp::GT: r = x > y; break;
      case BinaryOp::GE: r = x >= y; break;
      case BinaryOp::And: r = x && y; break;
      case BinaryOp::Or: r = x || y; break;
      default: ok = false; break;  // the bitwise operators fold in bitwise()
    }
    if (!ok) fail(ErrorKind::Type, span, "division by zero in a constant expression");
    return std::make_shared<IntImmNode>(result, wrap(r, result), span);
  }
  auto* fa = as<FloatImmNode>(a);
  auto* fb = as<FloatImmNode>(b);
  if (fa && fb) {
    double x = fa->value, y = fb->value;
    switch (op) {
      case BinaryOp::Add: return make_float(x + y, t, span);
      case BinaryOp::Sub: return make_float(x - y, t, span);
      case BinaryOp::Mul: return make_float(x * y, t, span);
      case BinaryOp::Div: return make_float(x / y, t, span);
      // A NaN operand makes max and min NaN, as in numpy's maximum and minimum.
      case BinaryOp::Min: return make_float(std::isnan(x) ? x : std::isnan(y) ? y : std::min(x, y), t, span);
      case BinaryOp::Max: return make_float(std::isnan(x) ? x : std::isnan(y) ? y : std::max(x, y), t, span);
      case BinaryOp::EQ: return make_bool(x == y, span);
      case BinaryOp::NE: return make_bool(x != y, span);
      case BinaryOp::LT: return make_bool(x < y, span);
      case BinaryOp::LE: return make_bool(x <= y, span);
      case BinaryOp::GT: return make_bool(x > y, span);
      case BinaryOp::GE: return make_bool(x >= y, span);
      default: break;
    }
  }
  // An integer division by the constant 0 is the program's mistake (by a zero known only
  // when the kernel runs, the quotient and the remainder are 0, as in numpy).
  bool divides = op == BinaryOp::Div || op == BinaryOp::Mod || op == BinaryOp::FloorDiv || op == BinaryOp::FloorMod;
  if (t.is_integer() && divides && ib && ib->value == 0)
    fail(ErrorKind::Type, span, std::string("integer ") + (op == BinaryOp::Mod || op == BinaryOp::FloorMod ?
                                                            "remainder" : "division") + " by the constant 0",
         "divide by a nonzero value");
  // Identities that keep index arithmetic readable.
  if (t.is_integer()) {
    if (op == BinaryOp::Add && ia && ia->value == 0) return b;
    if ((op == BinaryOp::Add || op == BinaryOp::Sub) && ib && ib->value == 0) return a;
    if (op == BinaryOp::Mul && ia && ia->value == 1) return b;
    if (op == BinaryOp::Mul && ib && ib->value == 1) return a;
    if (op == BinaryOp::Mul && ((ia && ia->value == 0) || (ib && ib->value == 0)))
      return make_int(0, t, span);
    if ((op == BinaryOp::FloorDiv || op == BinaryOp::Div) && ib && ib->value == 1) return a;
  }
  if (op == BinaryOp::And) {
    if (is_true_const(a)) return b;
    if (is_true_const(b)) return a;
  }
  return std::make_shared<BinaryNode>(op, result, std::move(a), std::move(b), span);
}

Expr bitwise_not(Expr a, Span span) {
  DataType t = a->dtype;
  if (t.is_bool()) return logical_not(std::move(a), span);
  if (t.is_handle())
    fail(ErrorKind::Type, span, "operator '~' applied to a buffer", "index the buffer (A[i, j]) to get an element");
  if (!t.is_integer())
    fail(ErrorKind::Type, span, "operator '~' takes integers, got " + t.str(),
         "bitwise operators apply to integer values (T.reinterpret gives the bits of a float as an integer)");
  return binary(BinaryOp::BitXor, std::move(a), make_int(all_ones_value(t), t, span), span);
}

Expr logical_not(Expr a, Span span) {
  if (auto* v = const_int(a)) return make_bool(*v == 0, span);
  return std::make_shared<NotNode>(cast(DataType::Bool(), std::move(a), span), span);
}

Expr neg(Expr a, Span span) {
  if (auto* f = as<FloatImmNode>(a)) return make_float(-f->value, a->dtype, span);
  Expr zero = cast(a->dtype, make_int(0), span);
  return binary(BinaryOp::Sub, zero, std::move(a), span);
}

Expr select(Expr cond, Expr t, Expr f, Span span) {
  DataType ty = promote(t, f);
  t = cast(ty, t, span);
  f = cast(ty, f, span);
  if (auto* c = const_int(cond)) return *c ? t : f;
  return std::make_shared<SelectNode>(cast(DataType::Bool(), std::move(cond), span), t, f, span);
}

Expr call(const std::string& op, std::vector<Expr> args, Span span) {
  // The bitwise operations by their upstream names are operators of the IR, not calls.
  static const std::pair<const char*, BinaryOp> kBitwise[] = {
      {"bitwise_and", BinaryOp::BitAnd}, {"bitwise_or", BinaryOp::BitOr}, {"bitwise_xor", BinaryOp::BitXor},
      {"shift_left", BinaryOp::ShiftLeft}, {"shift_right", BinaryOp::ShiftRight}};
  for (auto& [name, bop] : kBitwise) {
    if (op != name) continue;
    if (args.size() != 2)
      fail(ErrorKind::Type, span, "T." + op + " takes 2 argument(s), got " + std::to_string(args.size()));
    return binary(bop, args[0], args[1], span);
  }
  if (op == "bitwise_not") {
    if (args.size() != 1)
      fail(ErrorKind::Type, span, "T.bitwise_not takes 1 argument(s), got " + std::to_string(args.size()));
    return bitwise_not(args[0], span);
  }
  const IntrinsicInfo* info = find_intrinsic(op);
  if (!info) fail(ErrorKind::Name, span, "unknown intrinsic '" + op + "'");
  if (info->arity >= 0 && int(args.size()) != info->arity)
    fail(ErrorKind::Type, span,
         "T." + op + " takes " + std::to_string(info->arity) + " argument(s), got " +
             std::to_string(args.size()));
  DataType t = args.empty() ? DataType::Int(32) : args[0]->dtype;
  if (info->math) {
    for (auto& a : args) {
      if (a->dtype.is_float() && !is_literal(a)) t = a->dtype;
    }
    if (!t.is_float()) t = DataType::Float(32);
    for (auto& a : args) a = cast(t, a, span);
  }
  if (op == "isnan" || op == "isinf" || op == "isfinite" || op == "thread_range") t = DataType::Bool();
  if (op == "warp_size" || op == "any_sync" || op == "all_sync" || op.rfind("syncthreads_", 0) == 0)
    t = DataType::Int(32);
  if (op == "ballot_sync" || op == "activemask") t = DataType::UInt(64);
  if (op == "match_any_sync" || op == "match_all_sync") t = DataType::UInt(32);
  if (op == "sync_warp") t = DataType::Void();
  if ((op == "warp_reduce_bitand" || op == "warp_reduce_bitor") && !(t.is_int() || t.is_uint()))
    fail(ErrorKind::Type, span, "T." + op + " takes an integer value, got " + t.str());
  if (op == "popcount" || op == "clz") {
    if (!(t.is_int() || t.is_uint()) || (t.bits != 32 && t.bits != 64))
      fail(ErrorKind::Type, span, "T." + op + " takes a 32- or 64-bit integer, got " + t.str(),
           "cast the value first, e.g. T." + op + "(T.Cast(\"int32\", x))");
    t = DataType::Int(32);
  }
  if (op == "print") t = DataType::Void();
  return std::make_shared<CallNode>(t, op, std::move(args), span);
}

Expr max_value(DataType t, Span span) {
  if (t.is_int()) return make_int(t.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (t.bits - 1)) - 1, t, span);
  if (t.is_uint()) return make_int(t.bits >= 64 ? -1 : int64_t((uint64_t(1) << t.bits) - 1), t, span);
  if (t.is_bool()) return make_bool(true, span);
  switch (t.code) {
    case TypeCode::Float:
      return make_float(t.bits == 16 ? 65504.0 : t.bits == 32 ? double(std::numeric_limits<float>::max())
                                                              : std::numeric_limits<double>::max(), t, span);
    case TypeCode::BFloat: return make_float(3.3895313892515355e38, t, span);
    case TypeCode::Float8E4M3: return make_float(448.0, t, span);
    case TypeCode::Float8E5M2: return make_float(57344.0, t, span);
    case TypeCode::Float4E2M1: return make_float(6.0, t, span);
    default: break;
  }
  fail(ErrorKind::Type, span, "no maximum value for dtype " + t.str());
}

Expr min_value(DataType t, Span span) {
  if (t.is_int()) return make_int(t.bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (t.bits - 1)), t, span);
  if (t.is_uint() || t.is_bool()) return cast(t, make_int(0), span);
  Expr highest = max_value(t, span);
  return make_float(-as<FloatImmNode>(highest)->value, t, span);
}

Expr infinity(DataType t, Span span) {
  if (!t.is_float()) fail(ErrorKind::Type, span, "T.infinity needs a float dtype, got " + t.str());
  return make_float(std::numeric_limits<double>::infinity(), t, span);
}

}  // namespace tl
