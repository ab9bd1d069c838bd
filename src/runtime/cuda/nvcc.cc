#include "runtime/cuda/nvcc.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "ir/error.h"
#include "runtime/cuda/dynlib.h"
#include "runtime/process.h"

namespace tl {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::vector<std::string> nvcc_candidates() {
  std::vector<std::string> out;
  std::string override_path = env_or_empty("TILELANG_NVCC_PATH");
  if (!override_path.empty()) out.push_back(override_path);
  for (const std::string& root : cuda_toolkit_roots()) out.push_back(root + "/bin/nvcc");
  std::istringstream path(env_or_empty("PATH"));
  std::string dir;
  while (std::getline(path, dir, ':'))
    if (!dir.empty()) out.push_back(dir + "/nvcc");
  return out;
}

// Where nvcc is, or "" with *searched set to the candidates looked at.
std::string find_nvcc(std::string* searched) {
  std::vector<std::string> candidates = nvcc_candidates();
  for (const std::string& c : candidates)
    if (is_executable_file(c)) return c;
  if (searched) {
    searched->clear();
    for (const std::string& c : candidates) *searched += (searched->empty() ? "" : ", ") + c;
  }
  return "";
}

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  *ok = bool(f) || f.eof();
  return text.str();
}

// A private directory for one compilation, removed (with its files) on scope exit.
class TempDir {
 public:
  TempDir() {
    std::string base = env_or_empty("TMPDIR");
    if (base.empty()) base = "/tmp";
    std::string pattern = base + "/tilelang_nvcc_XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!mkdtemp(buffer.data()))
      fail(ErrorKind::Internal, {},
           "cannot create a temporary directory '" + pattern + "': " + std::strerror(errno),
           "check that TMPDIR is writable");
    path_ = buffer.data();
  }
  ~TempDir() {
    if (DIR* dir = opendir(path_.c_str())) {
      while (dirent* entry = readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..") std::remove((path_ + "/" + name).c_str());
      }
      closedir(dir);
    }
    rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Keeps only a plain file name, so that a name with directories cannot escape the
// temporary directory.
std::string source_file_name(const std::string& name) {
  std::string base = name.substr(name.find_last_of('/') + 1);
  if (base.empty() || base == "." || base == "..") base = "kernel.cu";
  return base;
}

}  // namespace

bool nvcc_available(std::string* reason) noexcept {
  try {
    std::string searched;
    bool found = !find_nvcc(&searched).empty();
    if (reason) *reason = found ? "" : "nvcc not found; searched: " + searched;
    return found;
  } catch (const std::exception& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

std::string nvcc_path() {
  std::string searched;
  std::string path = find_nvcc(&searched);
  if (path.empty())
    fail(ErrorKind::Unsupported, {}, "nvcc not found; searched: " + searched,
         "install the CUDA toolkit, or point TILELANG_NVCC_PATH or CUDA_HOME at it");
  return path;
}

std::string nvcc_version() {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;  // by nvcc path
  std::string path = nvcc_path();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = versions.find(path);
  if (it != versions.end()) return it->second;
  ProcessResult r = run_process({path, "--version"}, /*search_path=*/false);
  if (!r.spawn_error.empty() || r.exit_code != 0)
    fail(ErrorKind::Internal, {},
         "'" + path + " --version' failed: " +
             (r.spawn_error.empty() ? first_log_lines(r.output, 20) : r.spawn_error));
  // The last line reads "Cuda compilation tools, release 13.0, V13.0.88".
  std::string version;
  size_t v = r.output.rfind(", V");
  if (v != std::string::npos) {
    size_t start = v + 3, end = start;
    while (end < r.output.size() &&
           (std::isdigit(static_cast<unsigned char>(r.output[end])) || r.output[end] == '.'))
      ++end;
    version = r.output.substr(start, end - start);
  }
  if (version.empty()) version = "unknown (" + path + ")";
  versions[path] = version;
  return version;
}

std::vector<std::string> nvcc_flags(const CudaCompileOptions& options) {
  CudaArch arch = parse_cuda_arch(options.arch);
  std::vector<std::string> flags;
  flags.push_back(options.output == CudaBinaryKind::Cubin ? "-cubin" : "-ptx");
  flags.push_back("-arch=" + cuda_arch_name(arch, options.output));
  if (!options.cpp_standard.empty()) flags.push_back("-std=" + options.cpp_standard);
  if (options.fast_math) flags.push_back("--use_fast_math");
  for (const std::string& dir : options.include_dirs) flags.push_back("-I" + dir);
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  return flags;
}

CompiledCuda compile_with_nvcc(const std::string& source, const std::string& name,
                               const CudaCompileOptions& options) {
  std::vector<std::string> argv = {nvcc_path()};
  std::vector<std::string> flags = nvcc_flags(options);
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string version = nvcc_version();

  auto start = std::chrono::steady_clock::now();
  TempDir dir;
  std::string file_name = source_file_name(name);
  std::string source_path = dir.path() + "/" + file_name;
  std::string output_path =
      dir.path() + "/" + (options.output == CudaBinaryKind::Cubin ? "kernel.cubin" : "kernel.ptx");
  {
    std::ofstream f(source_path, std::ios::binary | std::ios::trunc);
    f << source;
    f.close();
    if (!f) fail(ErrorKind::Internal, {}, "cannot write '" + source_path + "': " + std::strerror(errno));
  }
  argv.push_back("-o");
  argv.push_back(output_path);
  argv.push_back(source_path);

  ProcessResult r = run_process(argv, /*search_path=*/false);
  if (!r.spawn_error.empty())
    fail(ErrorKind::Internal, {}, "cannot run nvcc: " + r.spawn_error + "\ncommand: " + command_line(argv));
  if (r.exit_code != 0)
    fail(ErrorKind::Internal, {},
         "nvcc " + version + " failed to compile '" + file_name + "' (exit status " +
             std::to_string(r.exit_code) + ")\ncommand: " + command_line(argv) + "\n" +
             first_log_lines(r.output, 60),
         "the log points into the generated CUDA source (kernel.get_kernel_source() shows it)");

  CompiledCuda out;
  bool ok = false;
  out.binary = read_file(output_path, &ok);
  if (!ok || out.binary.empty())
    fail(ErrorKind::Internal, {},
         "nvcc produced no output at '" + output_path + "'\ncommand: " + command_line(argv) + "\n" +
             first_log_lines(r.output, 60));
  if (options.output == CudaBinaryKind::Ptx)
    while (!out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
  out.kind = options.output;
  out.arch = cuda_arch_name(parse_cuda_arch(options.arch), options.output);
  out.log = r.output;
  out.compiler = "nvcc " + version;
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tl
