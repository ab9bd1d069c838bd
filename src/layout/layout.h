// Layouts: index maps from a logical tile to physical coordinates.
//
// A Layout has a constant input shape (the logical tile), one placeholder variable per input
// dimension, and one IR expression per output dimension written over those placeholders. It
// maps every logical index x (0 <= x[d] < input_shape[d]) to physical coordinates
// (exprs[0](x), ..., exprs[r-1](x)), which are expected to lie in output_shape. The full
// definitions and guarantees of each operation are in docs/layout.md.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "arith/analyzer.h"
#include "ir/expr.h"

namespace tl {

// Values of variables for evaluate_index().
using IndexEnv = std::unordered_map<const VarNode*, int64_t>;

// Evaluates an integer index expression (constants, variables of env, + - * / % // min max,
// comparisons, logic, select, integer casts). Throws CompileError(Layout) for other nodes,
// unbound variables and division by zero.
int64_t evaluate_index(const Expr& e, const IndexEnv& env);

// Row-major linearisation of indices over shape, and its inverse, as expressions.
Expr flatten_row_major(const std::vector<Expr>& indices, const std::vector<int64_t>& shape);
std::vector<Expr> unflatten_row_major(const Expr& flat, const std::vector<int64_t>& shape);
// The same on integers.
int64_t flatten_row_major(const std::vector<int64_t>& indices, const std::vector<int64_t>& shape);
std::vector<int64_t> unflatten_row_major(int64_t flat, const std::vector<int64_t>& shape);
int64_t shape_size(const std::vector<int64_t>& shape);

// Placeholder names used by layouts: i, j, k, l for rank <= 4, i0, i1, ... beyond.
std::vector<Var> make_placeholders(size_t rank);

class Layout {
 public:
  using IndexFn = std::function<std::vector<Expr>(const std::vector<Var>& vars)>;

  // Checks (bijectivity, inverse, equivalence) enumerate the input; beyond this many
  // elements they throw CompileError(Layout) instead of running for too long.
  static constexpr int64_t kMaxEnumeration = int64_t(1) << 20;

  // fn receives the placeholders and returns the output coordinates. Without output_shape,
  // each output extent is the constant upper bound of its expression plus one.
  Layout(std::vector<int64_t> input_shape, const IndexFn& fn);
  Layout(std::vector<int64_t> input_shape, const IndexFn& fn, std::vector<int64_t> output_shape);
  // From placeholders the caller made (one per input dimension) and expressions over them.
  static Layout from_exprs(std::vector<Var> vars, std::vector<int64_t> input_shape, std::vector<Expr> exprs,
                           std::optional<std::vector<int64_t>> output_shape = std::nullopt);

  // (x0, ..., xn) -> (x0, ..., xn): the logical shape is the physical one.
  static Layout identity(const std::vector<int64_t>& shape);
  // -> [size]: offset = sum x[d] * prod(shape[d+1:]).
  static Layout row_major(const std::vector<int64_t>& shape);
  // -> [size]: offset = sum x[d] * prod(shape[:d]) (the first dimension is contiguous).
  static Layout col_major(const std::vector<int64_t>& shape);
  // -> [max offset + 1]: offset = sum x[d] * strides[d]; strides must be non-negative.
  static Layout strided(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
  // Row-major with the stride of the second-to-last dimension padded by `pad` elements (the
  // classic bank-conflict padding): -> [prod(shape[:-1]) * (shape[-1] + pad)]. Rank >= 2.
  static Layout padded_row_major(const std::vector<int64_t>& shape, int64_t pad);

  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  const std::vector<int64_t>& output_shape() const { return output_shape_; }
  const std::vector<Var>& placeholders() const { return vars_; }
  const std::vector<Expr>& exprs() const { return exprs_; }
  int64_t input_size() const { return shape_size(input_shape_); }
  int64_t output_size() const { return shape_size(output_shape_); }

  // The physical coordinates of the logical index `indices` (one expression per input
  // dimension), simplified. The overload with an analyzer uses the ranges the caller bound.
  std::vector<Expr> forward(const std::vector<Expr>& indices) const;
  std::vector<Expr> forward(const std::vector<Expr>& indices, arith::Analyzer& analyzer) const;
  // The same on constants, and its row-major linearisation over output_shape.
  std::vector<int64_t> evaluate(const std::vector<int64_t>& indices) const;
  int64_t evaluate_flat(const std::vector<int64_t>& indices) const;

  // By enumeration of the input: every output inside output_shape; no two inputs sharing an
  // output; and injective, in bounds and input_size == output_size.
  bool is_in_bounds() const;
  bool is_injective() const;
  bool is_bijective() const;

  // The layout y -> x with forward(inverse(y)) == y, from output_shape to input_shape, in
  // closed form (no tables). Supported: affine layouts (x -> sum x[d] * stride[d] with the
  // strides of a permuted mixed-radix numbering: row/col-major, transposes, tilings) and,
  // when every extent is a power of two, layouts linear over the bits (bit permutations and
  // XOR swizzles). The result is checked by enumeration. Throws CompileError(Layout) when the
  // layout is not bijective or has no closed form of these kinds.
  Layout inverse() const;

  // this o inner: x -> this(inner(x)). inner's output feeds this layout's input; when the
  // shapes differ but the sizes match, inner's output is linearised row-major and re-split
  // into this layout's input shape.
  Layout compose(const Layout& inner) const;
  // Same map seen from a reshaped input: a new index is linearised row-major and re-split
  // into the old input shape. Sizes must match.
  Layout reshape_input(const std::vector<int64_t>& shape) const;
  // Same map with the output linearised row-major and re-split into `shape`.
  Layout reshape_output(const std::vector<int64_t>& shape) const;
  Layout flatten_output() const { return reshape_output({output_size()}); }

  // Same shapes and the same expressions up to renaming of the placeholders.
  bool structural_equal(const Layout& other) const;
  // Same shapes and the same values on every input (by enumeration).
  bool same_mapping(const Layout& other) const;

  // "Layout([128, 32] -> [4096]: i * 32 + j)"; several outputs are printed as a tuple.
  std::string to_string() const;

 private:
  Layout() = default;
  void init(std::vector<Var> vars, std::vector<int64_t> input_shape, std::vector<Expr> exprs,
            std::optional<std::vector<int64_t>> output_shape);
  // Calls fn(indices) for every input index, row-major order.
  void for_each_input(const std::function<void(const std::vector<int64_t>&)>& fn) const;
  void require_enumerable(const char* what) const;

  std::vector<int64_t> input_shape_;
  std::vector<int64_t> output_shape_;
  std::vector<Var> vars_;
  std::vector<Expr> exprs_;
};

// Helpers shared by Layout and Fragment.
namespace layout_detail {
// An analyzer with each variable bound to [0, extent).
void bind_ranges(arith::Analyzer& analyzer, const std::vector<Var>& vars,
                 const std::vector<int64_t>& extents);
void check_shape(const std::vector<int64_t>& shape, const char* what);
std::string shape_str(const std::vector<int64_t>& shape);
// Substitutes vars[d] := values[d] in e.
Expr substitute_vars(const Expr& e, const std::vector<Var>& vars, const std::vector<Expr>& values);
}  // namespace layout_detail

}  // namespace tl
