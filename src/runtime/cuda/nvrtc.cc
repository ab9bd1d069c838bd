#include "runtime/cuda/nvrtc.h"

#include "runtime/process.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>

#include "ir/error.h"
#include "runtime/cuda/dynlib.h"

namespace tl {
namespace {

// The few NVRTC types used here, as nvrtc.h declares them (the header is not included so
// that the build does not need the toolkit).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;

struct NvrtcApi {
  DynamicLibrary library;
  std::string error;  // why loading failed; empty when loaded

  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*) = nullptr;
};

bool is_directory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::vector<std::string> nvrtc_candidates() {
  const std::vector<std::string> names = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                          "libnvrtc.so.11.2"};
  std::vector<std::string> dirs;
  std::vector<std::string> explicit_files;
  std::string override_path = env_or_empty("TILELANG_NVRTC_PATH");
  if (!override_path.empty()) {
    if (is_directory(override_path))
      dirs.push_back(override_path);
    else
      explicit_files.push_back(override_path);
  }
  for (const std::string& root : cuda_toolkit_roots()) dirs.push_back(root + "/lib64");
  std::vector<std::string> candidates = explicit_files;
  for (std::string& c : library_candidates(dirs, names)) candidates.push_back(std::move(c));
  return candidates;
}

// Loaded once per process and never unloaded: NVRTC keeps global state, and compiled
// programs may be in flight on other threads at exit.
const NvrtcApi& nvrtc_api_state() {
  static const NvrtcApi* api = [] {
    auto* a = new NvrtcApi();
    if (!a->library.open(nvrtc_candidates())) {
      a->error = "cannot load libnvrtc; " + a->library.attempts();
      return a;
    }
    bool ok = a->library.bind(a->nvrtcGetErrorString, "nvrtcGetErrorString") &&
              a->library.bind(a->nvrtcVersion, "nvrtcVersion") &&
              a->library.bind(a->nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs") &&
              a->library.bind(a->nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs") &&
              a->library.bind(a->nvrtcCreateProgram, "nvrtcCreateProgram") &&
              a->library.bind(a->nvrtcDestroyProgram, "nvrtcDestroyProgram") &&
              a->library.bind(a->nvrtcCompileProgram, "nvrtcCompileProgram") &&
              a->library.bind(a->nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize") &&
              a->library.bind(a->nvrtcGetProgramLog, "nvrtcGetProgramLog") &&
              a->library.bind(a->nvrtcGetPTXSize, "nvrtcGetPTXSize") &&
              a->library.bind(a->nvrtcGetPTX, "nvrtcGetPTX") &&
              // nvrtcGetCUBIN appeared in CUDA 11.1; older libraries cannot produce cubins.
              a->library.bind(a->nvrtcGetCUBINSize, "nvrtcGetCUBINSize") &&
              a->library.bind(a->nvrtcGetCUBIN, "nvrtcGetCUBIN");
    if (!ok)
      a->error = "libnvrtc at '" + a->library.path() + "' lacks functions this compiler needs (CUDA >= 11.2)";
    return a;
  }();
  return *api;
}

const NvrtcApi& nvrtc_api() {
  const NvrtcApi& api = nvrtc_api_state();
  if (!api.error.empty())
    fail(ErrorKind::Unsupported, {}, api.error,
         "install the CUDA toolkit (or its NVRTC component), or point TILELANG_NVRTC_PATH or "
         "CUDA_HOME at it");
  return api;
}

std::string nvrtc_error_name(const NvrtcApi& api, nvrtcResult rc) {
  const char* text = api.nvrtcGetErrorString(rc);
  return (text ? std::string(text) : "NVRTC error") + " (" + std::to_string(rc) + ")";
}

void check_nvrtc(const NvrtcApi& api, nvrtcResult rc, const char* call) {
  if (rc != kNvrtcSuccess)
    fail(ErrorKind::Internal, {}, std::string(call) + " failed: " + nvrtc_error_name(api, rc));
}

// NVRTC's log and PTX end with a NUL that is counted in their sizes.
void strip_trailing_nuls(std::string& text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();
}

std::string join_flags(const std::vector<std::string>& flags) {
  std::string out;
  for (const std::string& f : flags) out += (out.empty() ? "" : " ") + f;
  return out;
}

class ProgramGuard {
 public:
  ProgramGuard(const NvrtcApi& api, nvrtcProgram program) : api_(api), program_(program) {}
  ~ProgramGuard() { api_.nvrtcDestroyProgram(&program_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_;
};

}  // namespace

CudaArch parse_cuda_arch(const std::string& arch) {
  std::string text = arch;
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* prefix : {"sm_", "compute_"}) {
    std::string p = prefix;
    if (text.compare(0, p.size(), p) == 0) {
      text = text.substr(p.size());
      break;
    }
  }
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string suffix = text.substr(digits);
  if (digits == 0 || digits > 4 || (suffix != "" && suffix != "a" && suffix != "f"))
    fail(ErrorKind::Unsupported, {}, "'" + arch + "' is not a CUDA architecture",
         "write it as sm_<major><minor>[a], e.g. sm_80 or sm_90a");
  CudaArch out;
  out.number = std::stoi(text.substr(0, digits));
  out.suffix = suffix;
  return out;
}

std::string cuda_arch_name(const CudaArch& arch, CudaBinaryKind kind) {
  return (kind == CudaBinaryKind::Cubin ? "sm_" : "compute_") + std::to_string(arch.number) + arch.suffix;
}

bool nvrtc_available(std::string* reason) noexcept {
  try {
    const NvrtcApi& api = nvrtc_api_state();
    if (reason) *reason = api.error;
    return api.error.empty();
  } catch (const std::exception& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

std::string nvrtc_library_path() { return nvrtc_api().library.path(); }

std::string nvrtc_version() {
  const NvrtcApi& api = nvrtc_api();
  int major = 0, minor = 0;
  check_nvrtc(api, api.nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> nvrtc_supported_archs() {
  const NvrtcApi& api = nvrtc_api();
  int count = 0;
  check_nvrtc(api, api.nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(size_t(std::max(count, 0)));
  if (count > 0) check_nvrtc(api, api.nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::vector<std::string> nvrtc_flags(const CudaCompileOptions& options) {
  CudaArch arch = parse_cuda_arch(options.arch);
  std::vector<std::string> flags;
  flags.push_back("--gpu-architecture=" + cuda_arch_name(arch, options.output));
  if (!options.cpp_standard.empty()) flags.push_back("-std=" + options.cpp_standard);
  if (options.default_device) flags.push_back("-default-device");
  if (options.fast_math) flags.push_back("--use_fast_math");
  for (const std::string& dir : options.include_dirs) flags.push_back("--include-path=" + dir);
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  return flags;
}

CompiledCuda compile_with_nvrtc(const std::string& source, const std::string& name,
                                const CudaCompileOptions& options) {
  const NvrtcApi& api = nvrtc_api();
  std::vector<std::string> flags = nvrtc_flags(options);
  CudaArch arch = parse_cuda_arch(options.arch);
  std::string version = nvrtc_version();
  std::vector<int> supported = nvrtc_supported_archs();
  if (std::find(supported.begin(), supported.end(), arch.number) == supported.end()) {
    std::string list;
    for (int a : supported) list += (list.empty() ? "" : ", ") + std::to_string(a);
    fail(ErrorKind::Unsupported, {},
         "NVRTC " + version + " cannot compile for " + cuda_arch_name(arch, options.output) +
             "; it supports: " + list,
         "use a CUDA toolkit that supports this architecture (TILELANG_NVRTC_PATH, CUDA_HOME)");
  }

  auto start = std::chrono::steady_clock::now();
  const std::string program_name = name.empty() ? "kernel.cu" : name;
  nvrtcProgram program = nullptr;
  check_nvrtc(api,
              api.nvrtcCreateProgram(&program, source.c_str(), program_name.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  ProgramGuard guard(api, program);

  std::vector<const char*> argv;
  for (const std::string& f : flags) argv.push_back(f.c_str());
  nvrtcResult compiled = api.nvrtcCompileProgram(program, int(argv.size()), argv.data());

  std::string log;
  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(program, &log_size) == kNvrtcSuccess && log_size > 1) {
    log.resize(log_size);
    if (api.nvrtcGetProgramLog(program, log.data()) != kNvrtcSuccess) log.clear();
    strip_trailing_nuls(log);
  }
  if (compiled != kNvrtcSuccess)
    fail(ErrorKind::Internal, {},
         "NVRTC " + version + " failed to compile '" + program_name +
             "': " + nvrtc_error_name(api, compiled) + "\noptions: " + join_flags(flags) + "\n" +
             first_log_lines(log, 60),
         "the log points into the generated CUDA source (kernel.get_kernel_source() shows it)");

  CompiledCuda out;
  out.kind = options.output;
  out.arch = cuda_arch_name(arch, options.output);
  size_t size = 0;
  if (options.output == CudaBinaryKind::Cubin) {
    check_nvrtc(api, api.nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
    out.binary.resize(size);
    if (size) check_nvrtc(api, api.nvrtcGetCUBIN(program, out.binary.data()), "nvrtcGetCUBIN");
  } else {
    check_nvrtc(api, api.nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize");
    out.binary.resize(size);
    if (size) check_nvrtc(api, api.nvrtcGetPTX(program, out.binary.data()), "nvrtcGetPTX");
    strip_trailing_nuls(out.binary);
  }
  if (out.binary.empty())
    fail(ErrorKind::Internal, {},
         "NVRTC produced no " + std::string(options.output == CudaBinaryKind::Cubin ? "cubin" : "PTX") +
             " for '" + program_name + "'\noptions: " + join_flags(flags));
  out.log = std::move(log);
  out.compiler = "nvrtc " + version;
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::vector<std::string> cuda_include_dirs() {
  std::vector<std::string> dirs;
  for (const std::string& root : cuda_toolkit_roots()) {
    std::string dir = root + "/include";
    if (is_directory(dir) && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

std::string first_log_lines(const std::string& log, int max_lines) { return first_lines(log, max_lines); }

}  // namespace tl
