// Buffers: a typed, shaped view of memory in one storage scope.
#pragma once
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tl {

// Storage scopes, spelled as the DSL spells them.
namespace scope {
inline constexpr const char* kGlobal = "global";
inline constexpr const char* kShared = "shared";
inline constexpr const char* kSharedDyn = "shared.dyn";
inline constexpr const char* kFragment = "local.fragment";
inline constexpr const char* kLocal = "local";
inline constexpr const char* kLocalVar = "local.var";
}  // namespace scope

struct BufferNode {
  std::string name;
  DataType dtype;
  std::vector<Expr> shape;    // extents, constant or symbolic
  std::vector<Expr> strides;  // empty means compact row-major
  std::string scope;
  Span span;
  Var data;                   // handle variable naming the storage
  bool is_view = false;       // made by T.reshape / T.view over another buffer's data

  bool is_shared() const { return scope == scope::kShared || scope == scope::kSharedDyn; }
  bool is_fragment() const { return scope == scope::kFragment; }
  bool is_global() const { return scope == scope::kGlobal; }
  bool is_local() const { return scope == scope::kLocal || scope == scope::kLocalVar; }
  // The strides actually in force: explicit ones or those of a compact row-major layout.
  std::vector<Expr> effective_strides() const;
  // Constant element count, or -1 when some extent is symbolic.
  int64_t const_size() const;
};

Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape, std::string scope,
                   Span span = {}, std::vector<Expr> strides = {});

// A buffer over the storage of src (same data handle and scope, compact row-major): what
// T.reshape and T.view return. Passes that key on storage use `data`, never the node.
Buffer make_alias(const Buffer& src, std::string name, DataType dtype, std::vector<Expr> shape, Span span = {});
// Whether a and b name the same storage (one may be an alias of the other).
inline bool same_storage(const Buffer& a, const Buffer& b) {
  return a == b || (a && b && a->data && a->data == b->data);
}

struct Range {
  Expr min, extent;
};

// A rectangular part of a buffer, one range per dimension.
struct BufferRegion {
  Buffer buffer;
  std::vector<Range> ranges;
  Span span;
};
// The region covering all of a buffer.
BufferRegion full_region(const Buffer& b, Span span = {});

}  // namespace tl
