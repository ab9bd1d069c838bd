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
  static const char* known_later[] = {"hip", "rocm", "webgpu", "metal", "ascend"};
  for (auto* name : known_later) {
    if (k == name)
      fail(ErrorKind::Unsupported, {}, "target '" + s + "' is not available in this build",
           "use target=\"cpu\" or target=\"cuda\"");
  }
  fail(ErrorKind::Unsupported, {}, "unknown target '" + s + "'",
       "known targets: cpu (aliases c, llvm), cuda (cuda -arch=sm_90a), auto");
}

std::string Target::str() const {
  if (kind == "cuda" && !arch.empty()) return "cuda -arch=" + arch;
  return kind;
}

}  // namespace tl
