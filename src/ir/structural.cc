// Structural equality and hashing. Both walk the trees in the same order and treat binding
// sites alike, so that equal trees hash equally:
// - variables bound by For, LetStmt, Kernel and function parameters (and the parameters'
//   shape variables) correspond by position; a binding lasts for its scope;
// - buffers correspond one to one: an Allocate binds its buffer for its body, any other
//   buffer is bound where it is first met; corresponding buffers have equal dtype, scope,
//   shape and strides;
// - free variables are compared by identity (and hashed by name and dtype);
// - floats are compared bitwise, every NaN equal to every other; spans are ignored;
// - the function name and attrs take part.
#include "ir/structural.h"

#include <cmath>
#include <cstring>
#include <tuple>
#include <unordered_map>

namespace tl {
namespace {

uint64_t mix64(uint64_t x) {
  // The splitmix64 finaliser: every input bit affects every output bit.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t combine(uint64_t seed, uint64_t v) {
  return mix64(seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

uint64_t hash_string(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: stable across runs and builds
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

uint64_t double_bits(double v) {
  if (std::isnan(v)) return 0x7ff8000000000000ULL;
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

bool same_double(double a, double b) { return double_bits(a) == double_bits(b); }

uint64_t hash_dtype(DataType t) {
  return (uint64_t(t.code) << 32) | (uint64_t(t.bits) << 16) | uint64_t(t.lanes);
}

// Tags keep hashes of different node kinds apart.
enum Tag : uint64_t {
  kTagExpr = 0x100,
  kTagStmt = 0x200,
  kTagFreeVar = 0x301,
  kTagBoundVar = 0x302,
  kTagNewBuffer = 0x401,
  kTagBoundBuffer = 0x402,
  kTagNull = 0x500,
  kTagAttr = 0x600,
  kTagFunc = 0x700,
};

// A pair of one-to-one maps between the objects of the left and the right tree.
class Correspondence {
 public:
  struct Saved {
    Correspondence* owner;
    const void* a;
    const void* b;
    const void* old_a;  // what a mapped to before, or nullptr
    const void* old_b;
  };

  // Maps a <-> b, returning what is needed to undo it.
  Saved bind(const void* a, const void* b) {
    Saved s{this, a, b, lookup(left_, a), lookup(right_, b)};
    left_[a] = b;
    right_[b] = a;
    return s;
  }

  void restore(const Saved& s) {
    if (s.old_a) {
      left_[s.a] = s.old_a;
    } else {
      left_.erase(s.a);
    }
    if (s.old_b) {
      right_[s.b] = s.old_b;
    } else {
      right_.erase(s.b);
    }
  }

  bool has_left(const void* a) const { return left_.count(a) != 0; }
  bool has_right(const void* b) const { return right_.count(b) != 0; }

  // Whether a and b correspond: mapped to each other, or both unmapped and identical.
  bool matches(const void* a, const void* b) const {
    const void* la = lookup(left_, a);
    const void* rb = lookup(right_, b);
    if (la || rb) return la == b && rb == a;
    return a == b;
  }

 private:
  std::unordered_map<const void*, const void*> left_, right_;

  static const void* lookup(const std::unordered_map<const void*, const void*>& m, const void* k) {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second;
  }
};

class Equal {
 public:
  bool expr(const Expr& a, const Expr& b) {
    if (!a || !b) return !a && !b;
    if (a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
      case ExprKind::IntImm:
        return static_cast<const IntImmNode*>(a.get())->value ==
               static_cast<const IntImmNode*>(b.get())->value;
      case ExprKind::FloatImm:
        return same_double(static_cast<const FloatImmNode*>(a.get())->value,
                           static_cast<const FloatImmNode*>(b.get())->value);
      case ExprKind::StringImm:
        return static_cast<const StringImmNode*>(a.get())->value ==
               static_cast<const StringImmNode*>(b.get())->value;
      case ExprKind::Var: return vars_.matches(a.get(), b.get());
      case ExprKind::Binary: {
        auto *x = static_cast<const BinaryNode*>(a.get()), *y = static_cast<const BinaryNode*>(b.get());
        return x->op == y->op && expr(x->a, y->a) && expr(x->b, y->b);
      }
      case ExprKind::Not:
        return expr(static_cast<const NotNode*>(a.get())->a, static_cast<const NotNode*>(b.get())->a);
      case ExprKind::Select: {
        auto *x = static_cast<const SelectNode*>(a.get()), *y = static_cast<const SelectNode*>(b.get());
        return expr(x->cond, y->cond) && expr(x->true_value, y->true_value) &&
               expr(x->false_value, y->false_value);
      }
      case ExprKind::Cast:
        return expr(static_cast<const CastNode*>(a.get())->value,
                    static_cast<const CastNode*>(b.get())->value);
      case ExprKind::BufferLoad: {
        auto *x = static_cast<const BufferLoadNode*>(a.get()),
             *y = static_cast<const BufferLoadNode*>(b.get());
        return use_buffer(x->buffer, y->buffer) && exprs(x->indices, y->indices);
      }
      case ExprKind::Call: {
        auto *x = static_cast<const CallNode*>(a.get()), *y = static_cast<const CallNode*>(b.get());
        return x->op == y->op && exprs(x->args, y->args);
      }
    }
    return false;
  }

  bool stmt(const Stmt& a, const Stmt& b) {
    if (!a || !b) return !a && !b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case StmtKind::Seq: {
        auto& x = static_cast<const SeqStmtNode*>(a.get())->seq;
        auto& y = static_cast<const SeqStmtNode*>(b.get())->seq;
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
          if (!stmt(x[i], y[i])) return false;
        return true;
      }
      case StmtKind::For: {
        auto *x = static_cast<const ForNode*>(a.get()), *y = static_cast<const ForNode*>(b.get());
        if (x->for_kind != y->for_kind || !expr(x->min, y->min) || !expr(x->extent, y->extent) ||
            !attrs(x->attrs, y->attrs))
          return false;
        if (x->var->dtype != y->var->dtype) return false;
        auto saved = vars_.bind(x->var.get(), y->var.get());
        bool eq = stmt(x->body, y->body);
        vars_.restore(saved);
        return eq;
      }
      case StmtKind::While: {
        auto *x = static_cast<const WhileNode*>(a.get()), *y = static_cast<const WhileNode*>(b.get());
        return expr(x->cond, y->cond) && stmt(x->body, y->body);
      }
      case StmtKind::IfThenElse: {
        auto *x = static_cast<const IfThenElseNode*>(a.get()),
             *y = static_cast<const IfThenElseNode*>(b.get());
        return expr(x->cond, y->cond) && stmt(x->then_case, y->then_case) && stmt(x->else_case, y->else_case);
      }
      case StmtKind::BufferStore: {
        auto *x = static_cast<const BufferStoreNode*>(a.get()),
             *y = static_cast<const BufferStoreNode*>(b.get());
        return use_buffer(x->buffer, y->buffer) && expr(x->value, y->value) && exprs(x->indices, y->indices);
      }
      case StmtKind::LetStmt: {
        auto *x = static_cast<const LetStmtNode*>(a.get()), *y = static_cast<const LetStmtNode*>(b.get());
        if (!expr(x->value, y->value) || x->var->dtype != y->var->dtype) return false;
        auto saved = vars_.bind(x->var.get(), y->var.get());
        bool eq = stmt(x->body, y->body);
        vars_.restore(saved);
        return eq;
      }
      case StmtKind::Evaluate:
        return expr(static_cast<const EvaluateNode*>(a.get())->value,
                    static_cast<const EvaluateNode*>(b.get())->value);
      case StmtKind::Allocate: {
        auto *x = static_cast<const AllocateNode*>(a.get()), *y = static_cast<const AllocateNode*>(b.get());
        if (!same_buffer_shape(x->buffer, y->buffer)) return false;
        std::vector<Correspondence::Saved> saved;
        bind_buffer(x->buffer, y->buffer, &saved);
        bool eq = attrs(x->attrs, y->attrs) && stmt(x->body, y->body);
        unwind(saved);
        return eq;
      }
      case StmtKind::TileOp: {
        auto *x = static_cast<const TileOpNode*>(a.get()), *y = static_cast<const TileOpNode*>(b.get());
        if (x->op != y->op || x->regions.size() != y->regions.size()) return false;
        for (size_t i = 0; i < x->regions.size(); ++i)
          if (!region(x->regions[i], y->regions[i])) return false;
        return exprs(x->args, y->args) && attrs(x->attrs, y->attrs);
      }
      case StmtKind::Kernel: {
        auto *x = static_cast<const KernelNode*>(a.get()), *y = static_cast<const KernelNode*>(b.get());
        if (!exprs(x->grid, y->grid) || x->threads != y->threads || x->cluster != y->cluster ||
            x->block_vars.size() != y->block_vars.size() || x->thread_vars.size() != y->thread_vars.size())
          return false;
        std::vector<Correspondence::Saved> saved;
        bool eq = true;
        for (size_t i = 0; eq && i < x->block_vars.size(); ++i)
          eq = bind_var(x->block_vars[i], y->block_vars[i], &saved);
        for (size_t i = 0; eq && i < x->thread_vars.size(); ++i)
          eq = bind_var(x->thread_vars[i], y->thread_vars[i], &saved);
        eq = eq && stmt(x->body, y->body);
        unwind(saved);
        return eq;
      }
    }
    return false;
  }

  bool func(const PrimFuncNode& a, const PrimFuncNode& b) {
    if (a.name != b.name || a.params.size() != b.params.size()) return false;
    std::vector<Correspondence::Saved> saved;  // function-wide: never undone
    for (size_t i = 0; i < a.params.size(); ++i) {
      const Param &p = a.params[i], &q = b.params[i];
      if (p.is_buffer() != q.is_buffer()) return false;
      if (!p.is_buffer() && !bind_var(p.var, q.var, &saved)) return false;
    }
    auto sa = shape_vars(a), sb = shape_vars(b);
    if (sa.size() != sb.size()) return false;
    for (size_t i = 0; i < sa.size(); ++i)
      if (!bind_once(sa[i], sb[i], &saved)) return false;
    for (size_t i = 0; i < a.params.size(); ++i) {
      const Param &p = a.params[i], &q = b.params[i];
      if (!p.is_buffer()) continue;
      if (!same_buffer_shape(p.buffer, q.buffer) || !bind_once_buffer(p.buffer, q.buffer, &saved))
        return false;
      if ((p.var == nullptr) != (q.var == nullptr)) return false;
      if (p.var && !bind_once(p.var, q.var, &saved)) return false;
    }
    return attrs(a.attrs, b.attrs) && stmt(a.body, b.body);
  }

 private:
  Correspondence vars_, buffers_;

  bool exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!expr(a[i], b[i])) return false;
    return true;
  }

  void unwind(std::vector<Correspondence::Saved>& saved) {
    // Undo in reverse so that re-bound objects get their outer partner back.
    for (size_t i = saved.size(); i-- > 0;) saved[i].owner->restore(saved[i]);
    saved.clear();
  }

  bool bind_var(const Var& a, const Var& b, std::vector<Correspondence::Saved>* saved) {
    if (!a || !b) return !a && !b;
    if (a->dtype != b->dtype) return false;
    saved->push_back(vars_.bind(a.get(), b.get()));
    return true;
  }

  // Binds a <-> b unless they already correspond (a variable listed twice).
  bool bind_once(const Var& a, const Var& b, std::vector<Correspondence::Saved>* saved) {
    if (vars_.has_left(a.get()) || vars_.has_right(b.get())) return vars_.matches(a.get(), b.get());
    return bind_var(a, b, saved);
  }

  bool bind_once_buffer(const Buffer& a, const Buffer& b, std::vector<Correspondence::Saved>* saved) {
    if (buffers_.has_left(a.get()) || buffers_.has_right(b.get())) return buffers_.matches(a.get(), b.get());
    return bind_buffer(a, b, saved);
  }

  bool same_buffer_shape(const Buffer& a, const Buffer& b) {
    if (!a || !b) return !a && !b;
    return a->dtype == b->dtype && a->scope == b->scope && exprs(a->shape, b->shape) &&
           exprs(a->strides, b->strides);
  }

  bool bind_buffer(const Buffer& a, const Buffer& b, std::vector<Correspondence::Saved>* saved) {
    if (!a || !b) return !a && !b;
    saved->push_back(buffers_.bind(a.get(), b.get()));
    if ((a->data == nullptr) != (b->data == nullptr)) return false;
    if (a->data) {
      if (vars_.has_left(a->data.get()) || vars_.has_right(b->data.get()))
        return vars_.matches(a->data.get(), b->data.get());
      return bind_var(a->data, b->data, saved);
    }
    return true;
  }

  // A buffer met outside of a binding site: bound for the rest of the comparison.
  bool use_buffer(const Buffer& a, const Buffer& b) {
    if (!a || !b) return !a && !b;
    if (buffers_.has_left(a.get()) || buffers_.has_right(b.get())) return buffers_.matches(a.get(), b.get());
    if (!same_buffer_shape(a, b)) return false;
    return bind_buffer(a, b, &permanent_);
  }

  bool region(const BufferRegion& a, const BufferRegion& b) {
    if (!use_buffer(a.buffer, b.buffer) || a.ranges.size() != b.ranges.size()) return false;
    for (size_t i = 0; i < a.ranges.size(); ++i)
      if (!expr(a.ranges[i].min, b.ranges[i].min) || !expr(a.ranges[i].extent, b.ranges[i].extent))
        return false;
    return true;
  }

  bool attr_value(const AttrValue& a, const AttrValue& b) {
    if (a.index() != b.index()) return false;
    if (auto* d = std::get_if<double>(&a)) return same_double(*d, std::get<double>(b));
    if (auto* e = std::get_if<Expr>(&a)) return expr(*e, std::get<Expr>(b));
    return a == b;
  }

  bool attrs(const Attrs& a, const Attrs& b) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia->first != ib->first || !attr_value(ia->second, ib->second)) return false;
    return true;
  }

  std::vector<Correspondence::Saved> permanent_;  // bindings that last the whole comparison
};

class Hasher {
 public:
  uint64_t expr(const Expr& e) {
    if (!e) return kTagNull;
    uint64_t h = combine(kTagExpr + uint64_t(e->kind), hash_dtype(e->dtype));
    switch (e->kind) {
      case ExprKind::IntImm: return combine(h, uint64_t(static_cast<const IntImmNode*>(e.get())->value));
      case ExprKind::FloatImm:
        return combine(h, double_bits(static_cast<const FloatImmNode*>(e.get())->value));
      case ExprKind::StringImm:
        return combine(h, hash_string(static_cast<const StringImmNode*>(e.get())->value));
      case ExprKind::Var: return combine(h, var(static_cast<const VarNode*>(e.get())));
      case ExprKind::Binary: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        h = combine(h, uint64_t(n->op));
        h = combine(h, expr(n->a));
        return combine(h, expr(n->b));
      }
      case ExprKind::Not: return combine(h, expr(static_cast<const NotNode*>(e.get())->a));
      case ExprKind::Select: {
        auto* n = static_cast<const SelectNode*>(e.get());
        h = combine(h, expr(n->cond));
        h = combine(h, expr(n->true_value));
        return combine(h, expr(n->false_value));
      }
      case ExprKind::Cast: return combine(h, expr(static_cast<const CastNode*>(e.get())->value));
      case ExprKind::BufferLoad: {
        auto* n = static_cast<const BufferLoadNode*>(e.get());
        h = combine(h, use_buffer(n->buffer));
        return combine(h, exprs(n->indices));
      }
      case ExprKind::Call: {
        auto* n = static_cast<const CallNode*>(e.get());
        h = combine(h, hash_string(n->op));
        return combine(h, exprs(n->args));
      }
    }
    return h;
  }

  uint64_t stmt(const Stmt& s) {
    if (!s) return kTagNull;
    uint64_t h = kTagStmt + uint64_t(s->kind);
    switch (s->kind) {
      case StmtKind::Seq: {
        auto& seq = static_cast<const SeqStmtNode*>(s.get())->seq;
        h = combine(h, seq.size());
        for (auto& c : seq) h = combine(h, stmt(c));
        return h;
      }
      case StmtKind::For: {
        auto* n = static_cast<const ForNode*>(s.get());
        h = combine(h, uint64_t(n->for_kind));
        h = combine(h, expr(n->min));
        h = combine(h, expr(n->extent));
        h = combine(h, attrs(n->attrs));
        h = combine(h, hash_dtype(n->var->dtype));
        Scope scope(this);
        scope.define_var(n->var.get());
        return combine(h, stmt(n->body));
      }
      case StmtKind::While: {
        auto* n = static_cast<const WhileNode*>(s.get());
        h = combine(h, expr(n->cond));
        return combine(h, stmt(n->body));
      }
      case StmtKind::IfThenElse: {
        auto* n = static_cast<const IfThenElseNode*>(s.get());
        h = combine(h, expr(n->cond));
        h = combine(h, stmt(n->then_case));
        return combine(h, stmt(n->else_case));
      }
      case StmtKind::BufferStore: {
        auto* n = static_cast<const BufferStoreNode*>(s.get());
        h = combine(h, use_buffer(n->buffer));
        h = combine(h, expr(n->value));
        return combine(h, exprs(n->indices));
      }
      case StmtKind::LetStmt: {
        auto* n = static_cast<const LetStmtNode*>(s.get());
        h = combine(h, expr(n->value));
        h = combine(h, hash_dtype(n->var->dtype));
        Scope scope(this);
        scope.define_var(n->var.get());
        return combine(h, stmt(n->body));
      }
      case StmtKind::Evaluate: return combine(h, expr(static_cast<const EvaluateNode*>(s.get())->value));
      case StmtKind::Allocate: {
        auto* n = static_cast<const AllocateNode*>(s.get());
        h = combine(h, buffer_shape(n->buffer));
        Scope scope(this);
        scope.define_buffer(n->buffer);
        h = combine(h, attrs(n->attrs));
        return combine(h, stmt(n->body));
      }
      case StmtKind::TileOp: {
        auto* n = static_cast<const TileOpNode*>(s.get());
        h = combine(h, hash_string(n->op));
        h = combine(h, n->regions.size());
        for (auto& r : n->regions) {
          h = combine(h, use_buffer(r.buffer));
          h = combine(h, r.ranges.size());
          for (auto& rg : r.ranges) {
            h = combine(h, expr(rg.min));
            h = combine(h, expr(rg.extent));
          }
        }
        h = combine(h, exprs(n->args));
        return combine(h, attrs(n->attrs));
      }
      case StmtKind::Kernel: {
        auto* n = static_cast<const KernelNode*>(s.get());
        h = combine(h, exprs(n->grid));
        h = combine(h, n->threads.size());
        for (auto t : n->threads) h = combine(h, uint64_t(t));
        for (auto c : n->cluster) h = combine(h, uint64_t(c));
        h = combine(h, n->block_vars.size());
        h = combine(h, n->thread_vars.size());
        Scope scope(this);
        for (auto& v : n->block_vars) h = combine(h, scope.define_var(v.get()));
        for (auto& v : n->thread_vars) h = combine(h, scope.define_var(v.get()));
        return combine(h, stmt(n->body));
      }
    }
    return h;
  }

  uint64_t func(const PrimFuncNode& f) {
    uint64_t h = combine(kTagFunc, hash_string(f.name));
    h = combine(h, f.params.size());
    Scope scope(this);  // function-wide
    for (auto& p : f.params) {
      h = combine(h, p.is_buffer());
      if (!p.is_buffer()) h = combine(h, scope.define_var(p.var.get()));
    }
    auto sv = shape_vars(f);
    h = combine(h, sv.size());
    for (auto& v : sv) h = combine(h, define_once(scope, v.get()));
    for (auto& p : f.params) {
      if (!p.is_buffer()) continue;
      h = combine(h, buffer_shape(p.buffer));
      h = combine(
          h, buffer_ids_.count(p.buffer.get()) ? buffer_ids_[p.buffer.get()] : scope.define_buffer(p.buffer));
      h = combine(h, p.var != nullptr);
      if (p.var) h = combine(h, define_once(scope, p.var.get()));
    }
    h = combine(h, attrs(f.attrs));
    return combine(h, stmt(f.body));
  }

 private:
  // Bound objects get ids in order of definition; a scope undoes its definitions on exit.
  class Scope {
   public:
    explicit Scope(Hasher* h) : h_(h) {}
    ~Scope() {
      for (size_t i = undo_.size(); i-- > 0;) {
        auto& [map, key, had, old] = undo_[i];
        if (had) {
          (*map)[key] = old;
        } else {
          map->erase(key);
        }
      }
    }
    uint64_t define_var(const VarNode* v) {
      if (!v) return kTagNull;
      uint64_t id = h_->next_id_++;
      remember(&h_->var_ids_, v, id);
      return combine(id, hash_dtype(v->dtype));
    }
    uint64_t define_buffer(const Buffer& b) {
      uint64_t id = h_->next_id_++;
      remember(&h_->buffer_ids_, b.get(), id);
      if (b->data && !h_->var_ids_.count(b->data.get())) define_var(b->data.get());
      return id;
    }

   private:
    using Map = std::unordered_map<const void*, uint64_t>;
    void remember(Map* map, const void* key, uint64_t id) {
      auto it = map->find(key);
      undo_.push_back({map, key, it != map->end(), it != map->end() ? it->second : 0});
      (*map)[key] = id;
    }
    Hasher* h_;
    std::vector<std::tuple<Map*, const void*, bool, uint64_t>> undo_;
  };

  std::unordered_map<const void*, uint64_t> var_ids_, buffer_ids_;
  uint64_t next_id_ = 1;
  Scope permanent_{this};

  uint64_t define_once(Scope& scope, const VarNode* v) {
    auto it = var_ids_.find(v);
    if (it != var_ids_.end()) return combine(kTagBoundVar, it->second);
    return scope.define_var(v);
  }

  uint64_t var(const VarNode* v) {
    auto it = var_ids_.find(v);
    if (it != var_ids_.end()) return combine(kTagBoundVar, it->second);
    return combine(kTagFreeVar, hash_string(v->name));
  }

  uint64_t exprs(const std::vector<Expr>& v) {
    uint64_t h = v.size();
    for (auto& e : v) h = combine(h, expr(e));
    return h;
  }

  uint64_t buffer_shape(const Buffer& b) {
    if (!b) return kTagNull;
    uint64_t h = combine(hash_dtype(b->dtype), hash_string(b->scope));
    h = combine(h, exprs(b->shape));
    return combine(h, exprs(b->strides));
  }

  uint64_t use_buffer(const Buffer& b) {
    if (!b) return kTagNull;
    auto it = buffer_ids_.find(b.get());
    if (it != buffer_ids_.end()) return combine(kTagBoundBuffer, it->second);
    uint64_t h = combine(kTagNewBuffer, buffer_shape(b));
    // A T.reshape / T.view: which storage it is over is part of the program.
    if (b->data) {
      auto v = var_ids_.find(b->data.get());
      if (v != var_ids_.end()) h = combine(h, v->second);
    }
    return combine(h, permanent_.define_buffer(b));
  }

  uint64_t attrs(const Attrs& a) {
    uint64_t h = combine(kTagAttr, a.size());
    for (auto& [k, v] : a) {
      h = combine(h, hash_string(k));
      h = combine(h, v.index());
      if (auto* i = std::get_if<int64_t>(&v)) h = combine(h, uint64_t(*i));
      if (auto* d = std::get_if<double>(&v)) h = combine(h, double_bits(*d));
      if (auto* s = std::get_if<std::string>(&v)) h = combine(h, hash_string(*s));
      if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
        h = combine(h, l->size());
        for (auto x : *l) h = combine(h, uint64_t(x));
      }
      if (auto* e = std::get_if<Expr>(&v)) h = combine(h, expr(*e));
    }
    return h;
  }
};

}  // namespace

bool structural_equal(const Expr& a, const Expr& b) { return Equal().expr(a, b); }
bool structural_equal(const Stmt& a, const Stmt& b) { return Equal().stmt(a, b); }
bool structural_equal(const PrimFunc& a, const PrimFunc& b) {
  if (!a || !b) return !a && !b;
  return Equal().func(*a, *b);
}

uint64_t structural_hash(const Expr& e) { return Hasher().expr(e); }
uint64_t structural_hash(const Stmt& s) { return Hasher().stmt(s); }
uint64_t structural_hash(const PrimFunc& f) {
  if (!f) return kTagNull;
  return Hasher().func(*f);
}

}  // namespace tl
