#include "op/thread_context.h"

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/region.h"

namespace tl {

Stmt sync_threads(Span span) {
  return std::make_shared<EvaluateNode>(
      std::make_shared<CallNode>(DataType::Void(), "sync_threads", std::vector<Expr>{}, span), span);
}

Expr fragment_slot(const Buffer& fragment, const Expr& slot, Span span) {
  if (fragment->shape.size() < 2)
    fail(ErrorKind::Internal, span, "internal: fragment_slot needs a fragment of rank >= 2 ('" + fragment->name + "')");
  return std::make_shared<BufferLoadNode>(fragment->dtype, fragment, std::vector<Expr>{slot}, span);
}

Stmt ThreadContext::unrolled(const std::string& name, int64_t n, const std::function<Stmt(const Expr&)>& body,
                             Span span) {
  Var v = make_var(name, DataType::Int(32), span);
  analyzer.bind(v.get(), 0, n);
  Stmt b = body(v);
  analyzer.unbind(v.get());
  return std::make_shared<ForNode>(v, make_int(0), make_int(n), ForKind::Unrolled, b, Attrs{}, span);
}

Stmt ThreadContext::over_owned(const TilePartition& p, const std::function<Stmt(const std::vector<Expr>&)>& body,
                               Span span, const std::string& prefix) {
  TilePartition::Owned owned = p.owned_by(thread, prefix, span);
  for (size_t k = 0; k < owned.vars.size(); ++k) analyzer.bind(owned.vars[k].get(), 0, owned.extents[k]);
  Stmt inner = body(owned.index);
  if (owned.exists) inner = std::make_shared<IfThenElseNode>(owned.exists, inner, nullptr, span);
  for (size_t k = owned.vars.size(); k-- > 0;) {
    analyzer.unbind(owned.vars[k].get());
    if (owned.extents[k] == 1) {
      inner = substitute(inner, {{owned.vars[k].get(), make_int(0)}});
      continue;
    }
    inner = std::make_shared<ForNode>(owned.vars[k], make_int(0), make_int(owned.extents[k]),
                                      ForKind::Unrolled, inner, Attrs{}, span);
  }
  return inner;
}

Stmt ThreadContext::put_in_shared(const Buffer& frag, const TilePartition& p, const Buffer& shared, Span span) {
  Stmt put = over_owned(p, [&](const std::vector<Expr>& index) -> Stmt {
    return std::make_shared<BufferStoreNode>(shared, make_load(frag, index, span), index, span);
  }, span, frag->name + "_x");
  Expr first = p.first_replica(thread, span);
  return first ? Stmt(std::make_shared<IfThenElseNode>(first, put, nullptr, span)) : put;
}

Stmt ThreadContext::over_points(const std::string& op_name, const BufferRegion& driver,
                                const std::vector<Expr>& space,
                                const std::function<Stmt(const std::vector<Expr>&)>& body, Span span) {
  std::vector<int64_t> extents;
  for (auto& e : space) {
    const int64_t* v = const_int(e);
    if (!v)
      fail(ErrorKind::Unsupported, span,
           op_name + " with a symbolic extent (" + expr_str(e) + ") is not supported on target " + target.kind,
           "use constant tile sizes");
    extents.push_back(*v);
  }
  if (const TilePartition* layout = layout_of(driver.buffer)) {
    std::vector<int> dims = non_unit_dims(driver);
    // Part of a fragment: each thread walks what it owns of the whole fragment and takes
    // the elements inside the region (their point relative to the region's start).
    std::vector<Expr> mins;
    std::vector<int64_t> exts;
    bool whole = true;
    for (size_t d = 0; d < driver.ranges.size(); ++d) {
      const int64_t* mn = const_int(driver.ranges[d].min);
      const int64_t* ext = const_int(driver.ranges[d].extent);
      const int64_t* full = const_int(driver.buffer->shape[d]);
      if (!ext || !full)
        fail(ErrorKind::Unsupported, span,
             op_name + " on part of the fragment '" + driver.buffer->name + "' with a symbolic extent is not "
                 "supported on target " + target.kind,
             "use constant extents");
      whole = whole && mn && *mn == 0 && *ext == *full;
      mins.push_back(driver.ranges[d].min);
      exts.push_back(*ext);
    }
    return over_owned(*layout, [&](const std::vector<Expr>& index) -> Stmt {
      std::vector<Expr> point;
      for (int d : dims) point.push_back(whole ? index[d] : sub(index[d], mins[d], span));
      Stmt s = body(point);
      if (whole) return s;
      Expr inside;
      for (size_t d = 0; d < index.size(); ++d) {
        if (exts[d] == *const_int(driver.buffer->shape[d])) continue;
        Expr rel = sub(index[d], mins[d], span);
        Expr c = binary(BinaryOp::And, binary(BinaryOp::GE, rel, make_int(0), span),
                        binary(BinaryOp::LT, rel, make_int(exts[d]), span), span);
        inside = inside ? binary(BinaryOp::And, inside, c, span) : c;
      }
      return inside ? std::make_shared<IfThenElseNode>(inside, s, nullptr, span) : s;
    }, span);
  }
  if (extents.empty()) return body({});
  return over_owned(default_partition(extents, driver.buffer->dtype), body, span);
}

namespace {

bool mentions(const Expr& e, const VarNode* v) {
  bool found = false;
  struct Find : IRVisitor {
    const VarNode* v;
    bool* found;
    using IRVisitor::visit;
    void visit_var(const VarNode* n) override { *found = *found || n == v; }
  } f;
  f.v = v;
  f.found = &found;
  f.visit(e);
  return found;
}

class VectorizeCopies : public IRMutator {
 public:
  // computed: also stores of any value (a T.Parallel body), see eligible_computed.
  explicit VectorizeCopies(arith::Analyzer& az, bool computed = false) : az_(az), computed_(computed) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    Stmt m = IRMutator::mutate_for(s, n);
    auto* f = as<ForNode>(m);
    if (f->for_kind != ForKind::Unrolled) return m;
    // A guard that does not depend on the lane (the threads past a small tile's end) goes
    // around the vector access: `if (tx < 16) L_s[4 tx .. 4 tx + 3] = ...`.
    auto* guard = as<IfThenElseNode>(f->body);
    if (guard && !guard->else_case && !mentions(guard->cond, f->var.get())) {
      auto inner = std::make_shared<ForNode>(f->var, f->min, f->extent, ForKind::Unrolled, guard->then_case, f->attrs,
                                             f->span);
      if (!eligible(inner.get())) return m;
      Stmt vec = std::make_shared<ForNode>(f->var, f->min, f->extent, ForKind::Vectorized, guard->then_case, f->attrs,
                                           f->span);
      return std::make_shared<IfThenElseNode>(guard->cond, vec, nullptr, guard->span);
    }
    if (!eligible(f)) return m;
    return std::make_shared<ForNode>(f->var, f->min, f->extent, ForKind::Vectorized, f->body, f->attrs, f->span);
  }

 private:
  // The access's element offset moves by one per lane, and its first lane is aligned.
  bool contiguous_and_aligned(const Buffer& b, const std::vector<Expr>& idx, const VarNode* v, int64_t lanes) {
    if (idx.empty() || b->scope == scope::kLocalVar) return false;
    for (size_t d = 0; d + 1 < idx.size(); ++d)
      if (mentions(idx[d], v)) return false;
    Expr zero = substitute(idx.back(), {{v, make_int(0)}});
    Expr one = substitute(idx.back(), {{v, make_int(1)}});
    Expr step_expr = az_.simplify(sub(one, zero));  // kept alive: const_int points into it
    const int64_t* step = const_int(step_expr);
    if (!step || *step != 1) return false;
    if (b->is_fragment()) return true;  // per-thread arrays hold a fragment's vectors aligned
    std::vector<Expr> strides = b->effective_strides();
    if (!const_int(strides.back()) || *const_int(strides.back()) != 1) return false;
    Expr offset = make_int(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      Expr i = d + 1 == idx.size() ? zero : idx[d];
      offset = add(offset, mul(i, strides[d]));
    }
    arith::ModularSet m = az_.modular_set(az_.simplify(offset));
    return m.coeff % lanes == 0 && m.base % lanes == 0;
  }

  // `dst[base + v] = value(v)`, dst in memory, contiguous and aligned to the vector: every
  // load of memory that moves with the lane is contiguous and aligned to vectors of up to 16
  // bytes (the code generator reads them so, before the lanes' values); loads of registers
  // and loads that do not move stay as they are. Calls that act on memory keep the loop
  // scalar (the vector form reads every lane's inputs before any lane's store).
  // Whether e reads memory that moves with the lane v where only a condition lets it be
  // read (a branch of a select, the right side of && / ||: the bounds guards of
  // legalize_safe_memory_access are such selects): the vector form would read it always.
  static bool moving_load_under_condition(const Expr& e, const VarNode* v, bool conditional) {
    if (!e) return false;
    switch (e->kind) {
      case ExprKind::BufferLoad: {
        auto* l = as<BufferLoadNode>(e);
        bool moves = false;
        for (auto& i : l->indices) moves = moves || mentions(i, v);
        if (conditional && moves && !l->buffer->is_local()) return true;
        for (auto& i : l->indices)
          if (moving_load_under_condition(i, v, conditional)) return true;
        return false;
      }
      case ExprKind::Select: {
        auto* x = as<SelectNode>(e);
        return moving_load_under_condition(x->cond, v, conditional) ||
               moving_load_under_condition(x->true_value, v, true) || moving_load_under_condition(x->false_value, v, true);
      }
      case ExprKind::Binary: {
        auto* x = as<BinaryNode>(e);
        bool short_circuit = x->op == BinaryOp::And || x->op == BinaryOp::Or;
        return moving_load_under_condition(x->a, v, conditional) ||
               moving_load_under_condition(x->b, v, conditional || short_circuit);
      }
      case ExprKind::Not: return moving_load_under_condition(as<NotNode>(e)->a, v, conditional);
      case ExprKind::Cast: return moving_load_under_condition(as<CastNode>(e)->value, v, conditional);
      case ExprKind::Call: {
        for (auto& a : as<CallNode>(e)->args)
          if (moving_load_under_condition(a, v, conditional)) return true;
        return false;
      }
      default: return false;
    }
  }

  // A store into registers (a fragment: C_local[i, j] = A_shared[i, j] + B_shared[i, j])
  // qualifies for its loads alone: when at least one moves with the lane.
  bool eligible_computed(const ForNode* f) {
    const int64_t* lanes = const_int(f->extent);
    const int64_t* mn = const_int(f->min);
    auto* store = as<BufferStoreNode>(f->body);
    if (!lanes || !mn || *mn != 0 || !store || store->buffer->dtype.lanes != 1 || store->buffer->dtype.is_sub_byte() ||
        store->buffer->scope == scope::kLocalVar)
      return false;
    bool into_registers = store->buffer->is_local();
    int64_t bytes = *lanes * store->buffer->dtype.bytes();
    if (!into_registers && bytes != 4 && bytes != 8 && bytes != 16) return false;
    if (!contiguous_and_aligned(store->buffer, store->indices, f->var.get(), *lanes)) return false;
    bool ok = !moving_load_under_condition(store->value, f->var.get(), false), moving_loads = false;
    for_each_expr(std::make_shared<EvaluateNode>(store->value), [&](const ExprNode* e) {
      if (!ok) return;
      if (auto* c = dynamic_cast<const CallNode*>(e)) {
        ok = c->op != "call_extern" && c->op.rfind("atomic", 0) != 0 && c->op != "address_of";
        return;
      }
      auto* l = dynamic_cast<const BufferLoadNode*>(e);
      if (!l || l->buffer->is_local() || l->dtype.lanes != 1) return;
      bool moves = false;
      for (auto& i : l->indices) moves = moves || mentions(i, f->var.get());
      if (!moves) return;
      int64_t eb = l->buffer->dtype.bytes();
      int64_t chunk = std::min<int64_t>(*lanes, 16 / std::max<int64_t>(eb, 1));
      ok = !l->buffer->dtype.is_sub_byte() && chunk >= 1 && *lanes % chunk == 0 &&
           (chunk * eb == 4 || chunk * eb == 8 || chunk * eb == 16) &&
           contiguous_and_aligned(l->buffer, l->indices, f->var.get(), chunk);
      moving_loads = true;
    });
    return ok && (moving_loads || !into_registers);
  }

  bool eligible(const ForNode* f) {
    if (computed_ && eligible_computed(f)) return true;
    const int64_t* lanes = const_int(f->extent);
    const int64_t* mn = const_int(f->min);
    auto* store = as<BufferStoreNode>(f->body);
    if (!lanes || !mn || *mn != 0 || !store) return false;
    // A converting copy (a fragment's float accumulators stored as bfloat16, say) is one
    // vector store of the converted lanes: its source is read lane by lane.
    auto* cast = as<CastNode>(store->value);
    auto* load = as<BufferLoadNode>(cast ? cast->value : store->value);
    if (!load || load->dtype.lanes != 1 || store->buffer->dtype.lanes != 1) return false;
    if (cast ? cast->dtype != store->buffer->dtype : load->buffer->dtype != store->buffer->dtype) return false;
    if (store->buffer->dtype.is_sub_byte() || load->buffer->dtype.is_sub_byte()) return false;
    int64_t bytes = *lanes * store->buffer->dtype.bytes();
    if (bytes != 4 && bytes != 8 && bytes != 16) return false;
    if (!contiguous_and_aligned(store->buffer, store->indices, f->var.get(), *lanes)) return false;
    if (!cast || load->buffer->is_fragment())
      return contiguous_and_aligned(load->buffer, load->indices, f->var.get(), *lanes);
    // A converting copy from memory (a float32 accumulator in global memory stored as
    // float16) reads its source in vectors of up to 16 bytes, each aligned.
    int64_t source_lanes = std::min<int64_t>(*lanes, 16 / load->buffer->dtype.bytes());
    return source_lanes >= 1 && *lanes % source_lanes == 0 &&
           contiguous_and_aligned(load->buffer, load->indices, f->var.get(), source_lanes);
  }

  arith::Analyzer& az_;
  bool computed_;
};

}  // namespace

Stmt vectorize_copies(const Stmt& s, arith::Analyzer& analyzer) { return VectorizeCopies(analyzer).mutate(s); }
Stmt vectorize_stores(const Stmt& s, arith::Analyzer& analyzer) { return VectorizeCopies(analyzer, true).mutate(s); }

}  // namespace tl
