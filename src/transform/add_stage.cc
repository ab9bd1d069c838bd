#include "transform/add_stage.h"

#include "ir/op.h"

namespace tl {

Expr AddStage::mutate_load(const Expr& e, const BufferLoadNode* n) {
  Expr m = IRMutator::mutate_load(e, n);
  auto* l = as<BufferLoadNode>(m);
  auto it = staged_.find(l->buffer.get());
  if (it == staged_.end()) return m;
  std::vector<Expr> idx = {slot_};
  idx.insert(idx.end(), l->indices.begin(), l->indices.end());
  return std::make_shared<BufferLoadNode>(l->dtype, it->second, idx, l->span);
}

Stmt AddStage::mutate_store(const Stmt& s, const BufferStoreNode* n) {
  Stmt m = IRMutator::mutate_store(s, n);
  auto* st = as<BufferStoreNode>(m);
  auto it = staged_.find(st->buffer.get());
  if (it == staged_.end()) return m;
  std::vector<Expr> idx = {slot_};
  idx.insert(idx.end(), st->indices.begin(), st->indices.end());
  return std::make_shared<BufferStoreNode>(it->second, st->value, idx, st->span);
}

Stmt AddStage::mutate_tile_op(const Stmt& s, const TileOpNode* n) {
  Stmt m = IRMutator::mutate_tile_op(s, n);
  auto* t = as<TileOpNode>(m);
  std::vector<BufferRegion> regions = t->regions;
  bool changed = false;
  for (auto& r : regions) {
    auto it = staged_.find(r.buffer.get());
    if (it == staged_.end()) continue;
    r.buffer = it->second;
    r.ranges.insert(r.ranges.begin(), Range{slot_, make_int(1)});
    changed = true;
  }
  if (!changed) return m;
  return std::make_shared<TileOpNode>(t->op, regions, t->args, t->attrs, t->span);
}

}  // namespace tl
