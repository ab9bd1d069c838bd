#include "transform/check_cluster.h"

#include "ir/error.h"
#include "ir/functor.h"
#include "op/region.h"

namespace tl {
namespace {

bool is_cluster_call(const std::string& op) {
  return op == "block_rank_in_cluster" || op == "cluster_arrive" || op == "cluster_arrive_relaxed" ||
         op == "cluster_wait" || op == "cluster_sync" || op == "mbarrier_arrive_remote";
}

class CheckCluster : public IRVisitor {
 public:
  explicit CheckCluster(const Target& t) : t_(t) {}
  using IRVisitor::visit;

 protected:
  void visit_kernel(const KernelNode* k) override {
    kernel_ = k;
    if (!k->cluster.empty()) {
      if (t_.kind != "cuda" || t_.arch_number() < 90)
        fail(ErrorKind::Unsupported, k->span,
             "thread-block clusters (cluster_dims) need CUDA sm_90 or newer; the target is " + target_text(),
             "launch without clusters (leave cluster_dims out) on this target");
      for (size_t d = 0; d < 3; ++d) {
        if (k->cluster[d] == 1) continue;
        if (d >= k->grid.size())
          fail(ErrorKind::Shape, k->span,
               std::string("cluster_dims has ") + std::to_string(k->cluster[d]) + " blocks along " + "xyz"[d] +
                   " but the grid has no dimension " + "xyz"[d],
               "give the cluster's extent along a grid dimension the kernel has");
        const int64_t* g = const_int(k->grid[d]);
        if (g && *g % k->cluster[d] != 0)
          fail(ErrorKind::Shape, k->span,
               std::string("the grid's extent along ") + "xyz"[d] + " (" + std::to_string(*g) +
                   ") is not a multiple of cluster_dims along " + "xyz"[d] + " (" + std::to_string(k->cluster[d]) +
                   ")",
               "round the grid up to a multiple of the cluster (the extra blocks must then skip their work), "
               "or pick a cluster shape that divides it");
      }
    }
    IRVisitor::visit_kernel(k);
    kernel_ = nullptr;
  }

  void visit_tile_op(const TileOpNode* n) override {
    if (n->attrs.count("cluster_mask")) {
      int64_t mask = attr_int(*n, "cluster_mask", 0);
      std::string name = attr_int(*n, "by_hand", 0) ? "T.tma_copy" : "T.copy_cluster";
      if (!kernel_ || kernel_->cluster.empty())
        fail(ErrorKind::Unsupported, n->span,
             name + "(cluster_mask=...) multicasts to the blocks of a thread-block cluster, and this kernel has none",
             "launch with clusters: T.Kernel(..., cluster_dims=2)");
      int64_t blocks = kernel_->cluster_size();
      if (mask >> blocks)
        fail(ErrorKind::Shape, n->span,
             name + ": cluster_mask " + std::to_string(mask) + " names blocks past the cluster's " +
                 std::to_string(blocks),
             "the mask's bits are the ranks 0.." + std::to_string(blocks - 1) + " of T.block_rank_in_cluster()");
    }
    IRVisitor::visit_tile_op(n);
  }

  void visit_call(const CallNode* n) override {
    if (is_cluster_call(n->op) && (t_.kind != "cuda" || t_.arch_number() < 90))
      fail(ErrorKind::Unsupported, n->span,
           "T." + std::string(n->op == "mbarrier_arrive_remote" ? "mbarrier_arrive(..., cta_id)" : n->op) +
               " needs CUDA sm_90 or newer (thread-block clusters); the target is " + target_text(),
           "compile for cuda -arch=sm_90a, or leave the cluster out");
    IRVisitor::visit_call(n);
  }

 private:
  std::string target_text() const { return t_.kind + (t_.arch.empty() || t_.kind != "cuda" ? "" : " " + t_.arch); }

  const Target& t_;
  const KernelNode* kernel_ = nullptr;
};

}  // namespace

PrimFunc check_cluster(const PrimFunc& f, const Target& target) {
  CheckCluster c(target);
  c.visit(f->body);
  return f;
}

}  // namespace tl
