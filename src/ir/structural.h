// Structural equality and hashing: two trees are equal when they have the same shape,
// the same constants and dtypes, and their variables and buffers correspond one to one
// (names of bound variables do not matter; free variables are compared by identity).
#pragma once
#include <cstdint>

#include "ir/function.h"

namespace tl {

bool structural_equal(const Expr& a, const Expr& b);
bool structural_equal(const Stmt& a, const Stmt& b);
bool structural_equal(const PrimFunc& a, const PrimFunc& b);

// Equal trees hash equally; bound variables hash by their order of definition.
uint64_t structural_hash(const Expr& e);
uint64_t structural_hash(const Stmt& s);
uint64_t structural_hash(const PrimFunc& f);

}  // namespace tl
