#include "runtime/cuda/dynlib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace tl {

DynamicLibrary::~DynamicLibrary() {
  if (handle_) dlclose(handle_);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      failures_(std::move(other.failures_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    failures_ = std::move(other.failures_);
  }
  return *this;
}

bool DynamicLibrary::open(const std::vector<std::string>& candidates) {
  if (handle_) return true;
  for (const std::string& candidate : candidates) {
    // A missing path is common (most candidates are guesses): say so briefly instead of
    // repeating the loader's long message.
    struct stat info;
    if (candidate.find('/') != std::string::npos && stat(candidate.c_str(), &info) != 0) {
      failures_.push_back(candidate + " (no such file)");
      continue;
    }
    dlerror();
    handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      path_ = candidate;
      return true;
    }
    const char* error = dlerror();
    failures_.push_back(candidate + " (" + (error ? error : "unknown error") + ")");
  }
  return false;
}

void* DynamicLibrary::symbol(const char* name) const {
  if (!handle_) return nullptr;
  return dlsym(handle_, name);
}

std::string DynamicLibrary::attempts() const {
  if (failures_.empty()) return "tried: nothing";
  std::string text = "tried: ";
  for (size_t i = 0; i < failures_.size(); ++i) text += (i ? "; " : "") + failures_[i];
  return text;
}

std::vector<std::string> library_candidates(const std::vector<std::string>& dirs,
                                            const std::vector<std::string>& names) {
  std::vector<std::string> out;
  auto add = [&](std::string candidate) {
    if (std::find(out.begin(), out.end(), candidate) == out.end()) out.push_back(std::move(candidate));
  };
  for (const std::string& dir : dirs) {
    if (dir.empty()) continue;
    std::string prefix = dir.back() == '/' ? dir : dir + "/";
    for (const std::string& name : names) add(prefix + name);
  }
  for (const std::string& name : names) add(name);
  return out;
}

std::vector<std::string> cuda_toolkit_roots() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    std::string value = env_or_empty(var);
    if (!value.empty() && std::find(roots.begin(), roots.end(), value) == roots.end()) roots.push_back(value);
  }
  if (std::find(roots.begin(), roots.end(), "/usr/local/cuda") == roots.end())
    roots.push_back("/usr/local/cuda");
  return roots;
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace tl
