#include "layout/layout.h"

#include <set>

#include "arith/int_math.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/structural.h"

namespace tl {

namespace {

[[noreturn]] void layout_error(const std::string& message) { fail(ErrorKind::Layout, Span{}, message); }

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int log2_exact(int64_t v) {
  int k = 0;
  while ((int64_t(1) << k) < v) ++k;
  return k;
}

int64_t eval_binary(BinaryOp op, DataType t, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
    case BinaryOp::Mod:
    case BinaryOp::FloorDiv:
    case BinaryOp::FloorMod:
      if (b == 0) layout_error("division by zero while evaluating a layout expression");
      if (op == BinaryOp::Div) return a / b;
      if (op == BinaryOp::Mod) return a % b;
      if (op == BinaryOp::FloorDiv) return arith::floordiv_int(a, b);
      return arith::floormod_int(a, b);
    case BinaryOp::Min:
      return a < b ? a : b;
    case BinaryOp::Max:
      return a > b ? a : b;
    case BinaryOp::EQ:
      return a == b;
    case BinaryOp::NE:
      return a != b;
    case BinaryOp::LT:
      return a < b;
    case BinaryOp::LE:
      return a <= b;
    case BinaryOp::GT:
      return a > b;
    case BinaryOp::GE:
      return a >= b;
    case BinaryOp::And:
      return a && b;
    case BinaryOp::Or:
      return a || b;
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr:
    case BinaryOp::BitXor:
    case BinaryOp::ShiftLeft:
    case BinaryOp::ShiftRight: {
      // C's semantics on the operands' type (>> of a negative value is arithmetic).
      std::optional<int64_t> r = fold_bitwise(op, t, arith::wrap_to(t, a), arith::wrap_to(t, b));
      if (!r)
        layout_error("shift amount " + std::to_string(b) + " is out of range for " + t.str() +
                     " while evaluating a layout expression");
      return *r;
    }
  }
  return 0;
}

}  // namespace

int64_t evaluate_index(const Expr& e, const IndexEnv& env) {
  switch (e->kind) {
    case ExprKind::IntImm:
      return static_cast<const IntImmNode*>(e.get())->value;
    case ExprKind::Var: {
      auto it = env.find(static_cast<const VarNode*>(e.get()));
      if (it == env.end())
        layout_error("layout expression refers to variable '" + static_cast<const VarNode*>(e.get())->name +
                     "' that is not one of its placeholders");
      return it->second;
    }
    case ExprKind::Binary: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      int64_t a = evaluate_index(n->a, env);
      // Short-circuit like the generated code would.
      if (n->op == BinaryOp::And && !a) return 0;
      if (n->op == BinaryOp::Or && a) return 1;
      return arith::wrap_to(e->dtype, eval_binary(n->op, n->a->dtype, a, evaluate_index(n->b, env)));
    }
    case ExprKind::Not:
      return !evaluate_index(static_cast<const NotNode*>(e.get())->a, env);
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return evaluate_index(n->cond, env) ? evaluate_index(n->true_value, env)
                                          : evaluate_index(n->false_value, env);
    }
    case ExprKind::Cast: {
      auto* n = static_cast<const CastNode*>(e.get());
      if (!arith::is_scalar_int(e->dtype)) break;
      return arith::wrap_to(e->dtype, evaluate_index(n->value, env));
    }
    default:
      break;
  }
  layout_error("layout expression '" + tl::to_string(e) + "' is not integer index arithmetic");
}

int64_t shape_size(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Expr flatten_row_major(const std::vector<Expr>& indices, const std::vector<int64_t>& shape) {
  Expr flat = make_int(0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    flat = add(mul(indices[d], make_int(stride)), flat);
    stride *= shape[d];
  }
  return flat;
}

std::vector<Expr> unflatten_row_major(const Expr& flat, const std::vector<int64_t>& shape) {
  std::vector<Expr> out(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    Expr v = stride == 1 ? flat : floordiv(flat, make_int(stride));
    // The outermost coordinate needs no modulo: the flat index is below the size.
    out[d] = d == 0 ? v : floormod(v, make_int(shape[d]));
    stride *= shape[d];
  }
  return out;
}

int64_t flatten_row_major(const std::vector<int64_t>& indices, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + indices[d];
  return flat;
}

std::vector<int64_t> unflatten_row_major(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    out[d] = flat % shape[d];
    flat /= shape[d];
  }
  return out;
}

std::vector<Var> make_placeholders(size_t rank) {
  static const char* kShortNames[] = {"i", "j", "k", "l"};
  std::vector<Var> vars;
  for (size_t d = 0; d < rank; ++d)
    vars.push_back(make_var(rank <= 4 ? kShortNames[d] : "i" + std::to_string(d)));
  return vars;
}

namespace layout_detail {

void bind_ranges(arith::Analyzer& analyzer, const std::vector<Var>& vars,
                 const std::vector<int64_t>& extents) {
  for (size_t d = 0; d < vars.size(); ++d) analyzer.bind(vars[d].get(), 0, extents[d]);
}

void check_shape(const std::vector<int64_t>& shape, const char* what) {
  for (int64_t s : shape)
    if (s < 1) layout_error(std::string(what) + " " + shape_str(shape) + " has an extent below 1");
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

Expr substitute_vars(const Expr& e, const std::vector<Var>& vars, const std::vector<Expr>& values) {
  std::unordered_map<const VarNode*, Expr> map;
  for (size_t d = 0; d < vars.size(); ++d) map[vars[d].get()] = values[d];
  return substitute(e, map);
}

}  // namespace layout_detail

using layout_detail::shape_str;

// ---------------------------------------------------------------- construction

Layout::Layout(std::vector<int64_t> input_shape, const IndexFn& fn) {
  std::vector<Var> vars = make_placeholders(input_shape.size());
  std::vector<Expr> exprs = fn(vars);
  init(std::move(vars), std::move(input_shape), std::move(exprs), std::nullopt);
}

Layout::Layout(std::vector<int64_t> input_shape, const IndexFn& fn, std::vector<int64_t> output_shape) {
  std::vector<Var> vars = make_placeholders(input_shape.size());
  std::vector<Expr> exprs = fn(vars);
  init(std::move(vars), std::move(input_shape), std::move(exprs), std::move(output_shape));
}

Layout Layout::from_exprs(std::vector<Var> vars, std::vector<int64_t> input_shape, std::vector<Expr> exprs,
                          std::optional<std::vector<int64_t>> output_shape) {
  Layout layout;
  layout.init(std::move(vars), std::move(input_shape), std::move(exprs), std::move(output_shape));
  return layout;
}

void Layout::init(std::vector<Var> vars, std::vector<int64_t> input_shape, std::vector<Expr> exprs,
                  std::optional<std::vector<int64_t>> output_shape) {
  layout_detail::check_shape(input_shape, "layout input shape");
  if (vars.size() != input_shape.size())
    layout_error("layout has " + std::to_string(vars.size()) + " placeholders for input shape " +
                 shape_str(input_shape));
  arith::Analyzer analyzer;
  layout_detail::bind_ranges(analyzer, vars, input_shape);
  for (auto& e : exprs) {
    if (!e || !arith::is_scalar_int(e->dtype) || e->dtype.is_bool())
      layout_error("layout output expressions must be integer index expressions");
    e = analyzer.simplify(e);
  }
  if (output_shape) {
    if (output_shape->size() != exprs.size())
      layout_error("layout output shape " + shape_str(*output_shape) + " does not match its " +
                   std::to_string(exprs.size()) + " output expressions");
    layout_detail::check_shape(*output_shape, "layout output shape");
    output_shape_ = std::move(*output_shape);
  } else {
    for (size_t d = 0; d < exprs.size(); ++d) {
      arith::ConstIntBound b = analyzer.const_int_bound(exprs[d]);
      if (b.min < 0 || b.max == arith::ConstIntBound::kPosInf)
        layout_error("cannot bound output " + std::to_string(d) + " of layout expression '" +
                     tl::to_string(exprs[d]) + "'; give the output shape explicitly");
      output_shape_.push_back(b.max + 1);
    }
  }
  input_shape_ = std::move(input_shape);
  vars_ = std::move(vars);
  exprs_ = std::move(exprs);
}

Layout Layout::identity(const std::vector<int64_t>& shape) {
  return Layout(
      shape, [](const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end()); }, shape);
}

Layout Layout::row_major(const std::vector<int64_t>& shape) {
  return Layout(shape,
                [&](const std::vector<Var>& v) {
                  return std::vector<Expr>{flatten_row_major(std::vector<Expr>(v.begin(), v.end()), shape)};
                },
                {shape_size(shape)});
}

Layout Layout::col_major(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strided(shape, strides);
}

Layout Layout::strided(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (strides.size() != shape.size())
    layout_error("strided layout: " + std::to_string(strides.size()) + " strides for shape " +
                 shape_str(shape));
  layout_detail::check_shape(shape, "strided layout shape");
  int64_t max_offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (strides[d] < 0) layout_error("strided layout: negative stride " + std::to_string(strides[d]));
    max_offset += (shape[d] - 1) * strides[d];
  }
  return Layout(shape,
                [&](const std::vector<Var>& v) {
                  Expr offset = make_int(0);
                  for (size_t d = 0; d < v.size(); ++d) offset = add(offset, mul(v[d], make_int(strides[d])));
                  return std::vector<Expr>{offset};
                },
                {max_offset + 1});
}

Layout Layout::padded_row_major(const std::vector<int64_t>& shape, int64_t pad) {
  if (shape.size() < 2) layout_error("padded layout needs a tile of rank 2 or more, got " + shape_str(shape));
  if (pad < 0) layout_error("padded layout: negative padding " + std::to_string(pad));
  layout_detail::check_shape(shape, "padded layout shape");
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d] + (d + 1 == shape.size() ? pad : 0);
  }
  Layout layout = strided(shape, strides);
  // Whole padded rows, so that consecutive tiles stay aligned the same way.
  layout.output_shape_ = {stride};
  return layout;
}

// ---------------------------------------------------------------- mapping

std::vector<Expr> Layout::forward(const std::vector<Expr>& indices) const {
  arith::Analyzer analyzer;
  return forward(indices, analyzer);
}

std::vector<Expr> Layout::forward(const std::vector<Expr>& indices, arith::Analyzer& analyzer) const {
  if (indices.size() != input_shape_.size())
    layout_error("layout " + to_string() + " applied to " + std::to_string(indices.size()) + " indices");
  std::vector<Expr> out;
  for (auto& e : exprs_) out.push_back(analyzer.simplify(layout_detail::substitute_vars(e, vars_, indices)));
  return out;
}

std::vector<int64_t> Layout::evaluate(const std::vector<int64_t>& indices) const {
  if (indices.size() != input_shape_.size())
    layout_error("layout " + to_string() + " evaluated at " + std::to_string(indices.size()) + " indices");
  IndexEnv env;
  for (size_t d = 0; d < vars_.size(); ++d) env[vars_[d].get()] = indices[d];
  std::vector<int64_t> out;
  for (auto& e : exprs_) out.push_back(evaluate_index(e, env));
  return out;
}

int64_t Layout::evaluate_flat(const std::vector<int64_t>& indices) const {
  return flatten_row_major(evaluate(indices), output_shape_);
}

void Layout::for_each_input(const std::function<void(const std::vector<int64_t>&)>& fn) const {
  std::vector<int64_t> idx(input_shape_.size(), 0);
  const int64_t n = input_size();
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(idx);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < input_shape_[d]) break;
      idx[d] = 0;
    }
  }
}

void Layout::require_enumerable(const char* what) const {
  if (input_size() > kMaxEnumeration)
    layout_error(std::string(what) + " of layout " + to_string() + " needs enumerating " +
                 std::to_string(input_size()) + " elements, more than the limit of " +
                 std::to_string(kMaxEnumeration));
}

bool Layout::is_in_bounds() const {
  require_enumerable("bounds check");
  bool ok = true;
  for_each_input([&](const std::vector<int64_t>& idx) {
    if (!ok) return;
    std::vector<int64_t> out = evaluate(idx);
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] < 0 || out[d] >= output_shape_[d]) ok = false;
  });
  return ok;
}

bool Layout::is_injective() const {
  require_enumerable("injectivity check");
  bool ok = true;
  if (is_in_bounds() && output_size() <= 64 * kMaxEnumeration) {
    std::vector<bool> seen(size_t(output_size()), false);
    for_each_input([&](const std::vector<int64_t>& idx) {
      int64_t flat = evaluate_flat(idx);
      if (seen[size_t(flat)]) ok = false;
      seen[size_t(flat)] = true;
    });
    return ok;
  }
  std::set<std::vector<int64_t>> seen;
  for_each_input([&](const std::vector<int64_t>& idx) {
    if (!seen.insert(evaluate(idx)).second) ok = false;
  });
  return ok;
}

bool Layout::is_bijective() const {
  return input_size() == output_size() && is_in_bounds() && is_injective();
}

// ---------------------------------------------------------------- inverse

namespace {

// Inverse candidates are built over the coordinates of the output (the inverse's input).
struct InverseProblem {
  std::vector<int64_t> in_shape;   // the layout's input shape (the inverse's output)
  std::vector<int64_t> out_shape;  // the layout's output shape
  std::vector<int64_t> preimage;   // flat output -> flat input
  std::vector<Var> out_vars;       // placeholders of the inverse
};

// x[d] = (o // stride[d]) % extent[d] over the flat output o.
std::optional<std::vector<Expr>> affine_inverse(const InverseProblem& p, const Layout& layout) {
  const size_t rank = p.in_shape.size();
  const int64_t n = shape_size(p.in_shape);
  std::vector<int64_t> zero(rank, 0);
  if (layout.evaluate_flat(zero) != 0) return std::nullopt;
  std::vector<int64_t> strides(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    if (p.in_shape[d] == 1) continue;
    std::vector<int64_t> unit = zero;
    unit[d] = 1;
    strides[d] = layout.evaluate_flat(unit);
    if (strides[d] <= 0) return std::nullopt;
  }
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> x = unflatten_row_major(p.preimage[size_t(o)], p.in_shape);
    for (size_t d = 0; d < rank; ++d) {
      int64_t expect = p.in_shape[d] == 1 ? 0 : (o / strides[d]) % p.in_shape[d];
      if (x[d] != expect) return std::nullopt;
    }
  }
  Expr flat = flatten_row_major(std::vector<Expr>(p.out_vars.begin(), p.out_vars.end()), p.out_shape);
  std::vector<Expr> result;
  for (size_t d = 0; d < rank; ++d) {
    if (p.in_shape[d] == 1) {
      result.push_back(make_int(0));
      continue;
    }
    Expr v = strides[d] == 1 ? flat : floordiv(flat, make_int(strides[d]));
    if (strides[d] * p.in_shape[d] != n) v = floormod(v, make_int(p.in_shape[d]));
    result.push_back(v);
  }
  return result;
}

// Power-of-two extents: a flat index is the concatenation of its coordinates' bits. When
// every input bit is the XOR of a fixed set of output bits, each coordinate of the inverse
// is a sum of bit fields (copied runs) and parity terms (XORs).
std::optional<std::vector<Expr>> bit_linear_inverse(const InverseProblem& p) {
  for (int64_t s : p.in_shape)
    if (!is_power_of_two(s)) return std::nullopt;
  for (int64_t s : p.out_shape)
    if (!is_power_of_two(s)) return std::nullopt;
  const int64_t n = shape_size(p.in_shape);
  const int bits = log2_exact(n);
  if (p.preimage[0] != 0) return std::nullopt;
  std::vector<int64_t> image_of_bit(static_cast<size_t>(bits));
  for (int k = 0; k < bits; ++k) image_of_bit[size_t(k)] = p.preimage[size_t(int64_t(1) << k)];
  for (int64_t o = 0; o < n; ++o) {
    int64_t expect = 0;
    for (int k = 0; k < bits; ++k)
      if ((o >> k) & 1) expect ^= image_of_bit[size_t(k)];
    if (p.preimage[size_t(o)] != expect) return std::nullopt;
  }
  // Which output coordinate, and which bit of it, a flat output bit is.
  struct BitSource {
    size_t coord;
    int bit;
    int coord_bits;
  };
  std::vector<BitSource> source(static_cast<size_t>(bits));
  {
    int k = 0;
    for (size_t e = p.out_shape.size(); e-- > 0;) {
      int width = log2_exact(p.out_shape[e]);
      for (int b = 0; b < width; ++b) source[size_t(k++)] = {e, b, width};
    }
  }
  auto bit_field = [&](int k, int len) {
    const BitSource& s = source[size_t(k)];
    Expr v = p.out_vars[s.coord];
    if (s.bit > 0) v = floordiv(v, make_int(int64_t(1) << s.bit));
    if (s.bit + len < s.coord_bits) v = floormod(v, make_int(int64_t(1) << len));
    return v;
  };
  // Only the parity of (coordinate >> bit) matters inside an XOR term.
  auto shifted = [&](int k) {
    const BitSource& s = source[size_t(k)];
    Expr v = p.out_vars[s.coord];
    return s.bit > 0 ? floordiv(v, make_int(int64_t(1) << s.bit)) : v;
  };
  std::vector<Expr> result(p.in_shape.size());
  int offset = 0;
  for (size_t d = p.in_shape.size(); d-- > 0;) {
    int width = log2_exact(p.in_shape[d]);
    Expr coord = make_int(0);
    for (int b = 0; b < width;) {
      int flat_bit = offset + b;
      std::vector<int> sources;
      for (int k = 0; k < bits; ++k)
        if ((image_of_bit[size_t(k)] >> flat_bit) & 1) sources.push_back(k);
      Expr term;
      int len = 1;
      if (sources.size() == 1) {
        // Extend a run of copied bits within one output coordinate.
        int k = sources[0];
        while (b + len < width && k + len < bits &&
               source[size_t(k + len)].coord == source[size_t(k)].coord) {
          int64_t next_mask = 0;
          for (int q = 0; q < bits; ++q)
            if ((image_of_bit[size_t(q)] >> (flat_bit + len)) & 1) next_mask |= int64_t(1) << q;
          if (next_mask != (int64_t(1) << (k + len))) break;
          ++len;
        }
        term = bit_field(k, len);
      } else if (sources.size() > 1) {
        Expr parity = make_int(0);
        for (int k : sources) parity = add(parity, shifted(k));
        term = floormod(parity, make_int(2));
      }
      if (term) coord = add(coord, mul(term, make_int(int64_t(1) << b)));
      b += len;
    }
    result[d] = coord;
    offset += width;
  }
  return result;
}

}  // namespace

Layout Layout::inverse() const {
  require_enumerable("inverse");
  if (!is_bijective())
    layout_error("layout " + to_string() + " has no inverse: it is not a bijection onto its output shape");
  InverseProblem p{input_shape_, output_shape_, std::vector<int64_t>(size_t(input_size())),
                   make_placeholders(output_shape_.size())};
  for_each_input([&](const std::vector<int64_t>& idx) {
    p.preimage[size_t(evaluate_flat(idx))] = flatten_row_major(idx, input_shape_);
  });
  std::optional<std::vector<Expr>> exprs = affine_inverse(p, *this);
  if (!exprs) exprs = bit_linear_inverse(p);
  if (!exprs)
    layout_error("layout " + to_string() +
                 " is bijective but its inverse has no supported closed form (affine, or bit-linear "
                 "over power-of-two extents)");
  Layout inv = from_exprs(p.out_vars, output_shape_, std::move(*exprs), input_shape_);
  // The closed form was derived from samples and simplified: confirm it everywhere.
  inv.for_each_input([&](const std::vector<int64_t>& y) {
    if (inv.evaluate_flat(y) != p.preimage[size_t(flatten_row_major(y, output_shape_))])
      fail(ErrorKind::Internal, Span{}, "inverse of layout " + to_string() + " is wrong at an output");
  });
  return inv;
}

// ---------------------------------------------------------------- algebra

Layout Layout::compose(const Layout& inner) const {
  if (inner.output_size() != input_size())
    layout_error("cannot compose layout " + to_string() + " after " + inner.to_string() +
                 ": the inner output has " + std::to_string(inner.output_size()) +
                 " elements, the outer input " + std::to_string(input_size()));
  std::vector<Expr> values = inner.exprs_;
  if (inner.output_shape_ != input_shape_)
    values = unflatten_row_major(flatten_row_major(inner.exprs_, inner.output_shape_), input_shape_);
  std::vector<Expr> exprs;
  for (auto& e : exprs_) exprs.push_back(layout_detail::substitute_vars(e, vars_, values));
  return from_exprs(inner.vars_, inner.input_shape_, std::move(exprs), output_shape_);
}

Layout Layout::reshape_input(const std::vector<int64_t>& shape) const {
  layout_detail::check_shape(shape, "reshaped input");
  if (shape_size(shape) != input_size())
    layout_error("cannot reshape the input of layout " + to_string() + " to " + shape_str(shape));
  std::vector<Var> vars = make_placeholders(shape.size());
  Expr flat = flatten_row_major(std::vector<Expr>(vars.begin(), vars.end()), shape);
  std::vector<Expr> old_index = unflatten_row_major(flat, input_shape_);
  std::vector<Expr> exprs;
  for (auto& e : exprs_) exprs.push_back(layout_detail::substitute_vars(e, vars_, old_index));
  return from_exprs(std::move(vars), shape, std::move(exprs), output_shape_);
}

Layout Layout::reshape_output(const std::vector<int64_t>& shape) const {
  layout_detail::check_shape(shape, "reshaped output");
  if (shape_size(shape) != output_size())
    layout_error("cannot reshape the output of layout " + to_string() + " to " + shape_str(shape));
  if (shape == output_shape_) return *this;
  return from_exprs(vars_, input_shape_, unflatten_row_major(flatten_row_major(exprs_, output_shape_), shape),
                    shape);
}

bool Layout::structural_equal(const Layout& other) const {
  if (input_shape_ != other.input_shape_ || output_shape_ != other.output_shape_) return false;
  std::vector<Expr> mine(vars_.begin(), vars_.end());
  for (size_t d = 0; d < exprs_.size(); ++d)
    if (!tl::structural_equal(exprs_[d], layout_detail::substitute_vars(other.exprs_[d], other.vars_, mine)))
      return false;
  return true;
}

bool Layout::same_mapping(const Layout& other) const {
  if (input_shape_ != other.input_shape_ || output_shape_ != other.output_shape_) return false;
  require_enumerable("equivalence check");
  bool same = true;
  for_each_input([&](const std::vector<int64_t>& idx) {
    if (same && evaluate(idx) != other.evaluate(idx)) same = false;
  });
  return same;
}

std::string Layout::to_string() const {
  std::string s = "Layout(" + shape_str(input_shape_) + " -> " + shape_str(output_shape_) + ": ";
  if (exprs_.size() != 1) s += "(";
  for (size_t d = 0; d < exprs_.size(); ++d) s += (d ? ", " : "") + tl::to_string(exprs_[d]);
  if (exprs_.size() != 1) s += ")";
  return s + ")";
}

}  // namespace tl
