// Multi-buffered shared tiles: accesses to a buffer that gained a leading stage dimension
// (a software pipeline's copies, producer_tile_loads' tiles) index the stage slot given.
#pragma once
#include <unordered_map>

#include "ir/functor.h"

namespace tl {

class AddStage : public IRMutator {
 public:
  // staged: each original buffer and its staged copy, shape (stages, original shape...).
  AddStage(const std::unordered_map<const BufferNode*, Buffer>& staged, Expr slot) : staged_(staged), slot_(slot) {}

 protected:
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override;
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override;
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override;

 private:
  const std::unordered_map<const BufferNode*, Buffer>& staged_;
  Expr slot_;
};

}  // namespace tl
