// A loaded shared object produced by the host compiler.
#pragma once
#include <cstdint>
#include <string>

namespace tl {

class HostModule {
 public:
  using EntryFn = int32_t (*)(void* const* args);

  // dlopens path (RTLD_NOW | RTLD_LOCAL); throws CompileError(Internal) with dlerror's text.
  // Note: the dynamic loader keeps one copy per path, so a file replaced at a path that is
  // still loaded is not reloaded; the kernel cache uses one path per content hash.
  explicit HostModule(const std::string& path);
  ~HostModule();
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  HostModule(HostModule&& other) noexcept;
  HostModule& operator=(HostModule&& other) noexcept;

  // The address of a symbol; throws CompileError(Internal) when it is missing.
  void* symbol(const std::string& name) const;
  // The generated entry point `extern "C" int32_t <name>(void* const* args)`.
  EntryFn entry(const std::string& name) const { return reinterpret_cast<EntryFn>(symbol(name)); }
  // Calls an entry point; returns its status (0 on success).
  int32_t call(const std::string& name, void* const* args) const { return entry(name)(args); }

  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace tl
