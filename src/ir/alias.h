// Buffers that share storage: T.reshape / T.view make a buffer over another's data handle.
// Passes that place, order or lay out storage group buffers by their data handle with this.
#pragma once
#include <unordered_map>
#include <vector>

#include "ir/buffer.h"
#include "ir/function.h"
#include "ir/stmt.h"

namespace tl {

struct StorageAliases {
  // Every buffer met in the statement, grouped by data handle, in order of first meeting.
  std::unordered_map<const VarNode*, std::vector<Buffer>> by_storage;

  // Whether b's storage is also reached through another buffer (b may be the alias or its source).
  bool aliased(const Buffer& b) const;
  // The buffers over b's storage other than b itself.
  std::vector<Buffer> others(const Buffer& b) const;
  // Whether b is not the first buffer met over its storage (with the function's parameters
  // met first and an allocation before its uses: whether b is a T.reshape / T.view).
  bool is_alias(const Buffer& b) const;
  // Whether some buffer reads its storage as another dtype than another buffer over it.
  bool reinterprets() const;
};

StorageAliases collect_storage_aliases(const Stmt& s);
StorageAliases collect_storage_aliases(const PrimFunc& f);

}  // namespace tl
