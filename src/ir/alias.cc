#include "ir/alias.h"

#include "ir/functor.h"

namespace tl {

namespace {
struct Collector : IRVisitor {
  StorageAliases* out;
  using IRVisitor::visit;
  void visit_buffer(const Buffer& b) override {
    if (b && b->data) {
      auto& list = out->by_storage[b->data.get()];
      bool seen = false;
      for (auto& x : list) seen = seen || x == b;
      if (!seen) list.push_back(b);
    }
    IRVisitor::visit_buffer(b);
  }
};
}  // namespace

bool StorageAliases::aliased(const Buffer& b) const {
  if (!b || !b->data) return false;
  auto it = by_storage.find(b->data.get());
  return it != by_storage.end() && it->second.size() > 1;
}

std::vector<Buffer> StorageAliases::others(const Buffer& b) const {
  std::vector<Buffer> out;
  if (!b || !b->data) return out;
  auto it = by_storage.find(b->data.get());
  if (it == by_storage.end()) return out;
  for (auto& x : it->second)
    if (x != b) out.push_back(x);
  return out;
}

bool StorageAliases::is_alias(const Buffer& b) const {
  if (!b || !b->data) return false;
  auto it = by_storage.find(b->data.get());
  return it != by_storage.end() && !it->second.empty() && it->second.front() != b;
}

bool StorageAliases::reinterprets() const {
  for (auto& [data, list] : by_storage)
    for (auto& b : list)
      if (b->dtype != list.front()->dtype) return true;
  return false;
}

StorageAliases collect_storage_aliases(const Stmt& s) {
  StorageAliases out;
  Collector c;
  c.out = &out;
  if (s) c.visit(s);
  return out;
}

StorageAliases collect_storage_aliases(const PrimFunc& f) {
  StorageAliases out;
  Collector c;
  c.out = &out;
  for (auto& p : f->params)
    if (p.is_buffer()) c.visit_buffer(p.buffer);
  if (f->body) c.visit(f->body);
  return out;
}

}  // namespace tl
