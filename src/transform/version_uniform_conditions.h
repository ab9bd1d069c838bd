// A T.Parallel loop whose condition (a mask) holds for the whole tile in most executions
// gets a copy without it, chosen by one block-uniform test: attention's causal mask then
// costs nothing off the diagonal, a ragged-edge mask nothing off the edge.
#pragma once
#include "transform/pass.h"

namespace tl {

PrimFunc version_uniform_conditions(const PrimFunc& f);

}  // namespace tl
