// Pieces shared by the code generators that emit C-like source (the CPU back end's C++ and
// CUDA C++): identifiers, operator precedence, literals, and the expression and statement
// emission both targets spell alike (class Emitter).
#pragma once
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/function.h"

namespace tl::c_like {

// Operator precedence of emitted C/C++ (smaller binds tighter), for minimal parentheses.
enum Prec : int {
  kPrimary = 0,
  kUnary = 3,
  kMul = 5,
  kAdd = 6,
  kShift = 7,
  kRel = 9,
  kEq = 10,
  kBitAnd = 11,
  kBitXor = 12,
  kBitOr = 13,
  kAndAnd = 14,
  kOrOr = 15,
  kTernary = 16,
};

// An emitted expression and the precedence of its outermost operator.
struct Code {
  std::string text;
  int prec = kPrimary;
};

// c's text, parenthesised unless it binds at least as tightly as max_prec.
inline std::string wrap(const Code& c, int max_prec) {
  return c.prec <= max_prec ? c.text : "(" + c.text + ")";
}

// C++ keywords and the names standard headers and generated code rely on.
bool is_reserved_name(const std::string& s);

// Identifier characters only, not starting with a digit, no reserved underscores.
std::string sanitize(const std::string& hint);

class NameTable {
 public:
  // extra_reserved: target-specific names (e.g. CUDA's built-in variables) to avoid as well.
  explicit NameTable(const std::unordered_set<std::string>* extra_reserved = nullptr)
      : extra_(extra_reserved) {}
  // A fresh identifier derived from hint, never handed out before.
  std::string fresh(const std::string& hint);
  void reserve(const std::string& name) { used_.insert(name); }

 private:
  const std::unordered_set<std::string>* extra_;
  std::unordered_set<std::string> used_;
};

// The shortest decimal text that reads back as v (as a float when single): "1.5f", "0.1".
// v must be finite; infinities and NaNs are spelled differently by each target.
std::string finite_float_literal(double v, bool single);

// A C string literal holding s (quotes, backslashes, control characters and '?' escaped).
std::string string_literal(const std::string& s);

// ------------------------------------------------------------------ types

// The 16- and 8-bit float types: stored as such, computed in float.
bool is_storage_float(DataType t);

// The type arithmetic of dtype t is carried out in.
inline DataType compute_type(DataType t) { return is_storage_float(t) ? DataType::Float(32) : t; }

// The dtype two operands meet in when the IR left them different (hand-built IR).
DataType common_type(DataType a, DataType b);

// ------------------------------------------------------------------ the shared emitter

// Expression and statement emission common to the C-like targets. The C++ expression for
// an IR expression of dtype t has the target's C++ type of t; arithmetic on storage floats
// happens in float. A back end derives from it and supplies, through the hooks below, what
// its target spells differently: the storage float types and their conversions, integer
// and float literals, calls, buffer elements, loops and the target-only statements.
class Emitter {
 public:
  virtual ~Emitter() = default;

 protected:
  // target: the target's name in diagnostics ("cpu"); internal: the prefix of the messages
  // that report a compiler bug.
  Emitter(std::string target, std::string internal)
      : target_(std::move(target)), internal_(std::move(internal)) {}

  // ---------------------------------------------------------------- hooks
  // The C++ type of a float16, bfloat16 or float8 dtype.
  virtual std::string storage_type_name(DataType t) = 0;
  // c, an expression of C++ type `from`, as C++ type `to`.
  virtual Code convert_code(const Code& c, DataType from, DataType to, Span span) = 0;
  // Rounds a value computed in compute_type(t) back to t where they differ.
  virtual Code finish(const Code& c, DataType t, Span span) = 0;
  virtual Code emit_int(const IntImmNode* n) = 0;
  virtual Code emit_float(const FloatImmNode* n) = 0;
  virtual Code emit_call(const CallNode* n) = 0;
  // max / min of two floats of dtype t (the compute type), NaN-propagating as numpy's
  // maximum and minimum are; by default an immediately called lambda with the comparison.
  virtual Code float_min_max(bool is_max, DataType t, const Code& a, const Code& b, Span span);
  // The lvalue of an element of b (a BufferLoad, a store's destination).
  // The strides to flatten `indices` of b with: the buffer's own, or 1 for an index that is
  // already flat; a rank mismatch is an internal error (prefix starts its message).
  static std::vector<Expr> index_strides(const Buffer& b, const std::vector<Expr>& indices, Span span,
                                         const std::string& prefix);
  virtual std::string element(const Buffer& b, const std::vector<Expr>& indices, Span span) = 0;
  // An integer literal inside an int64 expression, and one passed to a tl:: helper whose
  // arguments must all be int64_t.
  virtual Code int64_literal(int64_t v) = 0;
  virtual std::string int64_arg(int64_t v) = 0;
  // Called for a variable with no name in scope, before the internal error; may fail
  // with a better message.
  virtual void unbound_var(const VarNode* v, Span span) {}
  virtual void emit_for(const ForNode* n) = 0;
  // Pragmas before the `for` line of emit_loop.
  virtual void loop_pragma(const ForNode* n) {}
  virtual void emit_store(const BufferStoreNode* n);
  virtual void emit_evaluate(const EvaluateNode* n) = 0;
  virtual void emit_allocate(const AllocateNode* n) = 0;
  // TileOp and Kernel statements.
  virtual void emit_other_stmt(const Stmt& s) = 0;

  // ---------------------------------------------------------------- output
  void line(const std::string& s);
  // Pragmas start in column 0 of their own line; keep them indented for readability.
  void pragma(const std::string& s) { line("#pragma " + s); }

  // ---------------------------------------------------------------- scopes
  // Binds v to name (and records whether it is non-negative) for the duration of fn,
  // restoring any outer binding afterwards.
  template <typename Fn>
  void with_var(const Var& v, const std::string& name, bool nonneg, Fn fn) {
    auto saved = bind(v, name, nonneg);
    fn();
    unbind(v, saved);
  }
  std::string var_name(const VarNode* v, Span span);

  // ---------------------------------------------------------------- types
  void check_dtype(DataType t, Span span, const std::string& what);
  std::string ctype(DataType t, Span span, const std::string& what = "a value");
  // T.call_extern (a call of a function the program brings, by name), T.access_ptr
  // (address_of: the address of a buffer element, plus an element offset) and
  // T.reinterpret (the bits of a value as another type of the same width): spelled alike
  // in C++ and CUDA. Sets *out and returns true for those calls.
  bool emit_extern_call(const CallNode* n, Code* out);
  // The source the program imports (T.import_source, T.Kernel(prelude=)), after the
  // includes, as given: the function's attribute "prelude".
  void emit_prelude(const PrimFuncNode& f);
  // Whether a buffer parameter may alias another (T.annotate_restrict_buffers names it in
  // the function's attribute "non_restrict", comma-separated): its pointer is then not
  // declared __restrict__.
  static bool may_alias(const PrimFuncNode& f, const std::string& param);

  // ---------------------------------------------------------------- expressions
  // e converted to the C++ type of dtype t.
  Code convert(const Expr& e, DataType t);
  Code emit(const Expr& e);
  Code emit_binary(const BinaryNode* n);
  // &, |, ^ (~), << and >> of integers.
  Code emit_bitwise(const BinaryNode* n);
  // The math intrinsics, abs, isnan and isinf (calls spelled alike on every target).
  Code emit_intrinsic(const CallNode* n);
  // An int64 rendering of an integer expression: every variable is widened before any
  // arithmetic, so products of extents cannot overflow int32.
  Code emit_int64(const Expr& e);
  // Non-negative integer expressions: division and remainder by a positive amount can
  // then use C's operators, which are cheaper than the floor forms.
  bool nonneg(const Expr& e);
  // A constant integer divisor for which C's / and % cannot trap or overflow.
  static bool divisor_is_safe(const Expr& e);

  // ---------------------------------------------------------------- atomics
  // T.atomic_add/max/min(element, value[, memory order]): whether the call has that form,
  // its memory order (0 relaxed .. 5 seq_cst, as C++ numbers them), and the back end's C++
  // call `call` between the header's fences for the order (unchanged when relaxed).
  static bool is_atomic_call(const CallNode* n);
  // T.get_lane_idx's warp size, warp votes and ballots, T.sync_warp, the block barriers
  // with a predicate and the warp reductions (language/warp.py): GPU back ends emit them
  // (tl::<op>(args) from their headers); the default rejects them.
  static bool is_warp_primitive(const std::string& op);
  virtual Code emit_warp_primitive(const CallNode* n);
  int atomic_memory_order(const CallNode* n) const;
  static std::string ordered_atomic(const std::string& call, int order);
  // T.atomic_load(element, order) / T.atomic_store(element, value, order): the header's
  // tl::atomic_load<order>(&element) / tl::atomic_store<order>(&element, value).
  std::string atomic_load_store(const CallNode* n);
  // T.device_assert(condition, message): `if (!(condition)) tl::device_assert_fail("message");`
  // (what the failure does is the header's).
  std::string device_assert_statement(const CallNode* n);

  // ---------------------------------------------------------------- statements
  void emit_stmt(const Stmt& s);
  void emit_block(const Stmt& body);
  void emit_if(const IfThenElseNode* n);
  // A counted loop `for (t v = min; v < end; ++v)`, the end evaluated once.
  void emit_loop(const ForNode* n);

  std::string target_;
  std::string internal_;
  std::ostringstream out_;
  int indent_ = 0;
  NameTable names_;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_set<const VarNode*> nonneg_;

 private:
  struct SavedVar {
    std::optional<std::string> name;
    bool nonneg = false;
  };
  SavedVar bind(const Var& v, const std::string& name, bool nonneg);
  void unbind(const Var& v, const SavedVar& saved);
};

}  // namespace tl::c_like
