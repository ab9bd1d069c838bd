// Helpers for tests that check the compiler's errors.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ir/error.h"

namespace tl::testing {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The CompileError body throws; a test failure (and a placeholder error) when it throws none.
inline CompileError expect_compile_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const CompileError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a CompileError";
  return CompileError(ErrorKind::Internal, {}, "(no error thrown)");
}

}  // namespace tl::testing
