// What the compiler targets: the kind of back end plus its features and limits.
#pragma once
#include <string>

namespace tl {

struct Target {
  std::string kind = "cpu";  // "cpu" (later: "cuda", "hip", "webgpu", "metal")
  std::string arch;          // e.g. "x86-64" / "sm_90a"
  int max_threads_per_block = 1024;

  // Parses a target string: "cpu", "c", "llvm" (CPU), "auto". Throws CompileError
  // (Unsupported) for a back end this build does not have.
  static Target parse(const std::string& s);
  std::string str() const { return kind; }
};

}  // namespace tl
