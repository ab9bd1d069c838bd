#include "transform/check_thread_budget.h"

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/pass.h"

namespace tl {
namespace {

class Budget : public IRVisitor {
 public:
  explicit Budget(const Target& target) : limit_(16 * 1024), cuda_(target.kind == "cuda") {}
  std::vector<std::string> report;
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* k) override {
    bytes_ = 0;
    IRVisitor::visit_kernel(k);
    if (cuda_ && bytes_ > 1020)
      report.push_back(k->span.str() + ": each thread holds " + std::to_string(bytes_) +
                       " bytes of arrays [slower path: more than the 255 registers (1020 bytes) a thread has; "
                       "the rest lives in local memory]");
  }
  void visit_allocate(const AllocateNode* n) override {
    const Buffer& b = n->buffer;
    if (b->scope == scope::kLocal) {
      int64_t elems = 1;
      bool known = true;
      for (auto& e : b->shape) {
        const int64_t* v = const_int(e);
        if (!v) known = false;
        else if (elems < (int64_t(1) << 40)) elems *= *v;
      }
      if (known) {
        bytes_ += elems * std::max(1, b->dtype.bytes());
        if (bytes_ > limit_)
          fail(ErrorKind::Unsupported, b->span,
               "each thread would hold " + std::to_string(bytes_) + " bytes of per-thread arrays ('" + b->name +
                   "' adds " + std::to_string(elems * std::max(1, b->dtype.bytes())) + "); the target allows " +
                   std::to_string(limit_),
               "use smaller tiles or more threads per block, or keep the data in shared or global memory");
      }
    }
    IRVisitor::visit_allocate(n);
  }

 private:
  int64_t limit_;
  bool cuda_;
  int64_t bytes_ = 0;
};

}  // namespace

PrimFunc check_thread_budget(const PrimFunc& f, const Target& target) {
  Budget b(target);
  b.visit(f->body);
  return with_report(f, b.report);
}

}  // namespace tl
