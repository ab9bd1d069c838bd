// Drives the host C++ compiler: generated source in, shared object out.
#pragma once
#include <string>
#include <vector>

namespace tl {

// A generated source containing this line is compiled with -fno-strict-aliasing (it reads
// one array through two pointer types: a T.view with another dtype).
inline constexpr const char* kNoStrictAliasingLine = "// tl: no-strict-aliasing";

// The compiler command: $CXX (split on whitespace, e.g. "ccache g++") or "c++".
std::vector<std::string> host_compiler_command();

// Compiles source into a shared object at output_path with
//   <compiler> -O3 -march=native -fopenmp -fPIC -shared -std=c++17 -fno-math-errno
//              -fno-trapping-math -I<include_dir> <extra_flags>.
// The source is kept next to the output (output_path with ".so" replaced by ".cpp").
// The object is written under a temporary name in the same directory and renamed into
// place, so concurrent processes compiling the same kernel never see a partial file.
// Throws CompileError(Internal) with the command line and the compiler's first lines
// of output when compilation fails.
void compile_shared_object(const std::string& source, const std::string& output_path,
                           const std::string& include_dir, const std::vector<std::string>& extra_flags = {});

// A short identification of the compiler for cache keys: the first line of
// `<compiler> --version`, computed once per process.
std::string host_compiler_id();

}  // namespace tl
