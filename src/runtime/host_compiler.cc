#include "runtime/host_compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
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

extern char** environ;

namespace tl {
namespace {

struct RunResult {
  int status = -1;     // exit status, or -1 when the process could not start / was killed
  std::string output;  // stdout and stderr together
  std::string spawn_error;
};

// Runs argv[0] (searched in PATH) with its output captured; no shell is involved, so
// paths and flags are passed exactly as given.
RunResult run_process(const std::vector<std::string>& argv) {
  RunResult r;
  int fds[2];
  if (pipe(fds) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.spawn_error = std::strerror(rc);
    return r;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      r.output.append(buf, size_t(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      r.spawn_error = std::string("waitpid: ") + std::strerror(errno);
      return r;
    }
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (WIFSIGNALED(status)) r.output += "\n(killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  return r;
}

// For messages only: the command as one would type it.
std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (auto& a : argv) {
    if (!s.empty()) s += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

std::string first_lines(const std::string& text, int max_lines) {
  std::istringstream in(text);
  std::string line, out;
  int n = 0, total = 0;
  while (std::getline(in, line)) {
    ++total;
    if (n < max_lines) {
      out += line + "\n";
      ++n;
    }
  }
  if (total > n) out += "... (" + std::to_string(total - n) + " more lines)\n";
  return out;
}

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
  argv.push_back("-I" + include_dir);
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  argv.push_back(source_path);
  argv.push_back("-o");
  argv.push_back(tmp_output);

  RunResult r = run_process(argv);
  if (!r.spawn_error.empty())
    fail(ErrorKind::Internal, {},
         "cannot run the host compiler '" + argv[0] + "': " + r.spawn_error +
             "\ncommand: " + command_line(argv),
         "install a C++ compiler with OpenMP support (g++ or clang++) or set CXX to one");
  if (r.status != 0) {
    std::remove(tmp_output.c_str());
    fail(ErrorKind::Internal, {},
         "host compiler failed (exit status " + std::to_string(r.status) +
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
  RunResult r = run_process(argv);
  std::string id;
  if (r.spawn_error.empty() && r.status == 0) id = r.output.substr(0, r.output.find('\n'));
  if (id.empty()) id = command_line(cmd) + " (version unknown)";
  cache[cmd] = id;
  return id;
}

}  // namespace tl
