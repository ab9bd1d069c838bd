#include "runtime/host_compiler.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "ir/error.h"
#include "runtime/process.h"

namespace tl {
namespace {

// A name in dir that no other process or thread uses: pid plus a per-process counter.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return "." + std::to_string(getpid()) + "." + std::to_string(counter++) + ".tmp";
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + unique_suffix();
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f)
      fail(ErrorKind::Internal, {}, "cannot write '" + tmp + "': " + std::strerror(errno),
           "check that the kernel cache directory is writable (TILELANG_CACHE_DIR)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(ErrorKind::Internal, {}, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
}

std::string source_path_for(const std::string& output_path) {
  const std::string ext = ".so";
  if (output_path.size() > ext.size() &&
      output_path.compare(output_path.size() - ext.size(), ext.size(), ext) == 0)
    return output_path.substr(0, output_path.size() - ext.size()) + ".cpp";
  return output_path + ".cpp";
}

}  // namespace

std::vector<std::string> host_compiler_command() {
  std::vector<std::string> cmd;
  if (const char* cxx = std::getenv("CXX")) {
    std::istringstream in(cxx);
    std::string word;
    while (in >> word) cmd.push_back(word);
  }
  if (cmd.empty()) cmd.push_back("c++");
  return cmd;
}

void compile_shared_object(const std::string& source, const std::string& output_path,
                           const std::string& include_dir, const std::vector<std::string>& extra_flags) {
  std::string source_path = source_path_for(output_path);
  write_file_atomically(source_path, source);
  // Same directory as the output, so that the final rename is atomic.
  std::string tmp_output = output_path + unique_suffix();
  std::vector<std::string> argv = host_compiler_command();
  // Value-safe extras: without errno and FP-trap semantics the compiler may vectorise
  // loops that call sqrt or convert 16-bit floats; results are unchanged.
  for (const char* flag : {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17",
                           "-fno-math-errno", "-fno-trapping-math"})
    argv.push_back(flag);
  if (source.find(kNoStrictAliasingLine) != std::string::npos) argv.push_back("-fno-strict-aliasing");
  argv.push_back("-I" + include_dir);
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  argv.push_back(source_path);
  argv.push_back("-o");
  argv.push_back(tmp_output);

  ProcessResult r = run_process(argv);
  if (!r.spawn_error.empty())
    fail(ErrorKind::Internal, {},
         "cannot run the host compiler '" + argv[0] + "': " + r.spawn_error +
             "\ncommand: " + command_line(argv),
         "install a C++ compiler with OpenMP support (g++ or clang++) or set CXX to one");
  if (r.exit_code != 0) {
    std::remove(tmp_output.c_str());
    fail(ErrorKind::Internal, {},
         "host compiler failed (exit status " + std::to_string(r.exit_code) +
             ")\ncommand: " + command_line(argv) + "\n" + first_lines(r.output, 60),
         "the generated source is kept at " + source_path);
  }
  if (std::rename(tmp_output.c_str(), output_path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp_output.c_str());
    fail(ErrorKind::Internal, {},
         "cannot move the compiled kernel to '" + output_path + "': " + std::strerror(err));
  }
}

std::string host_compiler_id() {
  static std::mutex mutex;
  static std::map<std::vector<std::string>, std::string> cache;
  std::vector<std::string> cmd = host_compiler_command();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(cmd);
  if (it != cache.end()) return it->second;
  std::vector<std::string> argv = cmd;
  argv.push_back("--version");
  ProcessResult r = run_process(argv);
  std::string id;
  if (r.spawn_error.empty() && r.exit_code == 0) id = r.output.substr(0, r.output.find('\n'));
  if (id.empty()) id = command_line(cmd) + " (version unknown)";
  cache[cmd] = id;
  return id;
}

}  // namespace tl
