#include "runtime/host_module.h"

#include <dlfcn.h>

#include <utility>

#include "ir/error.h"

namespace tl {

namespace {
std::string last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}
}  // namespace

HostModule::HostModule(const std::string& path) : path_(path) {
  dlerror();  // clear a stale message
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_)
    fail(ErrorKind::Internal, {}, "cannot load compiled kernel '" + path + "': " + last_dl_error(),
         "delete the kernel cache (TILELANG_CACHE_DIR) if the file is damaged");
}

HostModule::~HostModule() {
  if (handle_) dlclose(handle_);
}

HostModule::HostModule(HostModule&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

HostModule& HostModule::operator=(HostModule&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void* HostModule::symbol(const std::string& name) const {
  if (!handle_) fail(ErrorKind::Internal, {}, "symbol lookup in a module that is not loaded");
  dlerror();
  void* sym = dlsym(handle_, name.c_str());
  if (!sym) {
    const char* e = dlerror();
    fail(ErrorKind::Internal, {},
         "symbol '" + name + "' not found in '" + path_ + "': " + (e ? e : "it resolves to null"));
  }
  return sym;
}

}  // namespace tl
