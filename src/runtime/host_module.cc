#include "runtime/host_module.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <link.h>
#endif

#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "ir/error.h"

namespace tl {

namespace {
std::string last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}
// The OpenMP runtime a kernel pulls in keeps worker threads alive after the parallel
// region; if closing the last kernel unloaded the runtime, those threads would run
// unmapped code. So the runtime, once loaded, is pinned for the life of the process.
void pin_openmp_runtime(void* handle) {
#if defined(__GLIBC__)
  static std::mutex mutex;
  static std::set<std::string> pinned;
  struct link_map* self = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &self) != 0 || !self) return;
  struct link_map* head = self;
  while (head->l_prev) head = head->l_prev;
  std::lock_guard<std::mutex> lock(mutex);
  for (struct link_map* lm = head; lm; lm = lm->l_next) {
    if (!lm->l_name || !*lm->l_name) continue;
    const char* base = std::strrchr(lm->l_name, '/');
    base = base ? base + 1 : lm->l_name;
    bool openmp = std::strncmp(base, "libgomp", 7) == 0 || std::strncmp(base, "libomp", 6) == 0 ||
                  std::strncmp(base, "libiomp", 7) == 0;
    if (!openmp || pinned.count(lm->l_name)) continue;
    // RTLD_NOLOAD: only takes a reference to the copy already loaded; never closed.
    if (dlopen(lm->l_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) pinned.insert(lm->l_name);
  }
#else
  (void)handle;
#endif
}

}  // namespace

HostModule::HostModule(const std::string& path) : path_(path) {
  dlerror();  // clear a stale message
#if defined(__GLIBC__)
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
  // Without a way to find the OpenMP runtime among the dependencies, keep the kernel.
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
#endif
  if (!handle_)
    fail(ErrorKind::Internal, {}, "cannot load compiled kernel '" + path + "': " + last_dl_error(),
         "delete the kernel cache (TILELANG_CACHE_DIR) if the file is damaged");
  pin_openmp_runtime(handle_);
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
