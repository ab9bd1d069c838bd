#include "transform/pass.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ir/printer.h"

namespace tl {

PrimFunc with_body(const PrimFunc& f, Stmt body) {
  auto n = std::make_shared<PrimFuncNode>(*f);
  n->body = std::move(body);
  return n;
}

PrimFunc with_report(const PrimFunc& f, const std::vector<std::string>& lines) {
  if (lines.empty()) return f;
  auto n = std::make_shared<PrimFuncNode>(*f);
  std::string text;
  auto it = n->attrs.find("lowering_report");
  if (it != n->attrs.end() && std::holds_alternative<std::string>(it->second)) text = std::get<std::string>(it->second);
  for (auto& l : lines) text += l + "\n";
  n->attrs["lowering_report"] = text;
  return n;
}

PrimFunc run_passes(const PrimFunc& f, const std::vector<Pass>& passes) {
  const char* env = std::getenv("TL_PRINT_IR");
  bool print = env && *env && std::string(env) != "0";
  PrimFunc cur = f;
  if (print) std::fprintf(stderr, "==== %s: input ====\n%s\n", f->name.c_str(), to_string(cur).c_str());
  for (auto& p : passes) {
    auto t0 = std::chrono::steady_clock::now();
    cur = p.fn(cur);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (print)
      std::fprintf(stderr, "==== %s: after %s (%.3f ms) ====\n%s\n", f->name.c_str(), p.name.c_str(), ms,
                   to_string(cur).c_str());
  }
  return cur;
}

}  // namespace tl
