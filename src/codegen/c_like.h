// Pieces shared by the code generators that emit C-like source (the CPU back end's C++ and
// CUDA C++): identifiers, operator precedence, literals.
#pragma once
#include <string>
#include <unordered_set>

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

}  // namespace tl::c_like
