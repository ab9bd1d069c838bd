#include "target/target.h"

#include <algorithm>

#include <sstream>
#include <vector>

#include "ir/error.h"

namespace tl {

namespace {
const char* const kKnownTargets =
    "known targets: cpu (aliases c, llvm), cuda (cuda -arch=sm_90a), hip (hip -arch=gfx942; alias rocm), webgpu, "
    "auto";

std::string hip_arch_list() {
  std::string out;
  for (const char* const* a = Target::kHipArchs; *a; ++a) out += std::string(out.empty() ? "" : ", ") + *a;
  return out;
}

// "sm_" then digits, then at most one letter (sm_90a, sm_100f).
bool is_cuda_arch(const std::string& a) {
  if (a.rfind("sm_", 0) != 0 || a.size() < 5) return false;
  size_t i = 3;
  while (i < a.size() && a[i] >= '0' && a[i] <= '9') ++i;
  if (i < 5) return false;
  return i == a.size() || (i + 1 == a.size() && a[i] >= 'a' && a[i] <= 'z');
}
}  // namespace

// Every word of the string is understood or the string is rejected: an option that is
// misspelt or belongs to another target must not silently give a different kernel.
Target Target::parse(const std::string& s) {
  std::istringstream words(s);
  std::string k;
  words >> k;
  if (k.empty()) fail(ErrorKind::Unsupported, {}, "the target string is empty", kKnownTargets);
  std::vector<std::string> options;
  for (std::string w; words >> w;) options.push_back(w);
  auto unknown_option = [&](const std::string& w, const std::string& takes) {
    fail(ErrorKind::Unsupported, {}, "target '" + s + "': unknown option '" + w + "'",
         "target " + k + " takes " + takes);
  };
  Target t;
  if (k == "cpu" || k == "c" || k == "llvm") {
    t.kind = "cpu";
    t.arch = "host";
    if (!options.empty()) unknown_option(options[0], "no options");
    // Block indices are 32-bit; a block is one task, so the thread limits are those of CUDA.
    t.max_grid[1] = t.max_grid[2] = t.max_grid[0];
    return t;
  }
  if (k == "cuda") {
    t.kind = "cuda";
    for (const std::string& w : options) {
      if (w.rfind("-arch=", 0) != 0) unknown_option(w, "-arch=sm_XX (e.g. cuda -arch=sm_90a)");
      t.arch = w.substr(6);
      if (!is_cuda_arch(t.arch))
        fail(ErrorKind::Unsupported, {}, "target '" + s + "': '" + t.arch + "' is not a CUDA architecture",
             "write it as sm_ and the compute capability, e.g. -arch=sm_80 or -arch=sm_90a");
    }
    t.max_shared_bytes = cuda_max_shared_bytes(t.arch_number());
    return t;
  }
  if (k == "webgpu") {
    t.kind = "webgpu";
    // The WebGPU specification's default limits, and WGSL's 8 KiB of function-scope
    // variables per invocation.
    t.max_threads_per_block = 256;
    t.max_threads_per_dim[0] = t.max_threads_per_dim[1] = 256;
    t.max_grid[0] = 65535;
    t.max_shared_bytes = 16384;
    t.max_thread_array_bytes = 8192;
    for (const std::string& w : options) {
      if (w.rfind("-subgroup=", 0) != 0) unknown_option(w, "-subgroup=N (a power of two up to 128)");
      std::string n = w.substr(10);
      int v = 0;
      for (char c : n) v = (c >= '0' && c <= '9' && v < 1000) ? v * 10 + (c - '0') : -1;
      if (n.empty() || v < 1 || v > 128 || (v & (v - 1)) != 0)
        fail(ErrorKind::Unsupported, {}, "target '" + s + "': the subgroup size must be a power of two up to 128",
             "write e.g. \"webgpu -subgroup=32\", or plain \"webgpu\" for no subgroup operations");
      t.subgroup = v;
    }
    return t;
  }
  if (k == "hip" || k == "rocm") {
    // No architecture: a description only; lowering asks for one (the wavefront size, and
    // so every reduction, depends on it).
    t.kind = "hip";
    for (const std::string& w : options) {
      if (w.rfind("-arch=", 0) != 0) unknown_option(w, "-arch=gfxNNN (e.g. hip -arch=gfx942)");
      t.arch = w.substr(6);
      if (!hip_wave_size(t.arch))
        fail(ErrorKind::Unsupported, {}, "target '" + s + "': unknown AMD architecture '" + t.arch + "'",
             "known architectures: " + hip_arch_list());
    }
    // 64 KiB of LDS per workgroup; gfx950 has 160 KiB.
    t.max_shared_bytes = t.arch == "gfx950" ? 160 * 1024 : 64 * 1024;
    return t;
  }
  static const char* known_later[] = {"metal", "ascend"};
  for (auto* name : known_later) {
    if (k == name)
      fail(ErrorKind::Unsupported, {}, "target '" + s + "' is not available in this build",
           "use target=\"cpu\", \"cuda\", \"hip\" or \"webgpu\"");
  }
  fail(ErrorKind::Unsupported, {}, "unknown target '" + s + "'", kKnownTargets);
}

std::string Target::str() const {
  if (kind == "cuda" && !arch.empty()) return "cuda -arch=" + arch;
  if (kind == "hip" && !arch.empty()) return "hip -arch=" + arch;
  if (kind == "webgpu" && subgroup > 0) return "webgpu -subgroup=" + std::to_string(subgroup);
  return kind;
}

// CDNA 2 (MI200), CDNA 3 (MI300), CDNA 4 (MI350); RDNA 3 and RDNA 4.
const char* const Target::kHipArchs[] = {"gfx90a", "gfx940", "gfx942", "gfx950", "gfx1100", "gfx1201", nullptr};

int64_t Target::register_bytes(int64_t threads) const {
  if (kind == "cuda") return 255 * 4;
  if (kind != "hip" || arch.empty()) return 0;
  int64_t wave = hip_wave_size(arch);
  // A block's wavefronts are spread over the compute unit's 4 SIMDs; registers are given in
  // granules of 8.
  int64_t per_simd = std::max<int64_t>(1, ((threads + wave - 1) / wave + 3) / 4);
  bool cdna = wave == 64;
  int64_t regs = std::min<int64_t>(cdna ? 512 : 256, (cdna ? 512 : 1536) / per_simd) / 8 * 8;
  return regs * 4;
}

int Target::hip_wave_size(const std::string& arch) {
  for (const char* const* a = kHipArchs; *a; ++a)
    if (arch == *a) return arch.rfind("gfx9", 0) == 0 ? 64 : 32;
  return 0;
}

int64_t Target::cuda_max_shared_bytes(int arch) {
  switch (arch) {
    case 70:
    case 72:
      return 96 * 1024;
    case 75:
      return 64 * 1024;
    case 80:
    case 87:
      return 163 * 1024;
    case 86:
    case 89:
    case 120:
    case 121:
      return 99 * 1024;
    case 90:
    case 100:
    case 101:
    case 103:
    case 110:
      return 227 * 1024;
    default:
      return 0;
  }
}

int Target::arch_number() const {
  size_t p = arch.find('_');
  if (p == std::string::npos) return 0;
  int n = 0;
  for (size_t i = p + 1; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) n = n * 10 + (arch[i] - '0');
  return n;
}

bool Target::set_switch(const std::string& name) {
  if (name == "tl.disable_wgmma") return disable_wgmma = true;
  if (name == "tl.disable_tma_lower") return disable_tma = true;
  if (name == "tl.disable_warp_specialized") return disable_warp_specialized = true;
  if (name == "tl.enable_warpgroup_pingpong") return enable_pingpong = true;
  if (name == "tl.disable_wgmma_overlap") return disable_wgmma_overlap = true;
  if (name == "tl.disable_producer_tile_loads") return disable_producer_tile_loads = true;
  return false;
}

}  // namespace tl
