#include "transform/layout_inference.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/alias.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "op/copy_tma.h"
#include "op/gemm.h"
#include "op/region.h"

namespace tl {
namespace {

std::vector<int64_t> constant_shape(const Buffer& b, Span span) {
  std::vector<int64_t> out;
  for (auto& e : b->shape) {
    const int64_t* v = const_int(e);
    if (!v)
      fail(ErrorKind::Unsupported, span,
           "fragment '" + b->name + "' has a symbolic shape; fragments need constant shapes on GPU targets",
           "size fragments with Python constants (tile sizes)");
    out.push_back(*v);
  }
  return out;
}

// A layout decided for a buffer, with the line that decided it (for conflict messages).
struct Decision {
  TilePartition layout;
  Span span;
  bool derived;  // from rules 1-2, not the default
};

// The threads each fragment and each T.gemm belong to: those of the `with T.ws(...)`
// region (`if thread_range(lo, hi)`) around their uses, else the whole block. A fragment is
// spread over its region's threads; one used in two regions is an error.
class RegionThreads : public IRVisitor {
 public:
  explicit RegionThreads(int64_t block) : block_(block), range_{0, block} {}
  std::unordered_map<const BufferNode*, std::pair<std::pair<int64_t, int64_t>, Span>> fragments;
  std::unordered_map<const TileOpNode*, int64_t> gemm_threads;
  using IRVisitor::visit;

  int64_t threads_of(const BufferNode* b) const {
    auto it = fragments.find(b);
    return it == fragments.end() ? block_ : it->second.first.second - it->second.first.first;
  }

 protected:
  void visit_if(const IfThenElseNode* n) override {
    auto* c = as<CallNode>(n->cond);
    if (!c || c->op != "thread_range") return IRVisitor::visit_if(n);
    auto saved = range_;
    range_ = {*const_int(c->args[0]), *const_int(c->args[1])};
    visit(n->then_case);
    range_ = saved;
  }
  void visit_tile_op(const TileOpNode* n) override {
    if (n->op == "gemm") gemm_threads[n] = range_.second - range_.first;
    if (n->op != "annotate_layout")
      for (auto& r : n->regions) note(r.buffer.get(), n->span);
    IRVisitor::visit_tile_op(n);
  }
  void visit_load(const BufferLoadNode* n) override {
    note(n->buffer.get(), n->span);
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    note(n->buffer.get(), n->span);
    IRVisitor::visit_store(n);
  }

 private:
  void note(const BufferNode* b, Span span) {
    if (b->scope != scope::kFragment) return;
    auto [it, fresh] = fragments.insert({b, {range_, span}});
    if (fresh || it->second.first == range_) return;
    auto text = [&](std::pair<int64_t, int64_t> r) {
      return r.first == 0 && r.second == block_ ? std::string("the whole block")
                                                : "threads [" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
    };
    fail(ErrorKind::Layout, span,
         "fragment '" + b->name + "' is used by " + text(range_) + " here and by " + text(it->second.first) + " at " +
             it->second.second.str() + ": a fragment is spread over the threads of one T.ws region",
         "give each T.ws region its own fragments, and pass values between regions through shared memory");
  }
  int64_t block_;
  std::pair<int64_t, int64_t> range_;
};

class LayoutInference : public IRVisitor {
 public:
  LayoutInference(const KernelNode& k, const Target& target)
      : target_(target), regions_(k.num_threads()) {}

  KernelLayouts run(const KernelNode& k) {
    aliases_ = collect_storage_aliases(k.body);
    regions_.visit(k.body);
    visit(k.body);  // collects fragments, gives rank >= 2 ones their default
    // Strict demands first: instruction layouts, which everything else then follows.
    choose_instructions();
    strict_ = true;
    visit(k.body);
    decide_scalar_accessed();
    strict_ = false;
    derive_ = true;
    // Derivations from reductions, copies and loops, repeated until nothing changes (a
    // copy may come before the reduction that decides its source, e.g. in a loop).
    for (int round = 0; round < 8; ++round) {
      changed_ = false;
      visit(k.body);
      if (!changed_) break;
    }
    KernelLayouts out;
    for (auto& [buf, spec] : fragments_) {
      auto it = decided_.find(buf);
      out.fragments.emplace(buf, it != decided_.end()
                                     ? it->second.layout
                                     : TilePartition::grid(spec.shape, regions_.threads_of(buf), spec.elem_bytes));
    }
    // Every name of a swizzled tile's storage is stored alike (refuse_swizzle_of_aliased
    // admitted only names for which that is the same permutation).
    std::vector<std::pair<const BufferNode*, SharedSwizzle>> swizzles(swizzled_.begin(), swizzled_.end());
    for (auto& [node, swz] : swizzles) {
      for (auto& [data, names] : aliases_.by_storage) {
        bool here = false;
        for (auto& nm : names) here = here || nm.get() == node;
        if (!here) continue;
        for (auto& nm : names) {
          auto [it, fresh] = swizzled_.emplace(nm.get(), swz);
          if (!fresh && !(it->second == swz))
            fail(ErrorKind::Unsupported, nm->span,
                 "the shared tile '" + nm->name + "' is needed in two swizzles through its T.reshape / T.view names",
                 "give the operators tiles of their own (T.copy between them)");
        }
      }
    }
    // T.reshape views of fragments: the source's layout with the view's shape.
    struct Views : IRVisitor {
      std::unordered_map<const BufferNode*, Buffer> found;
      void note(const Buffer& b) {
        if (b->is_view && b->is_fragment()) found.emplace(b.get(), b);
      }
      void visit_load(const BufferLoadNode* n) override { note(n->buffer); IRVisitor::visit_load(n); }
      void visit_store(const BufferStoreNode* n) override { note(n->buffer); IRVisitor::visit_store(n); }
      void visit_tile_op(const TileOpNode* n) override {
        for (auto& r : n->regions) note(r.buffer);
        IRVisitor::visit_tile_op(n);
      }
    } views;
    views.visit(k.body);
    for (auto& [node, view] : views.found) {
      Buffer src = view_source(view);
      if (!src || !out.fragments.count(src.get()))
        fail(ErrorKind::Internal, view->span, "internal: the fragment under the T.reshape '" + view->name + "' is unknown");
      out.fragments.emplace(node, out.fragments.at(src.get()).with_leading_dims(constant_shape(view, view->span)));
    }
    out.swizzled = std::move(swizzled_);
    out.gemms = std::move(gemms_);
    out.tma_stores = std::move(tma_stores_);
    return out;
  }

 protected:
  using IRVisitor::visit;

  void visit_allocate(const AllocateNode* n) override {
    if (n->buffer->is_fragment() && n->buffer->data) fragment_of_data_[n->buffer->data.get()] = n->buffer;
    if (!derive_ && n->buffer->is_fragment()) {
      auto shape = constant_shape(n->buffer, n->span);
      fragments_[n->buffer.get()] = {shape, n->buffer->dtype.bytes()};
      if (shape.size() >= 2)
        decided_.insert({n->buffer.get(), {TilePartition::grid(shape, regions_.threads_of(n->buffer.get()),
                                                                 n->buffer->dtype.bytes()),
                                           n->span, false}});
    }
    IRVisitor::visit_allocate(n);
  }

  // The fragment a T.reshape of a fragment is over (null for other buffers): its layout is
  // the source's, seen with the view's leading dimensions.
  Buffer view_source(const Buffer& b) const {
    if (!b->is_view || !b->is_fragment() || !b->data) return nullptr;
    auto it = fragment_of_data_.find(b->data.get());
    return it == fragment_of_data_.end() ? nullptr : it->second;
  }

  void decide(const Buffer& b, const TilePartition& layout, Span span) {
    if (Buffer src = view_source(b)) return decide(src, layout.with_leading_dims(constant_shape(src, span)), span);
    auto it = decided_.find(b.get());
    if (it == decided_.end() || !it->second.derived) {
      decided_.insert_or_assign(b.get(), Decision{layout, span, true});
      changed_ = true;
      return;
    }
    if (it->second.layout == layout) return;
    fail(ErrorKind::Layout, span,
         "conflicting layouts for fragment '" + b->name + "': " + it->second.layout.str() + " (required at " +
             it->second.span.str() + ") and " + layout.str() + " (required here)",
         "use separate fragments for the two uses, or copy between them through shared memory");
  }

  const TilePartition* layout_of(const Buffer& b) {
    if (Buffer src = view_source(b)) {
      const TilePartition* l = layout_of(src);
      if (!l) return nullptr;
      return &view_layouts_.insert_or_assign(b.get(), l->with_leading_dims(constant_shape(b, b->span))).first->second;
    }
    auto it = decided_.find(b.get());
    return it == decided_.end() ? nullptr : &it->second.layout;
  }

  // A swizzled layout permutes a tile's elements; a T.reshape / T.view of it (or the tile a
  // view is over) would index the unpermuted order, so such storage stays row-major, and
  // where an operator needs the swizzle that is an error at its line.
  //
  // Except where every name keeps the columns and dtype and has rows in multiples of 8 (a
  // (16, 32, 32) tile and its (512, 32) reshape): an in-place swizzle permutes within rows
  // by the row's index modulo 8, which is then the same under every name, so all the
  // names are stored swizzled alike.
  void refuse_swizzle_of_aliased(const Buffer& b, Span span, const std::string& what,
                                 const SharedSwizzle* want = nullptr) {
    if (!aliases_.aliased(b)) return;
    if (want && !want->panelled(*const_int(b->shape.back())) && aliases_share_rows(b)) return;
    std::string others;
    for (auto& o : aliases_.others(b)) others += (others.empty() ? "'" : ", '") + o->name + "'";
    fail(ErrorKind::Unsupported, span,
         what + " needs the shared tile '" + b->name + "' in a swizzled layout, but its storage is also reached as " +
             others + " (T.reshape / T.view), which would read it unswizzled",
         "give the operator a tile of its own (T.copy into it), or reshape a copy of the tile");
  }

  bool aliases_share_rows(const Buffer& b) const {
    std::vector<Buffer> all = aliases_.others(b);
    all.push_back(b);
    for (auto& a : all) {
      if (a->shape.size() < 2 || a->dtype != b->dtype) return false;
      const int64_t *cols = const_int(a->shape.back()), *rows = const_int(a->shape[a->shape.size() - 2]);
      if (!cols || !rows || *cols != *const_int(b->shape.back()) || *rows % 8 != 0) return false;
    }
    return true;
  }

  // A T.Fragment by hand: attr "digits" holds each axis's digits, most significant first,
  // as extent:t:stride (thread) or extent:l:stride (slot), axes separated by ';', then '|'
  // and the copies' thread digits as extent:stride (python/tilelang/layout/maps.py).
  TilePartition given_fragment(const TileOpNode& n) {
    const Buffer& b = n.regions[0].buffer;
    std::string text = attr_str(n, "digits", "");
    auto numbers = [&](const std::string& part) {
      std::vector<std::string> out;
      size_t start = 0;
      for (size_t k = 0; k <= part.size(); ++k)
        if (k == part.size() || part[k] == ':') {
          out.push_back(part.substr(start, k - start));
          start = k + 1;
        }
      return out;
    };
    auto split = [](const std::string& s, char sep) {
      std::vector<std::string> out;
      size_t start = 0;
      for (size_t k = 0; k <= s.size(); ++k)
        if (k == s.size() || s[k] == sep) {
          if (k > start) out.push_back(s.substr(start, k - start));
          start = k + 1;
        }
      return out;
    };
    size_t bar = text.find('|');
    std::vector<TilePartition::Axis> axes;
    std::vector<TilePartition::Digit> replicas;
    int count = 0;
    try {
      for (auto& axis_text : split(text.substr(0, bar), ';')) {
        TilePartition::Axis axis{1, {}};
        for (auto& digit : split(axis_text, ',')) {
          auto f = numbers(digit);
          if (f.size() != 3 || (f[1] != "t" && f[1] != "l")) throw std::invalid_argument(digit);
          TilePartition::Digit d{"u" + std::to_string(count++), std::stoll(f[0]), f[1] == "t", std::stoll(f[2])};
          axis.extent *= d.extent;
          axis.digits.push_back(d);
        }
        axes.push_back(axis);
      }
      if (bar != std::string::npos)
        for (auto& digit : split(text.substr(bar + 1), ',')) {
          auto f = numbers(digit);
          if (f.size() != 2) throw std::invalid_argument(digit);
          replicas.push_back(TilePartition::Digit{"copy" + std::to_string(count++), std::stoll(f[0]), true, std::stoll(f[1])});
        }
    } catch (const std::exception&) {
      fail(ErrorKind::Internal, n.span, "internal: malformed digits of a T.Fragment: '" + text + "'");
    }
    std::string why;
    TilePartition p = TilePartition::given(constant_shape(b, n.span), regions_.threads_of(b.get()), axes, replicas, why);
    if (!why.empty())
      fail(ErrorKind::Layout, n.span, "T.annotate_layout: the T.Fragment for '" + b->name + "' cannot be used: " + why,
           "give every element one thread and slot, threads and slots numbered densely from 0");
    return p;
  }

  // T.gemm's instruction fixes the accumulator's layout (and a register A operand's) and
  // how shared operands are stored.
  void gemm_demands(const TileOpNode* n) {
    const GemmInstruction& ins = gemms_.at(n);
    bool wgmma = ins.kind == GemmInstruction::Kind::Wgmma;
    bool amd = ins.kind == GemmInstruction::Kind::Mfma || ins.kind == GemmInstruction::Kind::Wmma;
    if (ins.kind != GemmInstruction::Kind::MmaSync && !wgmma && !amd) return;
    const Buffer& C = n->regions[2].buffer;
    auto shape = constant_shape(C, n->span);
    auto accumulator = [&](int64_t m, int64_t cols, int64_t wn) {
      // MFMA computes the transposed product (op/gemm_mfma.cc), WMMA the product as written.
      if (amd) return TilePartition::amd_accumulator(m, cols, ins.warps_m, wn, ins.amd, !ins.amd.wmma);
      return wgmma ? TilePartition::wgmma_accumulator(m, cols, ins.warps_m, wn)
                   : TilePartition::mma_accumulator(m, cols, ins.warps_m, wn);
    };
    decide(C, accumulator(shape[0], shape[1], ins.warps_n), n->span);
    for (int k = 0; k < 2; ++k) {
      const Buffer& b = n->regions[k].buffer;
      if (b->is_fragment()) {
        // A in registers is the accumulator layout of an M x K product on the same warps.
        auto a_shape = constant_shape(b, n->span);
        decide(b, accumulator(a_shape[0], a_shape[1], 1), n->span);
        continue;
      }
      const int64_t* cols = const_int(b->shape.back());
      SwizzleMode mode = cols ? pick_swizzle_mode(*cols, b->dtype.bits) : SwizzleMode::None;
      if (mode == SwizzleMode::None) continue;
      // wgmma reads the canonical layout of its descriptors (panels one swizzle wide); it
      // serves ldmatrix as well, so it wins over an mma.sync gemm's in-place swizzle.
      SharedSwizzle want{mode, wgmma ? swizzle_width_bytes(mode) * 8 / b->dtype.bits : 0};
      refuse_swizzle_of_aliased(b, n->span, "T.gemm", &want);
      auto it = swizzled_.find(b.get());
      if (it == swizzled_.end() || wgmma) swizzled_[b.get()] = want;
    }
  }

  // Chooses every T.gemm's instruction. A fragment feeding a gemm's A operand must hold
  // whole rows per warp (warpgroup, wavefront), and so must every accumulator it is copied
  // from: those gemms run with all warps along M, and all on one instruction family and
  // shape, whose layouts agree. When they cannot all have wgmma they all take mma.sync (on
  // hip: when they differ in MFMA shape they all take 16 x 16); when any of them cannot use
  // the tensor cores, all gemms of the kernel take the SIMT path.
  void choose_instructions() {
    std::unordered_set<const BufferNode*> row_owned;
    for (auto* g : gemm_ops_)
      if (g->regions[0].buffer->is_fragment()) row_owned.insert(g->regions[0].buffer.get());
    for (bool grew = true; grew;) {
      grew = false;
      for (auto& [src, dst] : fragment_copies_)
        if (row_owned.count(dst) && row_owned.insert(src).second) grew = true;
    }
    auto shares = [&](const TileOpNode* g) {
      return row_owned.count(g->regions[2].buffer.get()) > 0 || g->regions[0].buffer->is_fragment() ||
             g->regions[1].buffer->is_fragment();
    };
    for (bool allow_wgmma : {true, false}) {
      bool all_tensor_cores = true;
      std::set<std::pair<int, int64_t>> families;  // (kind, MFMA/WMMA shape) of the sharing gemms
      for (auto* g : gemm_ops_) {
        bool full_row = row_owned.count(g->regions[2].buffer.get()) > 0;
        GemmInstruction ins = choose_gemm_instruction(*g, target_, regions_.gemm_threads.at(g), full_row, allow_wgmma);
        if (shares(g)) {
          families.insert({int(ins.kind), ins.amd.m});
          all_tensor_cores = all_tensor_cores && ins.kind != GemmInstruction::Kind::Simt;
        }
        gemms_[g] = ins;
      }
      if (!all_tensor_cores) break;
      // Sharing gemms on two families (shapes): try them all on mma.sync (16 x 16).
      if (families.size() <= 1 || !allow_wgmma) return;
    }
    for (auto& [g, ins] : gemms_) {
      if (ins.kind == GemmInstruction::Kind::Simt) continue;
      std::string slower = ins.why_not_faster;
      ins = GemmInstruction{};
      ins.why_simt = "another T.gemm of this kernel shares fragments with it and runs on the SIMT path";
      ins.why_not_faster = slower;
    }
  }

  void visit_tile_op(const TileOpNode* n) override {
    if (!derive_ && !strict_) {
      if (n->op == "gemm" && n->regions.size() == 3) gemm_ops_.push_back(n);
      if (n->op == "annotate_layout" && n->regions.size() == 1) annotated_.insert(n->regions[0].buffer.get());
      if (n->op == "copy" && n->regions.size() == 2 && n->regions[0].buffer->is_fragment() &&
          n->regions[1].buffer->is_fragment())
        fragment_copies_.push_back({n->regions[0].buffer.get(), n->regions[1].buffer.get()});
    }
    if (strict_ && n->op == "gemm" && n->regions.size() == 3) gemm_demands(n);
    // A TMA destination is stored as TMA writes boxes: panels one swizzle width wide (a
    // single row: plain, one box).
    if (strict_ && n->op == "copy" && n->regions.size() == 2 && attr_int(*n, "tma", 0) && !tma_moves_one_row(*n)) {
      const Buffer& b = n->regions[1].buffer;
      SwizzleMode mode = pick_swizzle_mode(*const_int(b->shape.back()), b->dtype.bits);
      SharedSwizzle want{mode, swizzle_width_bytes(mode) * 8 / b->dtype.bits};
      if (mode != SwizzleMode::None) refuse_swizzle_of_aliased(b, n->span, "a TMA load", &want);
      if (mode != SwizzleMode::None) swizzled_[b.get()] = want;
    }
    // A shared tile stored to global memory by TMA: panels one swizzle width wide, each a
    // box (a tile that is also a gemm operand or has a layout by hand keeps its stores).
    // T.tma_copy's stores (by hand) must be TMA stores: where they cannot, the reason.
    bool by_hand_store = strict_ && n->op == "copy" && attr_int(*n, "tma_store", 0);
    if (by_hand_store)
      if (std::string why = why_not_tma_store(*n, target_); !why.empty())
        fail(ErrorKind::Unsupported, n->span, "T.tma_copy: " + why, "use T.copy, which picks a mechanism that can take it");
    if (by_hand_store && n->regions.size() == 2) refuse_swizzle_of_aliased(n->regions[0].buffer, n->span, "T.tma_copy");
    // A tile with a T.reshape / T.view is stored by the threads, row-major.
    // T.atomic_add(G, S, use_tma=True) likewise (a TMA reduction).
    bool tma_reduction = n->op == "atomic_add" && attr_int(*n, "use_tma", 0);
    if (strict_ && (n->op == "copy" || tma_reduction) && n->regions.size() == 2 &&
        tma_store_regions(*n).first->buffer->is_shared() && tma_store_regions(*n).second->buffer->is_global() &&
        !aliases_.aliased(tma_store_regions(*n).first->buffer) && why_not_tma_store(*n, target_).empty()) {
      const Buffer& b = tma_store_regions(*n).first->buffer;
      bool claimed = annotated_.count(b.get()) > 0;
      for (auto* g : gemm_ops_) claimed = claimed || g->regions[0].buffer == b || g->regions[1].buffer == b;
      SwizzleMode mode = pick_swizzle_mode(*const_int(b->shape.back()), b->dtype.bits);
      SharedSwizzle want{mode, swizzle_width_bytes(mode) * 8 / b->dtype.bits};
      auto it = swizzled_.find(b.get());
      if (!claimed && mode != SwizzleMode::None && (it == swizzled_.end() || it->second == want)) {
        swizzled_[b.get()] = want;
        tma_stores_.insert(n);
      } else if (by_hand_store) {
        fail(ErrorKind::Unsupported, n->span,
             "T.tma_copy: " + b->name + " is stored in a layout the TMA store cannot read (" +
                 (claimed ? "a T.gemm operand or a layout given by hand" : "another TMA copy's swizzle") + ")",
             "store a tile of its own by T.tma_copy, or use T.copy");
      }
    }
    if (strict_ && n->op == "annotate_layout" && n->regions.size() == 1 && attr_str(*n, "layout", "") == "fragment")
      decide(n->regions[0].buffer, given_fragment(*n), n->span);
    if (strict_ && n->op == "annotate_layout" && n->regions.size() == 1 && attr_str(*n, "layout", "") == "swizzled") {
      const Buffer& b = n->regions[0].buffer;
      SharedSwizzle want{pick_swizzle_mode(*const_int(b->shape.back()), b->dtype.bits), 0};  // checked
      refuse_swizzle_of_aliased(b, n->span, "T.annotate_layout", &want);
      if (!swizzled_.count(b.get())) swizzled_[b.get()] = want;
    }
    if (derive_ && n->op == "reduce" && n->regions.size() == 2) {
      const Buffer &src = n->regions[0].buffer, &dst = n->regions[1].buffer;
      const TilePartition* from = layout_of(src);
      auto dim_it = n->attrs.find("dim");
      if (from && dst->is_fragment() && from->is_2d() && dim_it != n->attrs.end() &&
          std::holds_alternative<int64_t>(dim_it->second)) {
        int64_t dim = std::get<int64_t>(dim_it->second);
        int64_t rank = int64_t(src->shape.size());
        auto shape = constant_shape(dst, n->span);
        if (dim == rank - 1) decide(dst, from->row_replicated(shape), n->span);
        else if (dim == 0 && rank == 2) decide(dst, from->col_replicated(shape), n->span);
      }
      // Reducing a whole rank-1 tile: every thread ends up with the result.
      if (dst->is_fragment() && src->is_fragment() && src->shape.size() == 1)
        decide(dst, TilePartition::broadcast(constant_shape(dst, n->span), regions_.threads_of(dst.get())), n->span);
    }
    // A copy between fragments of one shape: the unknown side follows the known one.
    if (derive_ && n->op == "copy" && n->regions.size() == 2) {
      const Buffer &src = n->regions[0].buffer, &dst = n->regions[1].buffer;
      if (src->is_fragment() && dst->is_fragment() && structurally_same_shape(src, dst)) {
        auto s_it = decided_.find(src.get()), d_it = decided_.find(dst.get());
        bool s_derived = s_it != decided_.end() && s_it->second.derived;
        bool d_derived = d_it != decided_.end() && d_it->second.derived;
        // The destination follows the source also when both have defaults: defaults depend
        // on the element size, and a cast copy (float32 -> float16) must not move elements.
        if (s_it != decided_.end() && !d_derived) decide(dst, s_it->second.layout, n->span);
        else if (d_derived && !s_derived) decide(src, d_it->second.layout, n->span);
      }
    }
    IRVisitor::visit_tile_op(n);
  }

  // Fragments read or written by a statement outside T.Parallel loops: every thread runs
  // that statement, so every thread holds every element (upstream's `lse[0] = ...`).
  void visit_load(const BufferLoadNode* n) override {
    note_scalar_access(n->buffer, n->span);
    IRVisitor::visit_load(n);
  }
  void visit_store(const BufferStoreNode* n) override {
    note_scalar_access(n->buffer, n->span);
    IRVisitor::visit_store(n);
  }
  void note_scalar_access(const Buffer& b, Span span) {
    if (!derive_ && !strict_ && parallel_depth_ == 0 && b->is_fragment()) scalar_accessed_.emplace(b.get(), std::make_pair(b, span));
  }
  void decide_scalar_accessed() {
    for (auto& [node, use] : scalar_accessed_) {
      const Buffer& b = use.first;
      decide(b, TilePartition::broadcast(constant_shape(b, use.second), regions_.threads_of(node)), use.second);
    }
  }

  void visit_for(const ForNode* n) override {
    if (!derive_ && !strict_) {
      bool parallel = n->for_kind == ForKind::Parallel;
      parallel_depth_ += parallel;
      IRVisitor::visit_for(n);
      parallel_depth_ -= parallel;
      return;
    }
    if (!derive_ || n->for_kind != ForKind::Parallel) return IRVisitor::visit_for(n);
    // The nest's variables, outermost first.
    std::vector<const VarNode*> vars;
    const ForNode* f = n;
    Stmt body;
    while (true) {
      vars.push_back(f->var.get());
      auto* inner = as<ForNode>(f->body);
      if (!inner || inner->for_kind != ForKind::Parallel) {
        body = f->body;
        break;
      }
      f = inner;
    }
    // A 2-D fragment indexed by the loop variables themselves lends its layout to the
    // rank-1 fragments indexed by one of them.
    const TilePartition* driver = nullptr;
    std::vector<std::pair<Buffer, std::vector<Expr>>> accesses;
    for_each_expr(body, [&](const ExprNode* e) {
      if (auto* l = dynamic_cast<const BufferLoadNode*>(e))
        if (l->buffer->is_fragment()) accesses.push_back({l->buffer, l->indices});
    });
    collect_stores(body, accesses);
    auto var_at = [&](const Expr& e) -> int {
      auto* v = as<VarNode>(e);
      for (size_t k = 0; v && k < vars.size(); ++k)
        if (vars[k] == v) return int(k);
      return -1;
    };
    int driver_i = -1, driver_j = -1;
    bool driver_derived = false;
    for (auto& [buf, idx] : accesses) {
      auto it = decided_.find(buf.get());
      if (it == decided_.end() || idx.size() != 2) continue;
      const TilePartition* l = &it->second.layout;
      if (!l->is_2d() || l->replicas() != 1) continue;
      int a = var_at(idx[0]), b = var_at(idx[1]);
      // A derived layout (one a copy or reduction fixed) outranks a default.
      if (a >= 0 && b >= 0 && a != b && (!driver || (it->second.derived && !driver_derived))) {
        driver = l;
        driver_i = a;
        driver_j = b;
        driver_derived = it->second.derived;
      }
    }
    if (driver) {
      for (auto& [buf, idx] : accesses) {
        // Other fragments walked the same way follow the driver (their defaults may differ
        // only because their element sizes do).
        if (idx.size() == 2 && var_at(idx[0]) == driver_i && var_at(idx[1]) == driver_j) {
          auto it = decided_.find(buf.get());
          if (it != decided_.end() && !it->second.derived && !(it->second.layout == *driver) &&
              it->second.layout.shape() == driver->shape())
            decide(buf, *driver, n->span);
          continue;
        }
        if (idx.size() != 1 || decided_.count(buf.get())) continue;
        int k = var_at(idx[0]);
        auto shape = constant_shape(buf, n->span);
        if (k == driver_i) decide(buf, driver->row_replicated(shape), n->span);
        else if (k == driver_j) decide(buf, driver->col_replicated(shape), n->span);
      }
    } else if (vars.size() == 1) {
      // A 1-D loop over rank-1 fragments of one shape (`d[i] = d[i] + m[i]`): those without
      // a layout of their own follow the one a reduction or copy gave (as a copy's would).
      const TilePartition* known = nullptr;
      for (auto& [buf, idx] : accesses) {
        auto it = decided_.find(buf.get());
        if (idx.size() == 1 && var_at(idx[0]) == 0 && it != decided_.end() && it->second.derived) {
          known = &it->second.layout;
          break;
        }
      }
      if (known)
        for (auto& [buf, idx] : accesses)
          if (idx.size() == 1 && var_at(idx[0]) == 0 && !decided_.count(buf.get()) &&
              constant_shape(buf, n->span) == known->shape())
            decide(buf, *known, n->span);
    }
    IRVisitor::visit_for(n);
  }

 private:
  static void collect_stores(const Stmt& s, std::vector<std::pair<Buffer, std::vector<Expr>>>& out) {
    struct Stores : IRVisitor {
      std::vector<std::pair<Buffer, std::vector<Expr>>>* out;
      using IRVisitor::visit;
      void visit_store(const BufferStoreNode* n) override {
        if (n->buffer->is_fragment()) out->push_back({n->buffer, n->indices});
        IRVisitor::visit_store(n);
      }
    } v;
    v.out = &out;
    v.visit(s);
  }

  static bool structurally_same_shape(const Buffer& a, const Buffer& b) {
    if (a->shape.size() != b->shape.size()) return false;
    for (size_t d = 0; d < a->shape.size(); ++d) {
      const int64_t *x = const_int(a->shape[d]), *y = const_int(b->shape[d]);
      if (!x || !y || *x != *y) return false;
    }
    return true;
  }

  struct Spec {
    std::vector<int64_t> shape;
    int elem_bytes;
  };
  const Target& target_;
  RegionThreads regions_;  // the threads of each fragment and T.gemm (T.ws regions)
  bool strict_ = false;
  int parallel_depth_ = 0;
  // Fragments accessed outside T.Parallel, with the first such access (std::map: a fixed order).
  std::map<const BufferNode*, std::pair<Buffer, Span>> scalar_accessed_;
  std::vector<const TileOpNode*> gemm_ops_;
  std::vector<std::pair<const BufferNode*, const BufferNode*>> fragment_copies_;  // (src, dst)
  std::unordered_map<const BufferNode*, SharedSwizzle> swizzled_;
  StorageAliases aliases_;  // shared tiles also reached through T.reshape / T.view are never swizzled
  std::unordered_map<const TileOpNode*, GemmInstruction> gemms_;
  std::unordered_set<const TileOpNode*> tma_stores_;
  std::unordered_set<const BufferNode*> annotated_;  // shared buffers with T.annotate_layout
  bool derive_ = false;
  bool changed_ = false;
  std::unordered_map<const BufferNode*, Spec> fragments_;
  std::unordered_map<const BufferNode*, Decision> decided_;
  std::unordered_map<const VarNode*, Buffer> fragment_of_data_;  // allocated fragments by storage
  std::unordered_map<const BufferNode*, TilePartition> view_layouts_;  // layout_of of T.reshape views
};

}  // namespace

KernelLayouts infer_layouts(const KernelNode& kernel, const Target& target) {
  LayoutInference inference(kernel, target);
  return inference.run(kernel);
}

}  // namespace tl
