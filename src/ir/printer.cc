// Prints IR as TileLang DSL text. The output is deterministic: it serves as the TL_PRINT_IR
// dump and as a readable cache key. Statement indentation is 4 spaces per level; the
// `indent` argument of to_string(Stmt) counts levels.
#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/op.h"
#include "ir/structural.h"

namespace tl {
namespace {

// Python operator precedence, loosest first. A printed operand whose precedence is below
// what its position needs gets parentheses.
enum Prec : int {
  kPrecOr = 1,
  kPrecAnd = 2,
  kPrecNot = 3,
  kPrecCompare = 4,
  kPrecBitOr = 5,
  kPrecBitXor = 6,
  kPrecBitAnd = 7,
  kPrecShift = 8,
  kPrecAdd = 9,
  kPrecMul = 10,
  kPrecUnary = 11,
  kPrecAtom = 13,
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

// Shortest decimal text that reads back as exactly v; always looks like a float literal.
std::string format_double(double v) {
  if (std::isnan(v)) return "float(\"nan\")";
  if (std::isinf(v)) return v > 0 ? "float(\"inf\")" : "-float(\"inf\")";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

bool is_zero_const(const Expr& e) {
  if (auto* i = as<IntImmNode>(e)) return i->value == 0 && !e->dtype.is_bool();
  if (auto* f = as<FloatImmNode>(e)) return f->value == 0.0 && !std::signbit(f->value);
  return false;
}

const int64_t* attr_int(const Attrs& attrs, const std::string& key) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return nullptr;
  return std::get_if<int64_t>(&it->second);
}

// Collects the variables an expression or statement refers to.
class VarUseCollector : public IRVisitor {
 public:
  std::unordered_set<const VarNode*> used;

 protected:
  void visit_var(const VarNode* v) override { used.insert(v); }
};

struct Text {
  std::string s;
  int prec;
};

class Printer {
 public:
  std::string expr(const Expr& e) { return print(e).s; }

  void stmt(const Stmt& s, int level) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq: {
        auto& seq = static_cast<const SeqStmtNode*>(s.get())->seq;
        for (auto& c : seq) stmt(c, level);
        if (seq.empty()) line(level, "pass");
        return;
      }
      case StmtKind::For: return print_for(static_cast<const ForNode*>(s.get()), level);
      case StmtKind::IfThenElse: return print_if(static_cast<const IfThenElseNode*>(s.get()), level, false);
      case StmtKind::While: {
        auto* w = static_cast<const WhileNode*>(s.get());
        line(level, "while " + expr(w->cond) + ":");
        return block(w->body, level + 1);
      }
      case StmtKind::BufferStore: {
        auto* n = static_cast<const BufferStoreNode*>(s.get());
        std::string target = subscript(n->buffer, n->indices);
        return line(level, target + " = " + expr(n->value));
      }
      case StmtKind::LetStmt: {
        auto* n = static_cast<const LetStmtNode*>(s.get());
        std::string value = expr(n->value);
        line(level, var_name(n->var.get()) + " = " + value);
        return body_or_nothing(n->body, level);
      }
      case StmtKind::Evaluate: {
        auto* n = static_cast<const EvaluateNode*>(s.get());
        if (n->value && n->value->kind == ExprKind::Call) return line(level, expr(n->value));
        return line(level, "T.evaluate(" + expr(n->value) + ")");
      }
      case StmtKind::Allocate: return print_allocate(static_cast<const AllocateNode*>(s.get()), level);
      case StmtKind::TileOp: return line(level, tile_op(static_cast<const TileOpNode*>(s.get())));
      case StmtKind::Kernel: return print_kernel(static_cast<const KernelNode*>(s.get()), level);
    }
  }

  void func(const PrimFuncNode& f) {
    // The lowering report is read through JITKernel.get_lowering_report(), not printed.
    Attrs shown = f.attrs;
    shown.erase("lowering_report");
    if (!shown.empty()) out_ += "# attrs: " + attrs_dict(shown) + "\n";
    out_ += "@T.prim_func\n";
    std::string header = "def " + (f.name.empty() ? std::string("main") : f.name) + "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (i) header += ", ";
      header += param(f.params[i]);
    }
    header += "):";
    line(0, header);
    if (!f.body) {
      line(1, "pass");
    } else {
      stmt(f.body, 1);
    }
  }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::unordered_map<const void*, std::string> names_;
  std::unordered_set<std::string> used_names_;
  std::unordered_map<const void*, const BufferNode*> owners_;  // data handle -> the buffer that named it
  static bool same_exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!structural_equal(a[i], b[i])) return false;
    return true;
  }

  void line(int level, const std::string& text) {
    out_.append(size_t(level) * 4, ' ');
    out_ += text;
    out_ += '\n';
  }

  void body_or_nothing(const Stmt& body, int level) {
    if (body) stmt(body, level);
  }

  void block(const Stmt& body, int level) {
    if (!body) {
      line(level, "pass");
    } else {
      stmt(body, level);
    }
  }

  // ---------------------------------------------------------------- names

  // The first object to claim a name keeps it; later ones get _1, _2, ... so that the text
  // identifies every variable and buffer uniquely.
  const std::string& name_for(const void* key, const std::string& hint) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string base = hint.empty() ? "v" : hint;
    std::string name = base;
    for (int k = 1; used_names_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_names_.insert(name);
    return names_.emplace(key, name).first->second;
  }

  std::string var_name(const VarNode* v) { return name_for(v, v->name); }

  std::string buffer_name(const BufferNode* b) {
    auto it = names_.find(b);
    if (it != names_.end()) return it->second;
    std::string name;
    // A buffer and its data handle share one printed name; another buffer over the same
    // handle is a T.reshape / T.view of the first, printed as that call.
    if (b->data && names_.count(b->data.get())) {
      name = names_[b->data.get()];
      auto owner = owners_.find(b->data.get());
      if (owner != owners_.end() && owner->second != b &&
          (owner->second->dtype != b->dtype || !same_exprs(owner->second->shape, b->shape))) {
        std::string shape;
        for (size_t i = 0; i < b->shape.size(); ++i) shape += (i ? ", " : "") + print(b->shape[i]).s;
        if (b->shape.size() == 1) shape += ",";
        name = "T.view(" + name + ", (" + shape + "), " + quote(b->dtype.str()) + ")";
      }
      names_.emplace(b, name);
    } else {
      name = name_for(b, b->name);
      if (b->data) names_.emplace(b->data.get(), name);
      if (b->data) owners_.emplace(b->data.get(), b);
    }
    return name;
  }

  // ---------------------------------------------------------------- expressions

  std::string operand(const Expr& e, int min_prec) {
    Text t = print(e);
    if (t.prec < min_prec) return "(" + t.s + ")";
    return t.s;
  }

  std::string args(const std::vector<Expr>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      s += expr(v[i]);
    }
    return s;
  }

  static std::string dtype_fn(DataType t) { return "T." + t.str(); }

  Text int_imm(const IntImmNode* n) {
    if (n->dtype.is_bool()) return {n->value ? "True" : "False", kPrecAtom};
    std::string digits = n->dtype.is_uint() ? std::to_string(uint64_t(n->value)) : std::to_string(n->value);
    if (n->dtype == DataType::Int(32)) return {digits, n->value < 0 ? kPrecUnary : kPrecAtom};
    return {dtype_fn(n->dtype) + "(" + digits + ")", kPrecAtom};
  }

  Text float_imm(const FloatImmNode* n) {
    std::string dt = quote(n->dtype.str());
    if (std::isinf(n->value)) {
      std::string inf = "T.infinity(" + dt + ")";
      return n->value > 0 ? Text{inf, kPrecAtom} : Text{"-" + inf, kPrecUnary};
    }
    if (std::isnan(n->value)) return {dtype_fn(n->dtype) + "(\"nan\")", kPrecAtom};
    std::string digits = format_double(n->value);
    if (n->dtype == DataType::Float(32)) return {digits, digits[0] == '-' ? kPrecUnary : kPrecAtom};
    return {dtype_fn(n->dtype) + "(" + digits + ")", kPrecAtom};
  }

  Text infix(const BinaryNode* n, const char* op, int prec, bool chains = false) {
    // Python chains comparisons (a < b < c), so neither side of one may be a bare comparison.
    std::string lhs = operand(n->a, chains ? prec + 1 : prec);
    std::string rhs = operand(n->b, prec + 1);
    return {lhs + " " + op + " " + rhs, prec};
  }

  Text call_form(const std::string& fn, const std::vector<Expr>& v) {
    return {fn + "(" + args(v) + ")", kPrecAtom};
  }

  Text binary(const BinaryNode* n) {
    switch (n->op) {
      case BinaryOp::Add: return infix(n, "+", kPrecAdd);
      case BinaryOp::Sub:
        if (is_zero_const(n->a) && n->a->dtype == n->dtype) {
          // 0 - x is how the DSL's unary minus is built.
          std::string x = operand(n->b, kPrecUnary);
          if (x[0] == '-') x = "(" + x + ")";
          return {"-" + x, kPrecUnary};
        }
        return infix(n, "-", kPrecAdd);
      case BinaryOp::Mul: return infix(n, "*", kPrecMul);
      case BinaryOp::Div:
        if (n->dtype.is_float()) return infix(n, "/", kPrecMul);
        return call_form("T.truncdiv", {n->a, n->b});
      case BinaryOp::Mod: return call_form("T.truncmod", {n->a, n->b});
      case BinaryOp::FloorDiv: return infix(n, "//", kPrecMul);
      case BinaryOp::FloorMod: return infix(n, "%", kPrecMul);
      case BinaryOp::Min: return call_form("T.min", {n->a, n->b});
      case BinaryOp::Max: return call_form("T.max", {n->a, n->b});
      case BinaryOp::EQ: return infix(n, "==", kPrecCompare, true);
      case BinaryOp::NE: return infix(n, "!=", kPrecCompare, true);
      case BinaryOp::LT: return infix(n, "<", kPrecCompare, true);
      case BinaryOp::LE: return infix(n, "<=", kPrecCompare, true);
      case BinaryOp::GT: return infix(n, ">", kPrecCompare, true);
      case BinaryOp::GE: return infix(n, ">=", kPrecCompare, true);
      case BinaryOp::And: return infix(n, "and", kPrecAnd);
      case BinaryOp::Or: return infix(n, "or", kPrecOr);
      case BinaryOp::BitAnd: return infix(n, "&", kPrecBitAnd);
      case BinaryOp::BitOr: return infix(n, "|", kPrecBitOr);
      case BinaryOp::BitXor: {
        // ~x is stored as x ^ all-ones.
        auto* ones = as<IntImmNode>(n->b);
        if (ones && n->dtype.is_integer() && ones->dtype == n->dtype && ones->value == all_ones_value(n->dtype))
          return {"~" + operand(n->a, kPrecUnary), kPrecUnary};
        return infix(n, "^", kPrecBitXor);
      }
      case BinaryOp::ShiftLeft: return infix(n, "<<", kPrecShift);
      case BinaryOp::ShiftRight: return infix(n, ">>", kPrecShift);
    }
    return {"?", kPrecAtom};
  }

  Text call(const CallNode* n) {
    // T.print(x, msg="...") is stored as print(StringImm(msg), x).
    if (n->op == "print" && n->args.size() == 2 && n->args[0]->kind == ExprKind::StringImm) {
      auto& msg = static_cast<const StringImmNode*>(n->args[0].get())->value;
      std::string s = "T.print(" + expr(n->args[1]);
      if (!msg.empty()) s += ", msg=" + quote(msg);
      return {s + ")", kPrecAtom};
    }
    return call_form("T." + n->op, n->args);
  }

  std::string subscript(const Buffer& b, const std::vector<Expr>& indices) {
    std::string s = buffer_name(b.get()) + "[";
    if (indices.empty()) s += "()";
    s += args(indices);
    return s + "]";
  }

  Text print(const Expr& e) {
    if (!e) return {"None", kPrecAtom};
    switch (e->kind) {
      case ExprKind::IntImm: return int_imm(static_cast<const IntImmNode*>(e.get()));
      case ExprKind::FloatImm: return float_imm(static_cast<const FloatImmNode*>(e.get()));
      case ExprKind::StringImm: return {quote(static_cast<const StringImmNode*>(e.get())->value), kPrecAtom};
      case ExprKind::Var: return {var_name(static_cast<const VarNode*>(e.get())), kPrecAtom};
      case ExprKind::Binary: return binary(static_cast<const BinaryNode*>(e.get()));
      case ExprKind::Not:
        return {"not " + operand(static_cast<const NotNode*>(e.get())->a, kPrecNot), kPrecNot};
      case ExprKind::Select: {
        auto* n = static_cast<const SelectNode*>(e.get());
        return call_form("T.if_then_else", {n->cond, n->true_value, n->false_value});
      }
      case ExprKind::Cast: {
        auto* n = static_cast<const CastNode*>(e.get());
        return {"T.Cast(" + quote(n->dtype.str()) + ", " + expr(n->value) + ")", kPrecAtom};
      }
      case ExprKind::BufferLoad: {
        auto* n = static_cast<const BufferLoadNode*>(e.get());
        return {subscript(n->buffer, n->indices), kPrecAtom};
      }
      case ExprKind::Call: return call(static_cast<const CallNode*>(e.get()));
    }
    return {"?", kPrecAtom};
  }

  // ---------------------------------------------------------------- attrs, shapes, regions

  std::string attr_value(const AttrValue& v) {
    if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
    if (auto* d = std::get_if<double>(&v)) return format_double(*d);
    if (auto* s = std::get_if<std::string>(&v)) return quote(*s);
    if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
      std::string s = "[";
      for (size_t i = 0; i < l->size(); ++i) s += (i ? ", " : "") + std::to_string((*l)[i]);
      return s + "]";
    }
    return expr(std::get<Expr>(v));
  }

  std::string attrs_dict(const Attrs& attrs) {
    std::string s = "{";
    bool first = true;
    for (auto& [k, v] : attrs) {
      s += (first ? "" : ", ") + quote(k) + ": " + attr_value(v);
      first = false;
    }
    return s + "}";
  }

  // ", key=value" for every attr not in `skip`, in key order.
  std::string kwargs(const Attrs& attrs, const std::vector<std::string>& skip = {}) {
    std::string s;
    for (auto& [k, v] : attrs) {
      bool skipped = false;
      for (auto& name : skip) skipped = skipped || k == name;
      if (!skipped) s += ", " + k + "=" + attr_value(v);
    }
    return s;
  }

  // The keys among `keys` whose value is an int: those a tile op prints in its own way.
  static std::vector<std::string> int_keys(const Attrs& attrs, std::vector<std::string> keys) {
    std::vector<std::string> out;
    for (auto& k : keys)
      if (attr_int(attrs, k)) out.push_back(k);
    return out;
  }

  std::string tuple(const std::vector<Expr>& v) {
    if (v.size() == 1) return "(" + expr(v[0]) + ",)";
    return "(" + args(v) + ")";
  }

  bool is_full(const BufferRegion& r) {
    if (r.ranges.size() != r.buffer->shape.size()) return false;
    for (size_t i = 0; i < r.ranges.size(); ++i) {
      if (!is_zero_const(r.ranges[i].min) || !r.ranges[i].min->dtype.is_integer()) return false;
      if (!structural_equal(r.ranges[i].extent, r.buffer->shape[i])) return false;
    }
    return true;
  }

  std::string region(const BufferRegion& r) {
    if (is_full(r)) return buffer_name(r.buffer.get());
    std::string s = buffer_name(r.buffer.get()) + "[";
    for (size_t i = 0; i < r.ranges.size(); ++i) {
      if (i) s += ", ";
      const Range& rg = r.ranges[i];
      const int64_t* ext = const_int(rg.extent);
      if (ext && *ext == 1) {
        s += expr(rg.min);
      } else {
        s += expr(rg.min) + ":" + expr(add(rg.min, rg.extent));
      }
    }
    if (r.ranges.empty()) s += "()";
    return s + "]";
  }

  // ---------------------------------------------------------------- statements

  std::string param(const Param& p) {
    if (!p.is_buffer()) return var_name(p.var.get()) + ": " + dtype_fn(p.var->dtype);
    const Buffer& b = p.buffer;
    std::string name = buffer_name(b.get());
    if (p.var && !names_.count(p.var.get())) names_.emplace(p.var.get(), name);
    std::string s = name + ": ";
    s += b->scope == scope::kGlobal || b->scope.empty() ? "T.Tensor(" : "T.Buffer(";
    s += tuple(b->shape) + ", " + quote(b->dtype.str());
    if (!b->strides.empty()) s += ", strides=" + tuple(b->strides);
    if (!(b->scope == scope::kGlobal || b->scope.empty())) s += ", scope=" + quote(b->scope);
    return s + ")";
  }

  std::string loop_head(const ForNode* n) {
    const int64_t* mn = const_int(n->min);
    bool from_zero = mn && *mn == 0;
    std::string range_args = from_zero ? expr(n->extent) : expr(n->min) + ", " + expr(add(n->min, n->extent));
    switch (n->for_kind) {
      case ForKind::Serial:
        if (from_zero && n->attrs.empty()) return "range(" + range_args + ")";
        return "T.serial(" + range_args + kwargs(n->attrs) + ")";
      case ForKind::Parallel:
        // T.Parallel takes extents only; a loop with an offset uses the plain parallel form.
        return (from_zero ? "T.Parallel(" : "T.parallel(") + range_args + kwargs(n->attrs) + ")";
      case ForKind::Unrolled: return "T.unroll(" + range_args + kwargs(n->attrs) + ")";
      case ForKind::Vectorized: return "T.vectorized(" + range_args + kwargs(n->attrs) + ")";
      case ForKind::Pipelined: {
        std::string s = "T.Pipelined(" + range_args;
        for (const char* key : {"num_stages", "order", "stage"}) {
          auto it = n->attrs.find(key);
          if (it != n->attrs.end()) s += std::string(", ") + key + "=" + attr_value(it->second);
        }
        return s + kwargs(n->attrs, {"num_stages", "order", "stage"}) + ")";
      }
    }
    return "?";
  }

  static bool mergeable_parallel(const ForNode* n) {
    const int64_t* mn = const_int(n->min);
    return n->for_kind == ForKind::Parallel && mn && *mn == 0 && n->attrs.empty();
  }

  void print_for(const ForNode* n, int level) {
    if (mergeable_parallel(n)) {
      // Perfectly nested T.Parallel loops print as one `for i, j in T.Parallel(m, n)`,
      // as long as no inner extent depends on an outer variable.
      std::vector<const ForNode*> nest{n};
      std::unordered_set<const VarNode*> outer{n->var.get()};
      while (auto* inner = as<ForNode>(nest.back()->body)) {
        if (!mergeable_parallel(inner)) break;
        VarUseCollector uses;
        uses.visit(inner->extent);
        bool depends = false;
        for (auto* v : uses.used) depends = depends || outer.count(v);
        if (depends) break;
        nest.push_back(inner);
        outer.insert(inner->var.get());
      }
      if (nest.size() > 1) {
        std::string vars, extents;
        for (size_t i = 0; i < nest.size(); ++i) vars += (i ? ", " : "") + var_name(nest[i]->var.get());
        for (size_t i = 0; i < nest.size(); ++i) extents += (i ? ", " : "") + expr(nest[i]->extent);
        line(level, "for " + vars + " in T.Parallel(" + extents + "):");
        block(nest.back()->body, level + 1);
        return;
      }
    }
    std::string var = var_name(n->var.get());
    line(level, "for " + var + " in " + loop_head(n) + ":");
    block(n->body, level + 1);
  }

  void print_if(const IfThenElseNode* n, int level, bool is_elif) {
    line(level, std::string(is_elif ? "elif " : "if ") + expr(n->cond) + ":");
    block(n->then_case, level + 1);
    if (!n->else_case) return;
    if (auto* chained = as<IfThenElseNode>(n->else_case)) return print_if(chained, level, true);
    line(level, "else:");
    block(n->else_case, level + 1);
  }

  void print_allocate(const AllocateNode* n, int level) {
    const Buffer& b = n->buffer;
    std::string name = buffer_name(b.get());
    std::string shape = tuple(b->shape), dtype = quote(b->dtype.str());
    std::string extra;
    if (!b->strides.empty()) extra += ", strides=" + tuple(b->strides);
    extra += kwargs(n->attrs, {"init"});
    std::string call;
    const int64_t* single = b->shape.size() == 1 ? const_int(b->shape[0]) : nullptr;
    if (b->scope == scope::kShared) {
      call = "T.alloc_shared(" + shape + ", " + dtype;
    } else if (b->scope == scope::kSharedDyn) {
      call = "T.alloc_shared(" + shape + ", " + dtype + ", scope=" + quote(b->scope);
    } else if (b->scope == scope::kFragment) {
      call = "T.alloc_fragment(" + shape + ", " + dtype;
    } else if (b->scope == scope::kLocal) {
      call = "T.alloc_local(" + shape + ", " + dtype;
    } else if (b->scope == scope::kLocalVar && single && *single == 1) {
      call = "T.alloc_var(" + dtype;
    } else {
      call = "T.alloc_buffer(" + shape + ", " + dtype + ", scope=" + quote(b->scope);
    }
    auto init = n->attrs.find("init");
    if (init != n->attrs.end()) call += ", init=" + attr_value(init->second);
    line(level, name + " = " + call + extra + ")");
    body_or_nothing(n->body, level);
  }

  std::string tile_op(const TileOpNode* n) {
    auto& r = n->regions;
    auto& at = n->attrs;
    if (n->op == "copy" && r.size() == 2 && n->args.empty())
      return "T.copy(" + region(r[0]) + ", " + region(r[1]) + kwargs(at) + ")";
    if (n->op == "fill" && r.size() == 1 && n->args.size() == 1) {
      if (is_zero_const(n->args[0]) && is_full(r[0]) && at.empty()) return "T.clear(" + region(r[0]) + ")";
      return "T.fill(" + region(r[0]) + ", " + expr(n->args[0]) + kwargs(at) + ")";
    }
    if (n->op == "gemm" && r.size() == 3 && n->args.empty()) {
      std::string s = "T.gemm(" + region(r[0]) + ", " + region(r[1]) + ", " + region(r[2]);
      for (const char* flag : {"transpose_A", "transpose_B", "clear_accum"}) {
        const int64_t* v = attr_int(at, flag);
        if (v && *v) s += std::string(", ") + flag + "=" + (*v == 1 ? "True" : std::to_string(*v));
      }
      if (const int64_t* p = attr_int(at, "policy"); p && *p) {
        static const char* kPolicies[] = {"Square", "FullRow", "FullCol"};
        s += ", policy=";
        s += *p > 0 && *p < 3 ? std::string("T.GemmWarpPolicy.") + kPolicies[*p] : std::to_string(*p);
      }
      if (const int64_t* k = attr_int(at, "k_pack"); k && *k != 1) s += ", k_pack=" + std::to_string(*k);
      // Attrs of another type than expected are printed as they are, never dropped.
      std::string rest;
      for (auto& [key, v] : at) {
        bool known = key == "transpose_A" || key == "transpose_B" || key == "clear_accum" ||
                     key == "policy" || key == "k_pack";
        if (!known || !std::holds_alternative<int64_t>(v)) rest += ", " + key + "=" + attr_value(v);
      }
      return s + rest + ")";
    }
    auto type = at.find("type");
    if (n->op == "reduce" && r.size() == 2 && n->args.empty() && type != at.end() &&
        std::holds_alternative<std::string>(type->second) && attr_int(at, "dim")) {
      std::string s = "T.reduce_" + std::get<std::string>(type->second) + "(" + region(r[0]) + ", " +
                      region(r[1]) + ", dim=" + std::to_string(*attr_int(at, "dim"));
      const int64_t* clear = attr_int(at, "clear");
      if (clear && *clear == 0) s += ", clear=False";
      auto skip = int_keys(at, {"dim", "clear"});
      skip.push_back("type");
      return s + kwargs(at, skip) + ")";
    }
    if (n->op == "cumsum" && r.size() == 2 && n->args.empty() && attr_int(at, "dim")) {
      std::string s =
          "T.cumsum(" + region(r[0]) + ", " + region(r[1]) + ", dim=" + std::to_string(*attr_int(at, "dim"));
      const int64_t* reverse = attr_int(at, "reverse");
      if (reverse && *reverse) s += ", reverse=True";
      return s + kwargs(at, int_keys(at, {"dim", "reverse"})) + ")";
    }
    if (n->op == "print" && r.size() == 1 && n->args.empty()) {
      std::string s = "T.print(" + region(r[0]);
      auto msg = at.find("msg");
      if (msg != at.end() &&
          !(std::holds_alternative<std::string>(msg->second) && std::get<std::string>(msg->second).empty()))
        s += ", msg=" + attr_value(msg->second);
      return s + kwargs(at, {"msg"}) + ")";
    }
    // Generic form, also used by atomic_add/max/min: T.op(regions..., args..., key=value...).
    std::string s = "T." + n->op + "(";
    bool first = true;
    for (auto& rg : r) {
      s += (first ? "" : ", ") + region(rg);
      first = false;
    }
    for (auto& a : n->args) {
      s += (first ? "" : ", ") + expr(a);
      first = false;
    }
    std::string kw = kwargs(at);
    if (first && !kw.empty()) kw = kw.substr(2);
    return s + kw + ")";
  }

  void print_kernel(const KernelNode* n, int level) {
    std::string s = "with T.Kernel(" + args(n->grid);
    if (!n->threads.empty()) {
      s += n->grid.empty() ? "threads=" : ", threads=";
      if (n->threads.size() == 1) {
        s += std::to_string(n->threads[0]);
      } else {
        s += "(";
        for (size_t i = 0; i < n->threads.size(); ++i) s += (i ? ", " : "") + std::to_string(n->threads[i]);
        s += ")";
      }
    }
    if (!n->cluster.empty())
      s += ", cluster_dims=(" + std::to_string(n->cluster[0]) + ", " + std::to_string(n->cluster[1]) + ", " +
           std::to_string(n->cluster[2]) + ")";
    s += ")";
    if (n->block_vars.size() == 1) {
      s += " as " + var_name(n->block_vars[0].get());
    } else if (!n->block_vars.empty()) {
      s += " as (";
      for (size_t i = 0; i < n->block_vars.size(); ++i)
        s += (i ? ", " : "") + var_name(n->block_vars[i].get());
      s += ")";
    }
    line(level, s + ":");
    // Thread variables are reached through T.get_thread_binding; name only those in use.
    VarUseCollector uses;
    uses.visit(n->body);
    for (size_t d = 0; d < n->thread_vars.size(); ++d) {
      if (!uses.used.count(n->thread_vars[d].get())) continue;
      line(level + 1,
           var_name(n->thread_vars[d].get()) + " = T.get_thread_binding(" + std::to_string(d) + ")");
    }
    block(n->body, level + 1);
  }
};

}  // namespace

std::string to_string(const Expr& e) {
  Printer p;
  return p.expr(e);
}

std::string to_string(const Stmt& s, int indent) {
  Printer p;
  p.stmt(s, indent);
  return p.take();
}

std::string to_string(const PrimFunc& f) {
  if (!f) return "None\n";
  Printer p;
  p.func(*f);
  return p.take();
}

}  // namespace tl
