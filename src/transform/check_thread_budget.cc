#include "transform/check_thread_budget.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

// Threads that run different branches (T.ws regions, `if tx < 128` over warpgroups) never
// hold each other's arrays: an array used only under one thread range counts for those
// threads alone, so a thread holds the arrays used everywhere plus its own range's.
class Budget : public IRVisitor {
 public:
  explicit Budget(const Target& target) : target_(target), limit_(target.max_thread_array_bytes) {
    if (target.kind == "webgpu") {
      prefix_ = "not supported on webgpu: ";
      what_ = "WGSL allows " + std::to_string(limit_) + " bytes of function-scope variables per invocation";
    } else {
      what_ = "the target allows " + std::to_string(limit_);
    }
  }
  std::vector<std::string> report;
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* k) override {
    arrays_.clear();
    range_of_.clear();
    thread_ = k->thread_vars.empty() ? nullptr : k->thread_vars[0].get();
    threads_ = k->threads.empty() ? 1 : k->threads[0];
    current_ = {0, threads_};
    IRVisitor::visit_kernel(k);
    // In allocation order, so that an error names the array that tips the thread over.
    int64_t held = 0;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      held = held_by_a_thread(i + 1);
      if (held > limit_)
        fail(ErrorKind::Unsupported, arrays_[i].buffer->span,
             prefix_ + "each thread would hold " + std::to_string(held) + " bytes of per-thread arrays ('" +
                 arrays_[i].buffer->name + "' adds " + std::to_string(arrays_[i].bytes) + "); " + what_,
             "use smaller tiles or more threads per block, or keep the data in shared or global memory");
    }
    int64_t regs = target_.register_bytes(k->num_threads());
    if (regs && held > regs)
      report.push_back(k->span.str() + ": each thread holds " + std::to_string(held) +
                       " bytes of arrays [slower path: more than the " + std::to_string(regs / 4) + " registers (" +
                       std::to_string(regs) + " bytes) a thread " +
                       (target_.kind == "hip" ? "of a " + std::to_string(k->num_threads()) + "-thread block has; "
                                                "the rest lives in scratch memory]"
                                              : "has; the rest lives in local memory]"));
  }
  void visit_allocate(const AllocateNode* n) override {
    const Buffer& b = n->buffer;
    if (b->scope == scope::kLocal) {
      int64_t elems = 1;
      bool known = true;
      for (auto& e : b->shape) {
        const int64_t* v = const_int(e);
        if (!v) known = false;
        else if (__builtin_mul_overflow(elems, std::max<int64_t>(*v, 0), &elems)) elems = int64_t(1) << 40;
      }
      if (known) arrays_.push_back({b.get(), elems * std::max(1, b->dtype.bytes())});
    }
    IRVisitor::visit_allocate(n);
  }
  void visit_if(const IfThenElseNode* n) override {
    Range inside = current_;
    if (!narrow(n->cond, inside)) return IRVisitor::visit_if(n);
    visit(n->cond);
    Range saved = current_;
    current_ = inside;
    visit(n->then_case);
    current_ = saved;
    if (n->else_case) visit(n->else_case);
  }
  void visit_load(const BufferLoadNode* n) override {
    use(n->buffer.get());
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    use(n->buffer.get());
    IRVisitor::visit_store(n);
  }

 private:
  using Range = std::pair<int64_t, int64_t>;  // threads [first, second)
  struct Array {
    const BufferNode* buffer;
    int64_t bytes;
  };

  // Narrows `r` by cond when cond compares the thread index with constants (and
  // conjunctions of such); false for any other condition.
  bool narrow(const Expr& cond, Range& r) const {
    auto* b = as<BinaryNode>(cond);
    if (!b || !thread_) return false;
    if (b->op == BinaryOp::And) return narrow(b->a, r) && narrow(b->b, r);
    auto* v = as<VarNode>(b->a);
    const int64_t* k = const_int(b->b);
    if (!v || v != thread_ || !k) return false;
    switch (b->op) {
      case BinaryOp::LT: r.second = std::min(r.second, *k); return true;
      case BinaryOp::LE: r.second = std::min(r.second, *k + 1); return true;
      case BinaryOp::GE: r.first = std::max(r.first, *k); return true;
      case BinaryOp::GT: r.first = std::max(r.first, *k + 1); return true;
      default: return false;
    }
  }
  void use(const BufferNode* b) {
    auto it = range_of_.find(b);
    if (it == range_of_.end()) range_of_[b] = current_;
    else if (it->second != current_) it->second = {0, threads_};  // used by several ranges: everyone's
  }
  // The most bytes any one thread holds of the first `count` arrays.
  int64_t held_by_a_thread(size_t count) const {
    std::vector<Range> ranges;
    for (size_t i = 0; i < count; ++i) {
      auto it = range_of_.find(arrays_[i].buffer);
      Range r = it == range_of_.end() ? Range{0, threads_} : it->second;
      if (std::find(ranges.begin(), ranges.end(), r) == ranges.end()) ranges.push_back(r);
    }
    int64_t most = 0;
    for (const Range& t : ranges) {  // a thread at the start of each range
      int64_t bytes = 0;
      for (size_t i = 0; i < count; ++i) {
        auto it = range_of_.find(arrays_[i].buffer);
        Range r = it == range_of_.end() ? Range{0, threads_} : it->second;
        if (r.first <= t.first && t.first < r.second) bytes += arrays_[i].bytes;
      }
      most = std::max(most, bytes);
    }
    return most;
  }

  const Target& target_;
  int64_t limit_;
  // WebGPU's limit is WGSL's for function-scope variables; CUDA's is the compile time of
  // fully unrolled per-thread arrays.
  std::string prefix_, what_;
  const VarNode* thread_ = nullptr;
  int64_t threads_ = 1;
  Range current_{0, 1};
  std::vector<Array> arrays_;
  std::unordered_map<const BufferNode*, Range> range_of_;
};

}  // namespace

int64_t per_thread_array_bytes(const KernelNode& k) {
  struct Sum : IRVisitor {
    int64_t bytes = 0;
    void visit_allocate(const AllocateNode* n) override {
      int64_t count = n->buffer->const_size();
      if (n->buffer->scope == scope::kLocal && count > 0) bytes += count * std::max(1, n->buffer->dtype.bytes());
      IRVisitor::visit_allocate(n);
    }
  } sum;
  sum.visit(k.body);
  return sum.bytes;
}

PrimFunc check_thread_budget(const PrimFunc& f, const Target& target) {
  Budget b(target);
  b.visit(f->body);
  return with_report(f, b.report);
}

}  // namespace tl
