// Buffers stored through a layout given by hand: T.annotate_layout({buf: T.Layout(shape, fn)}).
// The annotation is a tile operator with attribute layout = "user", attribute rank (the
// buffer's rank r), and as arguments the r placeholder index variables followed by the
// positions fn gave for them. It stays in the program until apply_user_layouts.
#pragma once
#include <unordered_map>
#include <vector>

#include "ir/function.h"
#include "ir/stmt.h"
#include "target/target.h"

namespace tl {

struct UserLayout {
  Buffer buffer;                  // the annotated buffer (staged by a pipeline: extra leading dims)
  std::vector<Var> indices;       // placeholders, one per dimension of the annotation
  std::vector<Expr> positions;    // fn(indices): the storage position, row-major over `extents`
  std::vector<Expr> extents;      // of each position: the storage seen through the layout
  int64_t vector_lanes = 1;       // runs of this many elements along the last index stay together, aligned (up to 32 bytes)
  Span span;
};

// Whether op is T.annotate_layout with a layout by hand.
bool is_user_layout(const TileOpNode& op);

// The layout an annotation gives, checked: positions bounded (their extents derived from
// +, *, // and % by constants, or from constant bounds), the storage they reach inside the
// buffer's, and for a constant shape (up to 2^22 elements) no two elements at one position.
// Errors are Layout errors at the annotation's line.
UserLayout read_user_layout(const TileOpNode& op);

// The dimension order a layout that only reorders dimensions stores in (positions are the
// indices themselves, permuted: T.Layout(shape, lambda b, l, h, d: [b, h, l, d]) gives
// {0, 2, 1, 3}), with the contiguous dimension kept last; empty for any other layout. TMA
// addresses such a tensor by a tensor map of the reordered shape.
std::vector<int> dimension_order(const UserLayout& layout);

// The buffers (keyed by storage) with a layout by hand anywhere in s.
std::unordered_map<const VarNode*, UserLayout> user_layouts_of(const Stmt& s);

// Early, on the tile program: a buffer with a layout by hand is read and written by the
// threads element by element. Its copies never become TMA copies (attribute no_tma names the
// reason); a T.gemm operand, a T.tma_copy or a T.reshape / T.view of it is refused (their
// addressing assumes the compiler's own layouts) on every target but the CPU's.
PrimFunc check_user_layouts(const PrimFunc& f, const Target& target);

// Late, on element-level code (after tile operators are lowered): every access to such a
// buffer goes to its position, through a view of the storage shaped like the positions'
// extents; the annotations are dropped. A vector access (a Vectorized loop, a cp.async)
// stays a vector only where the layout keeps its elements contiguous and aligned, else it
// becomes element accesses, reported as a slower path.
PrimFunc apply_user_layouts(const PrimFunc& f);

}  // namespace tl
