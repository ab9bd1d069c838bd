// The table of tile operators: each entry is defined next to its checks and lowering.
#include <vector>

#include "op/op.h"
#include "op/region.h"

namespace tl {

const TileOpDef* find_tile_op(const std::string& name) {
  // Built on first use so the definitions' own statics are ready.
  static const std::vector<const TileOpDef*> table = {
      &copy_op(),       &fill_op(),       &gemm_op(),       &reduce_op(), &finalize_reducer_op(), &cumsum_op(),
      &atomic_add_op(), &atomic_max_op(), &atomic_min_op(), &print_op(),
      &annotate_layout_op(),
  };
  for (const TileOpDef* def : table)
    if (name == def->name) return def;
  return nullptr;
}

}  // namespace tl
