#include "transform/apply_user_layouts.h"

#include <algorithm>
#include <unordered_set>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "layout/layout.h"
#include "op/region.h"
#include "transform/pass.h"

namespace tl {
namespace {

const char* const kWhat = "T.annotate_layout";

std::string to_str(const Expr& e) {
  if (const int64_t* c = const_int(e)) return std::to_string(*c);
  return to_string(e);
}

// The extent of a position: its values lie in [0, extent). Structural for +, * and // and %
// by positive constants (so a symbolic tensor's layout keeps symbolic extents), else from
// the analyzer's constant bounds; null when neither bounds it from below by 0 and above.
Expr extent_of(const Expr& e, const std::unordered_map<const VarNode*, Expr>& extents, arith::Analyzer& az) {
  if (auto* v = as<VarNode>(e)) {
    auto it = extents.find(v);
    if (it != extents.end()) return it->second;
  }
  if (auto* cst = as<CastNode>(e); cst && cst->dtype.is_int()) return extent_of(cst->value, extents, az);
  if (auto* b = as<BinaryNode>(e)) {
    const int64_t *ca = const_int(b->a), *cb = const_int(b->b);
    switch (b->op) {
      case BinaryOp::FloorDiv:
        if (cb && *cb > 0)
          if (Expr x = extent_of(b->a, extents, az)) return floordiv(add(x, make_int(*cb - 1)), make_int(*cb));
        break;
      case BinaryOp::FloorMod:
        if (cb && *cb > 0)
          if (Expr x = extent_of(b->a, extents, az)) {
            const int64_t* cx = const_int(x);
            return make_int(cx ? std::min(*cx, *cb) : *cb);
          }
        break;
      case BinaryOp::Add: {
        Expr x = extent_of(b->a, extents, az), y = extent_of(b->b, extents, az);
        if (x && y) return sub(add(x, y), make_int(1));
        break;
      }
      case BinaryOp::Mul:
        if ((ca && *ca > 0) || (cb && *cb > 0)) {
          int64_t k = ca && *ca > 0 ? *ca : *cb;
          if (Expr x = extent_of(ca && *ca > 0 ? b->b : b->a, extents, az))
            return add(mul(sub(x, make_int(1)), make_int(k)), make_int(1));
        }
        break;
      default:
        break;
    }
  }
  auto bound = az.const_int_bound(e);
  if (bound.min >= 0 && bound.max != arith::ConstIntBound::kPosInf) return make_int(bound.max + 1);
  return nullptr;
}

Expr product(const std::vector<Expr>& xs) {
  Expr p = make_int(1, DataType::Int(64));
  for (auto& x : xs) p = mul(p, cast(DataType::Int(64), x));
  return p;
}

// The widest run of consecutive elements looked for, in bytes: a 16-byte vector, or the 32
// bytes a converting copy reads for one 16-byte store (8 float32 into 8 float16).
constexpr int64_t kWidestRun = 32;

// The contiguous, aligned vector width of a layout too large to enumerate, proved by the
// analyzer: with the last index at w q + j (q over its range, the other indices over
// theirs), the storage position of lane j is lane 0's plus j, and lane 0's is a multiple
// of w. Injectivity is not checked at this size.
void vector_lanes_by_proof(UserLayout& L, const std::vector<int64_t>& shape, const std::vector<int64_t>& ext) {
  int bytes = L.buffer->dtype.is_sub_byte() ? 0 : L.buffer->dtype.bytes() * L.buffer->dtype.lanes;
  const VarNode* last = L.indices.back().get();
  std::vector<int64_t> stride(ext.size(), 1);  // of each position in the flat storage
  for (size_t k = ext.size(); k-- > 1;) stride[k - 1] = stride[k] * ext[k];
  for (int64_t w = bytes ? kWidestRun / bytes : 1; w >= 2; w /= 2) {
    if (shape.back() % w) continue;
    arith::Analyzer az;
    for (size_t d = 0; d + 1 < shape.size(); ++d) az.bind(L.indices[d].get(), 0, shape[d]);
    Var q = make_var("vector_index", L.indices.back()->dtype);
    az.bind(q.get(), 0, shape.back() / w);
    auto position = [&](size_t k, int64_t lane) {
      Expr at = add(mul(q, make_int(w, q->dtype)), make_int(lane, q->dtype));
      return substitute(L.positions[k], {{last, at}});
    };
    Expr first = make_int(0, DataType::Int(64));
    for (size_t k = 0; k < L.positions.size(); ++k)
      first = add(first, mul(cast(DataType::Int(64), position(k, 0)), make_int(stride[k], DataType::Int(64))));
    arith::ModularSet m = az.modular_set(az.simplify(first));
    bool ok = m.coeff % w == 0 && m.base % w == 0;
    // Lane j's position, dimension by dimension, minus lane 0's (small: no int64 needed).
    for (int64_t lane = 1; ok && lane < w; ++lane) {
      int64_t step = 0;
      for (size_t k = 0; ok && k < L.positions.size(); ++k) {
        Expr d = az.simplify(sub(position(k, lane), position(k, 0)));
        ok = const_int(d) != nullptr;
        if (ok) step += *const_int(d) * stride[k];
      }
      ok = ok && step == lane;
    }
    if (ok) {
      L.vector_lanes = w;
      return;
    }
  }
}

// Injectivity and the contiguous, aligned vector width, by enumeration of a constant tile.
void check_by_enumeration(UserLayout& L, const std::vector<int64_t>& shape, const std::vector<int64_t>& ext,
                          int64_t storage) {
  int64_t count = 1;
  for (int64_t e : shape) count *= e;
  if (count > (int64_t(1) << 20)) return vector_lanes_by_proof(L, shape, ext);  // too many to enumerate
  const std::string& name = L.buffer->name;
  std::vector<int64_t> flat(count), x(shape.size(), 0);
  IndexEnv env;
  for (int64_t n = 0; n < count; ++n) {
    for (size_t d = 0; d < shape.size(); ++d) env[L.indices[d].get()] = x[d];
    int64_t f = 0;
    for (size_t k = 0; k < L.positions.size(); ++k) {
      int64_t p = evaluate_index(L.positions[k], env);
      if (p < 0 || p >= ext[k]) {
        std::string at;
        for (size_t d = 0; d < x.size(); ++d) at += (d ? ", " : "") + std::to_string(x[d]);
        fail(ErrorKind::Layout, L.span,
             std::string(kWhat) + ": the layout of '" + name + "' puts element [" + at + "] at position " +
                 std::to_string(p) + " of dimension " + std::to_string(k) + ", outside [0, " + std::to_string(ext[k]) + ")",
             "every position must be a non-negative index below its extent");
      }
      f = f * ext[k] + p;
    }
    flat[n] = f;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (++x[d] < shape[d]) break;
      x[d] = 0;
    }
  }
  std::vector<int64_t> owner(storage, -1);
  for (int64_t n = 0; n < count; ++n) {
    if (owner[flat[n]] >= 0) {
      auto point = [&](int64_t i) {
        std::string s;
        for (int d = int(shape.size()) - 1; d >= 0; --d) {
          s = std::to_string(i % shape[d]) + (s.empty() ? "" : ", ") + s;
          i /= shape[d];
        }
        return "[" + s + "]";
      };
      fail(ErrorKind::Layout, L.span,
           std::string(kWhat) + ": the layout of '" + name + "' puts elements " + point(owner[flat[n]]) + " and " +
               point(n) + " at the same position",
           "a layout must give every element a position of its own");
    }
    owner[flat[n]] = n;
  }
  int bytes = L.buffer->dtype.is_sub_byte() ? 0 : L.buffer->dtype.bytes() * L.buffer->dtype.lanes;
  int64_t last = shape.back();
  for (int64_t w = bytes ? kWidestRun / bytes : 1; w >= 2; w /= 2) {
    if (last % w) continue;
    bool ok = true;
    for (int64_t n = 0; n < count && ok; n += w)
      for (int64_t k = 0; k < w && ok; ++k) ok = flat[n] % w == 0 && flat[n + k] == flat[n] + k;
    if (ok) {
      L.vector_lanes = w;
      return;
    }
  }
}

}  // namespace

bool is_user_layout(const TileOpNode& op) {
  return op.op == "annotate_layout" && attr_str(op, "layout", "") == "user";
}

UserLayout read_user_layout(const TileOpNode& op) {
  UserLayout L;
  L.span = op.span;
  int64_t rank = attr_int(op, "rank", -1);
  if (op.regions.size() != 1 || rank < 1 || int64_t(op.args.size()) <= rank)
    fail(ErrorKind::Internal, op.span, "internal: malformed T.annotate_layout with a layout by hand");
  L.buffer = op.regions[0].buffer;
  const std::string& name = L.buffer->name;
  int64_t lead = int64_t(L.buffer->shape.size()) - rank;
  if (lead < 0)
    fail(ErrorKind::Shape, op.span,
         std::string(kWhat) + ": the layout has " + std::to_string(rank) + " indices, '" + name + "' has " +
             std::to_string(L.buffer->shape.size()) + " dimensions",
         "build it as T.Layout(" + name + ".shape, fn)");
  for (int64_t d = 0; d < rank; ++d) {
    auto* v = as<VarNode>(op.args[d]);
    if (!v) fail(ErrorKind::Internal, op.span, "internal: T.annotate_layout's placeholder is not a variable");
    L.indices.push_back(std::static_pointer_cast<const VarNode>(op.args[d]));
  }
  L.positions.assign(op.args.begin() + rank, op.args.end());
  std::unordered_map<const VarNode*, Expr> extents;
  arith::Analyzer az;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    const Expr& e = L.buffer->shape[lead + d];
    extents[L.indices[d].get()] = e;
    if (const int64_t* c = const_int(e)) {
      shape.push_back(*c);
      az.bind(L.indices[d].get(), 0, *c);
    } else {
      az.bind(L.indices[d].get(), arith::ConstIntBound{0, arith::ConstIntBound::kPosInf});
    }
  }
  std::vector<int64_t> ext_const;
  for (size_t k = 0; k < L.positions.size(); ++k) {
    Expr x = extent_of(L.positions[k], extents, az);
    if (!x)
      fail(ErrorKind::Layout, op.span,
           std::string(kWhat) + ": position " + std::to_string(k) + " of the layout of '" + name + "' (" +
               to_str(L.positions[k]) + ") has no bound the compiler can derive",
           "write each position with +, * and // or % by positive constants of the indices");
    x = az.simplify(x);
    L.extents.push_back(x);
    if (const int64_t* c = const_int(x)) ext_const.push_back(*c);
  }
  std::vector<Expr> own(L.buffer->shape.begin() + lead, L.buffer->shape.end());
  Expr storage = az.simplify(product(L.extents)), size = az.simplify(product(own));
  const int64_t *cs = const_int(storage), *cz = const_int(size);
  bool fits = (cs && cz) ? *cs <= *cz : az.can_prove(binary(BinaryOp::LE, storage, size));
  if (!fits)
    fail(ErrorKind::Layout, op.span,
         std::string(kWhat) + ": the layout of '" + name + "' reaches " + to_str(storage) + " positions (extents " +
             [&] {
               std::string s;
               for (size_t k = 0; k < L.extents.size(); ++k) s += (k ? " x " : "") + to_str(L.extents[k]);
               return s;
             }() +
             "), " + (cs && cz ? "more than" : "not provably at most") + " the " + to_str(size) + " elements of '" +
             name + "'",
         cs && cz ? "the layout must map the buffer onto its own storage"
                  : "give the kernel constant extents here (the layout's // and % need them to bound the storage)");
  if (shape.size() == size_t(rank) && ext_const.size() == L.extents.size() && cs)
    check_by_enumeration(L, shape, ext_const, *cs);
  return L;
}

std::vector<int> dimension_order(const UserLayout& layout) {
  const size_t rank = layout.indices.size();
  if (layout.positions.size() != rank || layout.buffer->shape.size() != rank || rank == 0) return {};
  std::vector<int> order;
  for (const Expr& p : layout.positions) {
    auto* v = as<VarNode>(p);
    int found = -1;
    for (size_t k = 0; v && k < rank; ++k)
      if (layout.indices[k].get() == v) found = int(k);
    if (found < 0 || std::find(order.begin(), order.end(), found) != order.end()) return {};
    order.push_back(found);
  }
  if (order.back() != int(rank) - 1) return {};
  return order;
}

std::unordered_map<const VarNode*, UserLayout> user_layouts_of(const Stmt& s) {
  std::unordered_map<const VarNode*, UserLayout> found;
  struct Collect : IRVisitor {
    std::unordered_map<const VarNode*, UserLayout>* found;
    void visit_tile_op(const TileOpNode* n) override {
      if (is_user_layout(*n)) {
        UserLayout L = read_user_layout(*n);
        const VarNode* key = L.buffer->data.get();
        if (found->count(key))
          fail(ErrorKind::Layout, n->span,
               std::string(kWhat) + ": '" + L.buffer->name + "' already has a layout by hand",
               "annotate each buffer once");
        found->emplace(key, std::move(L));
      }
      IRVisitor::visit_tile_op(n);
    }
  } c;
  c.found = &found;
  c.visit(s);
  return found;
}

namespace {

class ApplyUserLayouts : public IRMutator {
 public:
  explicit ApplyUserLayouts(std::unordered_map<const VarNode*, UserLayout> layouts) : layouts_(std::move(layouts)) {}
  std::vector<std::string> report;

 protected:
  Stmt mutate_tile_op(const Stmt& s, const TileOpNode* n) override {
    if (is_user_layout(*n)) {
      const UserLayout& L = layouts_.at(n->regions[0].buffer->data.get());
      std::string ext;
      for (size_t k = 0; k < L.extents.size(); ++k) ext += (k ? " x " : "") + to_str(L.extents[k]);
      report.push_back(n->span.str() + ": '" + L.buffer->name + "' is stored through its T.Layout over " + ext +
                       " positions" +
                       (L.vector_lanes > 1 ? " (vectors of up to " + std::to_string(L.vector_lanes) + " elements)" : ""));
      return make_seq({}, n->span);
    }
    return IRMutator::mutate_tile_op(s, n);
  }
  Expr mutate_load(const Expr& e, const BufferLoadNode* n) override {
    Expr m = IRMutator::mutate_load(e, n);
    auto* l = as<BufferLoadNode>(m);
    const UserLayout* L = layout_of(l->buffer);
    if (!L) return m;
    return std::make_shared<BufferLoadNode>(l->dtype, storage_of(*L, l->buffer), place(*L, l->indices, l->span), l->span);
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    Stmt m = IRMutator::mutate_store(s, n);
    auto* st = as<BufferStoreNode>(m);
    const UserLayout* L = layout_of(st->buffer);
    if (!L) return m;
    return std::make_shared<BufferStoreNode>(storage_of(*L, st->buffer), st->value, place(*L, st->indices, st->span),
                                             st->span);
  }
  // A vector loop over such a buffer stays one only when the layout keeps its lanes
  // contiguous and aligned (vector_lanes); otherwise its lanes run one by one.
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Vectorized) return IRMutator::mutate_for(s, n);
    const UserLayout* L = touched(n->body);
    if (!L) return IRMutator::mutate_for(s, n);
    const int64_t* lanes = const_int(n->extent);
    const int64_t* first = const_int(n->min);
    bool keep = lanes && first && *first == 0 && *lanes <= L->vector_lanes && L->vector_lanes % *lanes == 0;
    if (keep) lanes_.push_back({n->var, *lanes});
    bool failed = lane_failed_;
    lane_failed_ = false;
    Stmt m = IRMutator::mutate_for(s, n);
    if (keep) lanes_.pop_back();
    keep = keep && !lane_failed_;
    lane_failed_ = failed;
    if (keep) return m;
    slower(*L, n->span, lanes ? std::to_string(*lanes) + "-element vectors" : "vector accesses");
    auto* f = as<ForNode>(m);
    return std::make_shared<ForNode>(f->var, f->min, f->extent, ForKind::Unrolled, f->body, f->attrs, f->span);
  }
  // cp.async of `bytes` from the first lane's addresses: kept when the layout keeps that many
  // elements together, else the same elements copied one by one (synchronously; the
  // pipeline's waits and barriers still order them).
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* n) override {
    auto* c = as<CallNode>(n->value);
    // A TMA copy names its tensor (a parameter) by its first element; the tensor map
    // carries the layout's dimension order (op/copy_tma.cc).
    if (c && (c->op == "tma_load" || c->op == "tma_load_multicast" || c->op == "tma_store" ||
              c->op == "tma_reduce_add"))
      return s;
    // (A fourth argument: whether the source is inside its tensor; zeros are copied if not.)
    if (!c || c->op != "cp_async" || c->args.size() < 3) return IRMutator::mutate_evaluate(s, n);
    auto *dst = as<BufferLoadNode>(c->args[0]), *src = as<BufferLoadNode>(c->args[1]);
    const int64_t* bytes = const_int(c->args[2]);
    if (!dst || !src || !bytes) return IRMutator::mutate_evaluate(s, n);
    const UserLayout* L = layout_of(dst->buffer);
    if (!L) L = layout_of(src->buffer);
    if (!L) return IRMutator::mutate_evaluate(s, n);
    int64_t lanes = *bytes / std::max(1, dst->buffer->dtype.bytes());
    bool keep = true;
    for (const BufferLoadNode* side : {dst, src})
      if (const UserLayout* l = layout_of(side->buffer))
        keep = keep && lanes <= l->vector_lanes && l->vector_lanes % lanes == 0;
    if (keep) return IRMutator::mutate_evaluate(s, n);
    slower(*L, n->span, std::to_string(*bytes) + "-byte cp.async copies");
    std::vector<Stmt> elements;
    for (int64_t k = 0; k < lanes; ++k) {
      auto at = [&](const BufferLoadNode* x) {
        std::vector<Expr> idx = x->indices;
        idx.back() = add(idx.back(), make_int(k, idx.back()->dtype), x->span);
        return idx;
      };
      Expr value = std::make_shared<BufferLoadNode>(src->dtype, src->buffer, at(src), src->span);
      if (c->args.size() == 4) value = select(c->args[3], value, cast(src->dtype, make_int(0), n->span), n->span);
      elements.push_back(mutate(Stmt(std::make_shared<BufferStoreNode>(dst->buffer, value, at(dst), n->span))));
    }
    return make_seq(elements, n->span);
  }

 private:
  const UserLayout* layout_of(const Buffer& b) const {
    if (!b || !b->data) return nullptr;
    auto it = layouts_.find(b->data.get());
    if (it == layouts_.end()) return nullptr;
    if (it->second.buffer != b)
      fail(ErrorKind::Internal, b->span, "internal: '" + b->name + "' shares storage with '" +
                                             it->second.buffer->name + "', which has a layout by hand");
    return &it->second;
  }
  const UserLayout* touched(const Stmt& s) const {
    const UserLayout* hit = nullptr;
    for_each_expr(s, [&](const ExprNode* e) {
      if (e->kind == ExprKind::BufferLoad && !hit) hit = layout_of(static_cast<const BufferLoadNode*>(e)->buffer);
    });
    struct Stores : IRVisitor {
      const ApplyUserLayouts* self;
      const UserLayout* hit = nullptr;
      void visit_store(const BufferStoreNode* n) override {
        if (!hit) hit = self->layout_of(n->buffer);
        IRVisitor::visit_store(n);
      }
    } st;
    st.self = this;
    st.visit(s);
    return hit ? hit : st.hit;
  }
  // The storage view: the buffer's leading (stage) dimensions, then one dimension holding
  // every position (flattened row-major over the positions' extents).
  Buffer storage_of(const UserLayout& L, const Buffer& b) {
    auto it = views_.find(b.get());
    if (it != views_.end()) return it->second;
    size_t lead = b->shape.size() - L.indices.size();
    std::vector<Expr> shape(b->shape.begin(), b->shape.begin() + lead);
    Expr size = L.extents[0];
    for (size_t k = 1; k < L.extents.size(); ++k) size = mul(size, L.extents[k]);
    shape.push_back(analyzer_.simplify(size));
    Buffer v = make_alias(b, b->name + "_laid_out", b->dtype, shape, L.span);
    views_[b.get()] = v;
    return v;
  }
  // The leading indices, then the flat position. Inside a vector loop the layout keeps
  // together (lanes_), the position is the first lane's plus the lane: the code generator's
  // `base + v` vector access. An access that is not `base + v` on the last index, with base
  // aligned to the vector, makes its loop run lane by lane (lane_failed_).
  std::vector<Expr> place(const UserLayout& L, const std::vector<Expr>& indices, Span sp) {
    size_t lead = indices.size() - L.indices.size();
    if (indices.size() < L.indices.size())
      fail(ErrorKind::Internal, sp, "internal: '" + L.buffer->name + "' accessed with too few indices");
    std::unordered_map<const VarNode*, Expr> at;
    for (size_t d = 0; d < L.indices.size(); ++d) {
      Expr x = indices[lead + d];
      at[L.indices[d].get()] = x->dtype == L.indices[d]->dtype ? x : cast(L.indices[d]->dtype, x, sp);
    }
    // Offsets past 2^31 (or not known not to be) are computed in int64.
    int64_t size = 1;
    for (auto& e : L.extents) {
      const int64_t* c = const_int(e);
      size = c && size <= (int64_t(1) << 31) ? size * *c : int64_t(1) << 40;
    }
    DataType t = size < (int64_t(1) << 31) ? DataType::Int(32) : DataType::Int(64);
    auto as_t = [&](const Expr& e) { return e->dtype == t ? e : cast(t, e, sp); };
    Expr flat;
    for (size_t k = 0; k < L.positions.size(); ++k) {
      Expr p = as_t(substitute(L.positions[k], at));
      flat = k == 0 ? p : add(mul(flat, as_t(L.extents[k]), sp), p, sp);
    }
    for (auto it = lanes_.rbegin(); it != lanes_.rend(); ++it) {
      const VarNode* v = it->var.get();
      bool in_last = mentions(indices.back(), v), elsewhere = false;
      for (size_t d = 0; d + 1 < indices.size(); ++d) elsewhere = elsewhere || mentions(indices[d], v);
      if (!in_last && !elsewhere) continue;
      Expr base = substitute(indices.back(), {{v, make_int(0, v->dtype)}});
      bool ok = in_last && !elsewhere;
      if (ok) {
        Expr step = analyzer_.simplify(sub(indices.back(), base, sp));
        auto* sv = as<VarNode>(step);
        auto m = analyzer_.modular_set(base);
        ok = sv == v && m.coeff % it->lanes == 0 && m.base % it->lanes == 0;
      }
      if (!ok) {
        lane_failed_ = true;
        continue;
      }
      Expr first = analyzer_.simplify(substitute(flat, {{v, make_int(0, v->dtype)}}));
      flat = add(first, it->var->dtype == first->dtype ? Expr(it->var) : cast(first->dtype, it->var, sp), sp);
    }
    std::vector<Expr> out(indices.begin(), indices.begin() + lead);
    out.push_back(flat);
    return out;
  }
  static bool mentions(const Expr& e, const VarNode* v) {
    bool found = false;
    for_each_expr(std::make_shared<EvaluateNode>(e), [&](const ExprNode* n) { found = found || n == v; });
    return found;
  }
  void slower(const UserLayout& L, Span sp, const std::string& what) {
    std::string line = sp.str() + ": " + what + " of '" + L.buffer->name +
                       "' run element by element [slower path: its T.Layout keeps " +
                       (L.vector_lanes > 1 ? "only " + std::to_string(L.vector_lanes) : "no two") +
                       " consecutive elements together and aligned]";
    if (std::find(report.begin(), report.end(), line) == report.end()) report.push_back(line);
  }

  std::unordered_map<const VarNode*, UserLayout> layouts_;
  std::unordered_map<const BufferNode*, Buffer> views_;
  struct Lane {
    Var var;
    int64_t lanes;
  };
  std::vector<Lane> lanes_;  // vector loops kept, innermost last
  bool lane_failed_ = false;
  arith::Analyzer analyzer_;
};

}  // namespace

PrimFunc apply_user_layouts(const PrimFunc& f) {
  auto layouts = user_layouts_of(f->body);
  if (layouts.empty()) return f;
  ApplyUserLayouts pass(std::move(layouts));
  Stmt body = pass.mutate(f->body);
  return with_report(with_body(f, body), pass.report);
}

}  // namespace tl
