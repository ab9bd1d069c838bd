// The one error type the compiler throws for problems in a user's program.
// The bindings turn it into a typed Python exception (tilelang.errors) that shows the
// user's file:line and the hint; nothing else should escape to a user.
#pragma once
#include <stdexcept>
#include <string>

#include "ir/span.h"

namespace tl {

enum class ErrorKind {
  Syntax,       // construct the DSL does not have
  Name,         // unknown name
  Type,         // dtype mismatch, wrong kind of value
  Shape,        // rank or extent mismatch
  Bounds,       // constant region outside a buffer
  Unsupported,  // valid program the chosen target cannot compile
  Layout,       // conflicting layout demands
  Internal,     // a compiler bug: reported as such
};

class CompileError : public std::runtime_error {
 public:
  CompileError(ErrorKind kind, Span span, const std::string& message, std::string hint = "")
      : std::runtime_error(message), kind_(kind), span_(span), hint_(std::move(hint)) {}
  ErrorKind kind() const { return kind_; }
  const Span& span() const { return span_; }
  const std::string& hint() const { return hint_; }

 private:
  ErrorKind kind_;
  Span span_;
  std::string hint_;
};

[[noreturn]] inline void fail(ErrorKind kind, Span span, const std::string& message,
                              const std::string& hint = "") {
  throw CompileError(kind, span, message, hint);
}

}  // namespace tl
