// A small dlopen wrapper for libraries that are optional at run time (the CUDA driver,
// NVRTC): nothing links against them, so the package loads on machines without them.
#pragma once
#include <string>
#include <vector>

namespace tl {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;

  // Tries each candidate in order (a path, or a bare name for the loader's search path)
  // with RTLD_NOW | RTLD_LOCAL; the first that loads wins. Returns whether one loaded.
  // Every failed attempt is remembered for attempts().
  bool open(const std::vector<std::string>& candidates);
  bool loaded() const { return handle_ != nullptr; }

  // The address of a symbol, or null when it is missing (or nothing is loaded).
  void* symbol(const char* name) const;
  // Sets fn to the symbol's address; returns false when it is missing.
  template <typename Fn>
  bool bind(Fn& fn, const char* name) const {
    fn = reinterpret_cast<Fn>(symbol(name));
    return fn != nullptr;
  }

  // The candidate that loaded; empty when none did.
  const std::string& path() const { return path_; }
  // "tried: a (reason); b (reason)" for the candidates that failed, for error messages.
  std::string attempts() const;

 private:
  void* handle_ = nullptr;
  std::string path_;
  std::vector<std::string> failures_;
};

// Joins each directory with each name (directories first, in order), then appends the bare
// names so that the loader's own search path (LD_LIBRARY_PATH, ld.so.cache) is tried last.
// Empty directories are skipped; duplicates are dropped.
std::vector<std::string> library_candidates(const std::vector<std::string>& dirs,
                                            const std::vector<std::string>& names);

// Roots of the CUDA toolkit to search, in order: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
// Unset variables are skipped; entries need not exist.
std::vector<std::string> cuda_toolkit_roots();

// The value of an environment variable, or "" when unset.
std::string env_or_empty(const char* name);

}  // namespace tl
