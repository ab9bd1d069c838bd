#include "transform/check_thread_budget.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

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
    bytes_ = 0;
    IRVisitor::visit_kernel(k);
    int64_t regs = target_.register_bytes(k->num_threads());
    if (regs && bytes_ > regs)
      report.push_back(k->span.str() + ": each thread holds " + std::to_string(bytes_) +
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
      if (known) {
        bytes_ += elems * std::max(1, b->dtype.bytes());
        if (bytes_ > limit_)
          fail(ErrorKind::Unsupported, b->span,
               prefix_ + "each thread would hold " + std::to_string(bytes_) + " bytes of per-thread arrays ('" +
                   b->name + "' adds " + std::to_string(elems * std::max(1, b->dtype.bytes())) + "); " + what_,
               "use smaller tiles or more threads per block, or keep the data in shared or global memory");
      }
    }
    IRVisitor::visit_allocate(n);
  }

 private:
  const Target& target_;
  int64_t limit_;
  // WebGPU's limit is WGSL's for function-scope variables; CUDA's is the compile time of
  // fully unrolled per-thread arrays.
  std::string prefix_, what_;
  int64_t bytes_ = 0;
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
