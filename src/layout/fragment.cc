#include "layout/fragment.h"

#include "arith/int_math.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/structural.h"

namespace tl {

namespace {

[[noreturn]] void fragment_error(const std::string& message, const std::string& hint = "") {
  fail(ErrorKind::Layout, Span{}, message, hint);
}

std::vector<Expr> as_exprs(const std::vector<Var>& vars) {
  return std::vector<Expr>(vars.begin(), vars.end());
}

}  // namespace

using layout_detail::shape_str;
using layout_detail::substitute_vars;

Fragment::Fragment(std::vector<int64_t> input_shape, int64_t thread_count, const ThreadFn& thread,
                   const LocalFn& index, int64_t replicate_extent) {
  std::vector<Var> vars = make_placeholders(input_shape.size());
  Var rep = make_var("rep");
  Expr t = thread(vars, rep);
  Expr l = index(vars);
  init(std::move(vars), std::move(rep), std::move(input_shape), thread_count, std::move(t), std::move(l),
       replicate_extent);
}

void Fragment::init(std::vector<Var> vars, Var rep, std::vector<int64_t> input_shape, int64_t thread_count,
                    Expr thread, Expr index, int64_t replicate_extent) {
  layout_detail::check_shape(input_shape, "fragment shape");
  if (thread_count < 1)
    fragment_error("a fragment needs at least one thread, got " + std::to_string(thread_count));
  if (replicate_extent < 1)
    fragment_error("fragment replication must be at least 1, got " + std::to_string(replicate_extent));
  if (!thread || !index || !arith::is_scalar_int(thread->dtype) || !arith::is_scalar_int(index->dtype))
    fragment_error("fragment thread and index must be integer index expressions");
  arith::Analyzer analyzer;
  layout_detail::bind_ranges(analyzer, vars, input_shape);
  analyzer.bind(rep.get(), 0, replicate_extent);
  thread_ = analyzer.simplify(thread);
  index_ = analyzer.simplify(index);
  arith::ConstIntBound b = analyzer.const_int_bound(index_);
  if (b.min < 0 || b.max == arith::ConstIntBound::kPosInf)
    fragment_error("cannot bound the local index '" + tl::to_string(index_) + "' of a fragment over " +
                   shape_str(input_shape));
  local_size_ = b.max + 1;
  input_shape_ = std::move(input_shape);
  vars_ = std::move(vars);
  rep_ = std::move(rep);
  thread_count_ = thread_count;
  replicate_ = replicate_extent;
}

Fragment Fragment::contiguous_vectors(const std::vector<int64_t>& shape, int64_t threads,
                                      int64_t vector_size) {
  layout_detail::check_shape(shape, "fragment shape");
  if (threads < 1 || vector_size < 1)
    fragment_error("a fragment partition needs threads >= 1 and vector size >= 1, got " +
                   std::to_string(threads) + " and " + std::to_string(vector_size));
  int64_t size = shape_size(shape);
  if (size % vector_size != 0)
    fragment_error("a tile of shape " + shape_str(shape) + " (" + std::to_string(size) +
                       " elements) cannot be cut into vectors of " + std::to_string(vector_size),
                   "choose a vector size that divides the tile size");
  return Fragment(
      shape, threads,
      [&](const std::vector<Var>& v, const Var&) {
        Expr vector_id = floordiv(flatten_row_major(as_exprs(v), shape), make_int(vector_size));
        return floormod(vector_id, make_int(threads));
      },
      [&](const std::vector<Var>& v) {
        Expr flat = flatten_row_major(as_exprs(v), shape);
        Expr round = floordiv(flat, make_int(vector_size * threads));
        return add(mul(round, make_int(vector_size)), floormod(flat, make_int(vector_size)));
      });
}

Fragment Fragment::fully_replicated(const std::vector<int64_t>& shape, int64_t threads) {
  return Fragment(
      shape, threads, [](const std::vector<Var>&, const Var& rep) -> Expr { return rep; },
      [&](const std::vector<Var>& v) { return flatten_row_major(as_exprs(v), shape); }, threads);
}

Expr Fragment::thread(const std::vector<Expr>& indices, const Expr& rep) const {
  arith::Analyzer analyzer;
  return thread(indices, rep, analyzer);
}

Expr Fragment::index(const std::vector<Expr>& indices) const {
  arith::Analyzer analyzer;
  return index(indices, analyzer);
}

Expr Fragment::thread(const std::vector<Expr>& indices, const Expr& rep, arith::Analyzer& analyzer) const {
  if (indices.size() != vars_.size())
    fragment_error("fragment over " + shape_str(input_shape_) + " indexed with " +
                   std::to_string(indices.size()) + " indices");
  std::vector<Var> vars = vars_;
  std::vector<Expr> values = indices;
  vars.push_back(rep_);
  values.push_back(rep);
  return analyzer.simplify(substitute_vars(thread_, vars, values));
}

Expr Fragment::index(const std::vector<Expr>& indices, arith::Analyzer& analyzer) const {
  if (indices.size() != vars_.size())
    fragment_error("fragment over " + shape_str(input_shape_) + " indexed with " +
                   std::to_string(indices.size()) + " indices");
  return analyzer.simplify(substitute_vars(index_, vars_, indices));
}

IndexEnv Fragment::env_of(const std::vector<int64_t>& indices, int64_t rep) const {
  if (indices.size() != vars_.size())
    fragment_error("fragment over " + shape_str(input_shape_) + " evaluated at " +
                   std::to_string(indices.size()) + " indices");
  IndexEnv env;
  for (size_t d = 0; d < vars_.size(); ++d) env[vars_[d].get()] = indices[d];
  env[rep_.get()] = rep;
  return env;
}

int64_t Fragment::evaluate_thread(const std::vector<int64_t>& indices, int64_t rep) const {
  return tl::evaluate_index(thread_, env_of(indices, rep));
}

int64_t Fragment::evaluate_index(const std::vector<int64_t>& indices) const {
  return tl::evaluate_index(index_, env_of(indices, 0));
}

Fragment Fragment::replicate(int64_t n) const {
  if (n < 1) fragment_error("replicate() needs a factor of at least 1, got " + std::to_string(n));
  Var rep = make_var("rep");
  Expr old_rep = floormod(rep, make_int(replicate_));
  Expr group = floordiv(rep, make_int(replicate_));
  std::vector<Var> vars = vars_;
  vars.push_back(rep_);
  std::vector<Expr> values = as_exprs(vars_);
  values.push_back(old_rep);
  Expr thread = add(substitute_vars(thread_, vars, values), mul(group, make_int(thread_count_)));
  Fragment f;
  f.init(vars_, std::move(rep), input_shape_, thread_count_ * n, std::move(thread), index_, replicate_ * n);
  return f;
}

Fragment Fragment::repeat(const std::vector<int64_t>& factors, bool on_threads) const {
  if (factors.size() != input_shape_.size())
    fragment_error("repeat() of a fragment over " + shape_str(input_shape_) +
                   " needs one factor per dimension, got " + shape_str(factors));
  layout_detail::check_shape(factors, "repeat factors");
  std::vector<int64_t> shape(input_shape_.size());
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = input_shape_[d] * factors[d];
  std::vector<Var> vars = make_placeholders(shape.size());
  std::vector<Expr> inner, outer;
  for (size_t d = 0; d < shape.size(); ++d) {
    inner.push_back(floormod(vars[d], make_int(input_shape_[d])));
    outer.push_back(floordiv(vars[d], make_int(input_shape_[d])));
  }
  Expr copy = flatten_row_major(outer, factors);
  Expr thread = substitute_vars(thread_, vars_, inner);
  Expr index = substitute_vars(index_, vars_, inner);
  if (on_threads) {
    thread = add(thread, mul(copy, make_int(thread_count_)));
  } else {
    index = add(index, mul(copy, make_int(local_size_)));
  }
  Fragment f;
  f.init(std::move(vars), rep_, std::move(shape), thread_count_ * (on_threads ? shape_size(factors) : 1),
         std::move(thread), std::move(index), replicate_);
  return f;
}

Layout Fragment::thread_value_layout() const {
  std::vector<Var> vars = vars_;
  vars.push_back(rep_);
  std::vector<int64_t> shape = input_shape_;
  shape.push_back(replicate_);
  return Layout::from_exprs(std::move(vars), std::move(shape), {thread_, index_},
                            std::vector<int64_t>{thread_count_, local_size_});
}

bool Fragment::is_injective() const {
  Layout tv = thread_value_layout();
  return tv.is_in_bounds() && tv.is_injective();
}

bool Fragment::is_complete() const {
  Layout tv = thread_value_layout();
  if (tv.input_size() > Layout::kMaxEnumeration)
    fragment_error("completeness check of " + to_string() + " needs enumerating too many elements");
  std::vector<bool> reached(size_t(thread_count_ * local_size_), false);
  for (int64_t flat = 0; flat < tv.input_size(); ++flat) {
    std::vector<int64_t> slot = tv.evaluate(unflatten_row_major(flat, tv.input_shape()));
    if (slot[0] >= 0 && slot[0] < thread_count_ && slot[1] >= 0 && slot[1] < local_size_)
      reached[size_t(slot[0] * local_size_ + slot[1])] = true;
  }
  for (bool r : reached)
    if (!r) return false;
  return true;
}

bool Fragment::is_bijective() const { return thread_value_layout().is_bijective(); }

Layout Fragment::inverse() const {
  Layout tv = thread_value_layout();
  if (!tv.is_bijective())
    fragment_error("fragment " + to_string() + " has no inverse: some register slot holds no element or two");
  return tv.inverse();
}

bool Fragment::structural_equal(const Fragment& other) const {
  if (input_shape_ != other.input_shape_ || thread_count_ != other.thread_count_ ||
      local_size_ != other.local_size_ || replicate_ != other.replicate_)
    return false;
  std::vector<Var> theirs = other.vars_;
  theirs.push_back(other.rep_);
  std::vector<Expr> mine = as_exprs(vars_);
  mine.push_back(rep_);
  return tl::structural_equal(thread_, substitute_vars(other.thread_, theirs, mine)) &&
         tl::structural_equal(index_, substitute_vars(other.index_, theirs, mine));
}

std::string Fragment::to_string() const {
  return "Fragment(" + shape_str(input_shape_) + " -> thread: " + tl::to_string(thread_) +
         ", local: " + tl::to_string(index_) + "; " + std::to_string(thread_count_) + " threads, " +
         std::to_string(local_size_) + " local, replicate " + std::to_string(replicate_) + ")";
}

}  // namespace tl
