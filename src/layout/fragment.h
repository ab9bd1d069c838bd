// Fragments: how a tile held in registers is spread over the threads of a block.
//
// A Fragment over a logical tile of constant shape says, for every element x and every
// replica r in [0, replicate_extent), which thread holds that copy (thread(x, r), in
// [0, thread_count)) and where in the thread's local array it lives (index(x), in
// [0, local_size); the same slot in every replica). replicate_extent > 1 means each element is
// held by several threads, e.g. the result of a reduction broadcast to the threads that reduced
// it. A well-formed fragment is a bijection (x, r) -> (thread, local) onto
// [0, thread_count) x [0, local_size): every register slot of every thread holds exactly one
// copy of one element, and the copies of an element sit in distinct threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layout/layout.h"

namespace tl {

class Fragment {
 public:
  using ThreadFn = std::function<Expr(const std::vector<Var>& vars, const Var& rep)>;
  using LocalFn = std::function<Expr(const std::vector<Var>& vars)>;

  // thread receives the tile's placeholders and the replica variable; index the placeholders.
  // local_size is the constant upper bound of the index expression plus one.
  Fragment(std::vector<int64_t> input_shape, int64_t thread_count, const ThreadFn& thread,
           const LocalFn& index, int64_t replicate_extent = 1);

  // The default T.Parallel partition: the row-major tile is cut into vectors of vector_size
  // consecutive elements, dealt round-robin to the threads (vector q goes to thread
  // q % threads, at local offset (q / threads) * vector_size). The size must be a multiple of
  // vector_size; when the vectors do not divide evenly the last round leaves threads idle.
  static Fragment contiguous_vectors(const std::vector<int64_t>& shape, int64_t threads, int64_t vector_size);
  // Every thread holds the whole tile, in row-major order (replicate_extent == threads).
  static Fragment fully_replicated(const std::vector<int64_t>& shape, int64_t threads);

  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  const std::vector<Var>& placeholders() const { return vars_; }
  const Var& replica_var() const { return rep_; }
  const Expr& thread_expr() const { return thread_; }
  const Expr& index_expr() const { return index_; }
  int64_t thread_count() const { return thread_count_; }
  int64_t local_size() const { return local_size_; }
  int64_t replicate_extent() const { return replicate_; }

  // The thread holding replica `rep` of element `indices`, and its local slot, simplified.
  // The overloads with an analyzer use the ranges the caller bound (loop variables, ...).
  Expr thread(const std::vector<Expr>& indices, const Expr& rep) const;
  Expr index(const std::vector<Expr>& indices) const;
  Expr thread(const std::vector<Expr>& indices, const Expr& rep, arith::Analyzer& analyzer) const;
  Expr index(const std::vector<Expr>& indices, arith::Analyzer& analyzer) const;
  int64_t evaluate_thread(const std::vector<int64_t>& indices, int64_t rep) const;
  int64_t evaluate_index(const std::vector<int64_t>& indices) const;

  // n times as many threads, each group of thread_count threads holding a full copy:
  // thread'(x, r) = thread(x, r % R) + thread_count * (r / R), R' = R * n.
  Fragment replicate(int64_t n) const;
  // Tiles the fragment over a grid of factors[d] copies along each dimension (row-major over
  // the grid). on_threads: each copy goes to a new group of thread_count threads; otherwise the
  // same threads hold every copy, copy g at local offset g * local_size.
  Fragment repeat(const std::vector<int64_t>& factors, bool on_threads) const;

  // By enumeration: every (x, r) lands in range and no two land on the same (thread, local);
  // every (thread, local) is reached; both.
  bool is_injective() const;
  bool is_complete() const;
  bool is_bijective() const;

  // (x..., r) -> (thread, local) as a Layout of shape [input_shape..., replicate_extent].
  Layout thread_value_layout() const;
  // (thread, local) -> (x..., r): which element a register slot holds (see Layout::inverse).
  Layout inverse() const;

  bool structural_equal(const Fragment& other) const;
  // "Fragment([16, 8] -> thread: ..., local: ...; 32 threads, 4 local, replicate 1)".
  std::string to_string() const;

 private:
  Fragment() = default;
  void init(std::vector<Var> vars, Var rep, std::vector<int64_t> input_shape, int64_t thread_count,
            Expr thread, Expr index, int64_t replicate_extent);
  IndexEnv env_of(const std::vector<int64_t>& indices, int64_t rep) const;

  std::vector<int64_t> input_shape_;
  std::vector<Var> vars_;
  Var rep_;
  Expr thread_;
  Expr index_;
  int64_t thread_count_ = 1;
  int64_t local_size_ = 1;
  int64_t replicate_ = 1;
};

}  // namespace tl
