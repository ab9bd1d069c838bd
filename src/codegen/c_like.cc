#include "codegen/c_like.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

}  // namespace tl::c_like
