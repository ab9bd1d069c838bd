#include "transform/check_block_budget.h"

#include <algorithm>
#include <set>
#include <vector>

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/plan_shared_memory.h"

namespace tl {
namespace {

struct SharedItem {
  const AllocateNode* alloc;
  int64_t bytes;
};

std::string shape_text(const Buffer& b) {
  std::string s;
  for (size_t d = 0; d < b->shape.size(); ++d) {
    const int64_t* v = const_int(b->shape[d]);
    s += (d ? " x " : "") + (v ? std::to_string(*v) : std::string("?"));
  }
  return s;
}

class BlockBudget : public IRVisitor {
 public:
  explicit BlockBudget(const Target& t) : t_(t) {}
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* k) override {
    check_grid(k);
    if (t_.kind != "cpu") check_threads(k);  // on the CPU a block is one task, whatever its threads
    check_shared(k);
    IRVisitor::visit_kernel(k);
  }

 private:
  // WebGPU's errors say "not supported on webgpu" (the test suite reports those as what
  // the target cannot run); the limits of the others are the target's own.
  std::string prefix() const { return t_.kind == "webgpu" ? "not supported on webgpu: " : ""; }
  std::string who() const {
    if (t_.kind == "cuda") return t_.arch.empty() ? "CUDA" : t_.arch;
    if (t_.kind == "webgpu") return "the WebGPU adapter";
    return "target " + t_.kind;
  }

  void check_grid(const KernelNode* k) {
    for (size_t d = 0; d < k->grid.size() && d < 3; ++d) {
      const int64_t* g = const_int(k->grid[d]);
      if (g && *g > t_.max_grid[d])
        fail(ErrorKind::Unsupported, k->span,
             prefix() + "grid extent " + "xyz"[d] + " is " + std::to_string(*g) + " blocks; " + who() +
                 " allows at most " + std::to_string(t_.max_grid[d]) + " in that dimension",
             t_.max_grid[0] > t_.max_grid[d] ? "put the largest extent first (x allows " +
                                                   std::to_string(t_.max_grid[0]) + " blocks)"
                                             : "use larger tiles (fewer blocks), or loop inside each block");
    }
  }

  void check_threads(const KernelNode* k) {
    for (size_t d = 0; d < k->threads.size() && d < 3; ++d)
      if (k->threads[d] > t_.max_threads_per_dim[d])
        fail(ErrorKind::Unsupported, k->span,
             prefix() + "threads " + "xyz"[d] + " is " + std::to_string(k->threads[d]) + "; " + who() +
                 " allows at most " + std::to_string(t_.max_threads_per_dim[d]) + " in that dimension",
             "use fewer threads per block (threads=...) and more blocks");
    if (k->num_threads() > t_.max_threads_per_block)
      fail(ErrorKind::Unsupported, k->span,
           prefix() + std::to_string(k->num_threads()) + " threads per block; " + who() + " allows at most " +
               std::to_string(t_.max_threads_per_block),
           "use fewer threads per block (threads=...) and more blocks");
  }

  void check_shared(const KernelNode* k) {
    if (t_.max_shared_bytes <= 0 || t_.kind == "cpu") return;
    std::vector<SharedItem> items;
    int64_t total = 0;
    if (t_.kind == "cuda" || t_.kind == "hip") {  // the planned bytes, each type at its size
      SharedMemoryUse use = shared_memory_use(k);
      // A buffer both roles of a warp-specialised kernel use is allocated in each branch.
      std::set<const BufferNode*> seen;
      for (auto& b : use.buffers)
        if (seen.insert(b.alloc->buffer.get()).second) items.push_back({b.alloc, b.bytes});
      total = use.dyn_bytes + use.static_bytes;
    } else {
      // WebGPU: one workgroup array per shared buffer, of 32-bit words at least but for
      // float16 (codegen_wgsl).
      collect_shared(k->body, items);
      for (auto& it : items) total += it.bytes;
    }
    if (total <= t_.max_shared_bytes) return;
    std::string list;
    int64_t one_stage = 0, stages = 0;
    for (auto& it : items) {
      const Buffer& b = it.alloc->buffer;
      list += "\n    " + b->name + ": " + shape_text(b) + " " + b->dtype.str() + " = " + std::to_string(it.bytes) +
              " bytes";
      auto s = it.alloc->attrs.find("stages");
      if (s != it.alloc->attrs.end())
        if (auto* n = std::get_if<int64_t>(&s->second); n && *n > 1) {
          list += " (" + std::to_string(*n) + " pipeline stages)";
          one_stage += it.bytes / *n;
          stages = std::max(stages, *n);
        }
    }
    std::string hint = "use smaller tiles";
    if (stages > 1)
      hint = "use fewer pipeline stages (num_stages=" + std::to_string(stages - 1) + " saves " +
             std::to_string(one_stage) + " bytes) or smaller tiles";
    fail(ErrorKind::Unsupported, k->span,
         prefix() + "the kernel needs " + std::to_string(total) + " bytes of shared memory per block; " + who() +
             " allows at most " + std::to_string(t_.max_shared_bytes) + ". Its shared buffers:" + list,
         hint);
  }

  static void collect_shared(const Stmt& s, std::vector<SharedItem>& out) {
    struct Collect : IRVisitor {
      std::vector<SharedItem>* out;
      void visit_allocate(const AllocateNode* n) override {
        const Buffer& b = n->buffer;
        int64_t count = b->const_size();
        // float16 is an array<f16> (2 bytes an element); other narrow types widen to 32 bits.
        int64_t elem = b->dtype == DataType::Float(16) ? 2 : std::max(4, b->dtype.bytes());
        if (b->is_shared() && count >= 0) out->push_back({n, count * elem});
        IRVisitor::visit_allocate(n);
      }
    } c;
    c.out = &out;
    c.visit(s);
  }

  const Target& t_;
};

}  // namespace

PrimFunc check_block_budget(const PrimFunc& f, const Target& target) {
  BlockBudget b(target);
  b.visit(f->body);
  return f;
}

}  // namespace tl
