// The early half of layouts given by hand (T.annotate_layout with T.Layout): see
// apply_user_layouts.h. Refuses what would address the buffer without the layout and keeps
// its copies off TMA.
#include "ir/error.h"
#include "ir/functor.h"
#include "op/region.h"
#include "transform/apply_user_layouts.h"
#include "transform/pass.h"

namespace tl {
namespace {

class CheckUserLayouts : public IRMutator {
 public:
  CheckUserLayouts(const std::unordered_map<const VarNode*, UserLayout>& layouts, const Target& target)
      : layouts_(layouts), target_(target) {}

 protected:
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override {
    if (n->op == "annotate_layout") return s;
    const UserLayout* hit = nullptr;
    for (auto& r : n->regions)
      if (const UserLayout* L = layout_of(r.buffer, n->span)) hit = L;
    if (!hit) return IRMutator::mutate_tile_op(s, n);
    const std::string& name = hit->buffer->name;
    std::string why = "'" + name + "' has a layout by hand (T.annotate_layout with T.Layout)";
    if (n->op == "gemm" && target_.kind != "cpu")
      fail(ErrorKind::Layout, n->span,
           "T.gemm reads or writes '" + name + "', which has a layout by hand (T.annotate_layout with T.Layout); the "
               "tensor-core and SIMT paths address their operands in layouts the compiler chooses",
           "drop the annotation (the compiler swizzles gemm operands itself), or copy the tile into a buffer of its own");
    if (n->op == "copy" && attr_int(*n, "by_hand", 0))
      fail(ErrorKind::Layout, n->span,
           "T.tma_copy: " + why + "; a TMA box is stored row-major or in a hardware swizzle",
           "use T.copy, which the threads run through the layout");
    // Copies, and tile atomics that ask for a TMA reduction, stay off TMA, but for a global
    // tensor whose layout only reorders its dimensions (the tensor map takes that order).
    bool tma_reduction = n->op == "atomic_add" && attr_int(*n, "use_tma", 0);
    if ((n->op != "copy" && !tma_reduction) || n->attrs.count("no_tma")) return s;
    Attrs attrs = n->attrs;
    int with_layout = 0;
    for (auto& r : n->regions) with_layout += layout_of(r.buffer, n->span) != nullptr;
    std::vector<int> order = hit->buffer->is_global() && hit->buffer->strides.empty() && with_layout == 1
                                 ? dimension_order(*hit) : std::vector<int>{};
    if (!order.empty()) {
      std::string text;
      for (int d : order) text += (text.empty() ? "" : ",") + std::to_string(d);
      attrs["tma_order"] = text;
      return std::make_shared<TileOpNode>(n->op, n->regions, n->args, attrs, n->span);
    }
    attrs["no_tma"] = why;
    return std::make_shared<TileOpNode>(n->op, n->regions, n->args, attrs, n->span);
  }
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    layout_of(n->buffer, n->span);
    return IRMutator::mutate_load(e, n);
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    layout_of(n->buffer, n->span);
    return IRMutator::mutate_store(s, n);
  }

 private:
  // The layout of b's storage; a T.reshape / T.view of a buffer with one is an error.
  const UserLayout* layout_of(const Buffer& b, Span span) const {
    if (!b || !b->data) return nullptr;
    auto it = layouts_.find(b->data.get());
    if (it == layouts_.end()) return nullptr;
    if (it->second.buffer != b)
      fail(ErrorKind::Layout, span,
           "'" + b->name + "' is a T.reshape / T.view of '" + it->second.buffer->name +
               "', which has a layout by hand (T.annotate_layout with T.Layout); a view would see storage positions, "
               "not elements",
           "index '" + it->second.buffer->name + "' itself, or give the layout to a buffer without views");
    return &it->second;
  }

  const std::unordered_map<const VarNode*, UserLayout>& layouts_;
  const Target& target_;
};

}  // namespace

PrimFunc check_user_layouts(const PrimFunc& f, const Target& target) {
  auto layouts = user_layouts_of(f->body);
  if (layouts.empty()) return f;
  Stmt body = CheckUserLayouts(layouts, target).mutate(f->body);
  return body == f->body ? f : with_body(f, body);
}

}  // namespace tl
