#include "target/target.h"

#include "ir/error.h"

namespace tl {

Target Target::parse(const std::string& s) {
  std::string k = s.substr(0, s.find(' '));
  Target t;
  if (k == "cpu" || k == "c" || k == "llvm" || k == "auto" || k.empty()) {
    t.kind = "cpu";
    t.arch = "host";
    return t;
  }
  static const char* known_later[] = {"cuda", "hip", "rocm", "webgpu", "metal", "ascend"};
  for (auto* name : known_later) {
    if (k == name)
      fail(ErrorKind::Unsupported, {}, "target '" + s + "' is not available in this build",
           "use target=\"cpu\"; the GPU back ends come in later releases");
  }
  fail(ErrorKind::Unsupported, {}, "unknown target '" + s + "'",
       "known targets: cpu (aliases c, llvm), auto");
}

}  // namespace tl
