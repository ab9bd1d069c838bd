#include "target/target.h"

#include <sstream>

#include "ir/error.h"

namespace tl {

Target Target::parse(const std::string& s) {
  std::istringstream words(s);
  std::string k;
  words >> k;
  Target t;
  if (k == "cpu" || k == "c" || k == "llvm" || k.empty()) {
    t.kind = "cpu";
    t.arch = "host";
    return t;
  }
  if (k == "cuda") {
    t.kind = "cuda";
    for (std::string w; words >> w;) {
      if (w.rfind("-arch=", 0) == 0) t.arch = w.substr(6);
    }
    return t;
  }
  if (k == "webgpu") {
    t.kind = "webgpu";
    for (std::string w; words >> w;) {
      if (w.rfind("-subgroup=", 0) != 0) continue;
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
  static const char* known_later[] = {"hip", "rocm", "metal", "ascend"};
  for (auto* name : known_later) {
    if (k == name)
      fail(ErrorKind::Unsupported, {}, "target '" + s + "' is not available in this build",
           "use target=\"cpu\", \"cuda\" or \"webgpu\"");
  }
  fail(ErrorKind::Unsupported, {}, "unknown target '" + s + "'",
       "known targets: cpu (aliases c, llvm), cuda (cuda -arch=sm_90a), webgpu, auto");
}

std::string Target::str() const {
  if (kind == "cuda" && !arch.empty()) return "cuda -arch=" + arch;
  if (kind == "webgpu" && subgroup > 0) return "webgpu -subgroup=" + std::to_string(subgroup);
  return kind;
}

int Target::arch_number() const {
  size_t p = arch.find('_');
  if (p == std::string::npos) return 0;
  int n = 0;
  for (size_t i = p + 1; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) n = n * 10 + (arch[i] - '0');
  return n;
}

}  // namespace tl
