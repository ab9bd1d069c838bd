#include "op/region.h"

#include <algorithm>

#include "arith/expr_equal.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"

namespace tl {

// ---------------------------------------------------------------- expressions

namespace {
const int64_t kInf = arith::ConstIntBound::kPosInf;
const int64_t kNegInf = arith::ConstIntBound::kNegInf;

// Saturating addition on bounds, where the infinities absorb.
int64_t bound_add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return kInf;
  if (a == kNegInf || b == kNegInf) return kNegInf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kInf : kNegInf;
  return r;
}
}  // namespace

bool provably_equal(const Expr& a, const Expr& b, arith::Analyzer& analyzer) {
  const int64_t *ca = const_int(a), *cb = const_int(b);
  if (ca && cb) return *ca == *cb;
  if (arith::expr_equal(a, b)) return true;
  return analyzer.can_prove(binary(BinaryOp::EQ, a, b));
}

std::string expr_str(const Expr& e) {
  if (auto* c = const_int(e)) return std::to_string(*c);
  if (auto* v = as<VarNode>(e)) return v->name;
  return to_string(e);
}

std::string extents_str(const std::vector<Expr>& extents) {
  if (extents.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < extents.size(); ++i) out += (i ? " x " : "") + expr_str(extents[i]);
  return out;
}

std::vector<Expr> region_extents(const BufferRegion& r) {
  std::vector<Expr> out;
  for (auto& rg : r.ranges) out.push_back(rg.extent);
  return out;
}

std::string region_str(const BufferRegion& r) {
  const Buffer& b = r.buffer;
  bool full = r.ranges.size() == b->shape.size();
  for (size_t d = 0; full && d < r.ranges.size(); ++d) {
    const int64_t* mn = const_int(r.ranges[d].min);
    full = mn && *mn == 0 && arith::expr_equal(r.ranges[d].extent, b->shape[d]);
  }
  if (full) return b->name;
  std::string out = b->name + "[";
  for (size_t d = 0; d < r.ranges.size(); ++d) {
    const Range& rg = r.ranges[d];
    out += d ? ", " : "";
    const int64_t *mn = const_int(rg.min), *ext = const_int(rg.extent);
    if (ext && *ext == 1) {
      out += expr_str(rg.min);
    } else if (mn && ext) {
      out += std::to_string(*mn) + ":" + std::to_string(*mn + *ext);
    } else {
      out += expr_str(rg.min) + ":" + expr_str(rg.min) + " + " + expr_str(rg.extent);
    }
  }
  return out + "]";
}

// ---------------------------------------------------------------- squeezing and matching

std::vector<int> non_unit_dims(const BufferRegion& r) {
  std::vector<int> out;
  for (size_t d = 0; d < r.ranges.size(); ++d) {
    const int64_t* e = const_int(r.ranges[d].extent);
    if (!(e && *e == 1)) out.push_back(int(d));
  }
  return out;
}

std::vector<Expr> squeezed_extents(const BufferRegion& r) {
  std::vector<Expr> out;
  for (int d : non_unit_dims(r)) out.push_back(r.ranges[d].extent);
  return out;
}

void check_regions_match(const std::string& op_name, const BufferRegion& a, const BufferRegion& b,
                         arith::Analyzer& analyzer, Span span) {
  auto ea = squeezed_extents(a), eb = squeezed_extents(b);
  bool match = ea.size() == eb.size();
  for (size_t i = 0; match && i < ea.size(); ++i) match = provably_equal(ea[i], eb[i], analyzer);
  if (match) return;
  fail(ErrorKind::Shape, span,
       op_name + ": shape mismatch between " + region_str(a) + " (extents " + extents_str(ea) + ") and " +
           region_str(b) + " (extents " + extents_str(eb) + ")",
       "both tiles must have the same extents once dimensions of extent 1 are dropped; "
       "check that the tile sizes used for the two buffers agree");
}

std::vector<Expr> matched_extents(const BufferRegion& a, const BufferRegion& b) {
  auto ea = squeezed_extents(a), eb = squeezed_extents(b);
  if (ea.size() != eb.size())
    fail(ErrorKind::Internal, a.span, "matched_extents: regions of different squeezed rank");
  for (size_t i = 0; i < ea.size(); ++i)
    if (!const_int(ea[i]) && const_int(eb[i])) ea[i] = eb[i];
  return ea;
}

BufferRegion region_at_point(const Buffer& b, const std::vector<Expr>& indices, const std::vector<Expr>& tile,
                             const std::string& op_name, Span span) {
  auto is_one = [](const Expr& e) {
    const int64_t* c = const_int(e);
    return c && *c == 1;
  };
  std::vector<Expr> ext = tile;
  for (size_t d = 0; ext.size() > indices.size() && d < ext.size();) {
    if (is_one(ext[d])) {
      ext.erase(ext.begin() + long(d));
    } else {
      ++d;
    }
  }
  if (ext.size() > indices.size())
    fail(ErrorKind::Shape, span,
         op_name + ": " + b->name + "[...] starts a region of rank " + std::to_string(indices.size()) +
             ", but the other operand has extents " + extents_str(tile) + ": more dimensions of extent other "
             "than 1 than " + b->name + " has",
         "give the region explicitly with slices, e.g. " + b->name + "[i:i + 64, j:j + 32]");
  BufferRegion r{b, {}, span};
  size_t pad = indices.size() - ext.size();
  for (size_t d = 0; d < indices.size(); ++d)
    r.ranges.push_back({indices[d], d < pad ? make_int(1, DataType::Int(32), span) : ext[d - pad]});
  return r;
}

// ---------------------------------------------------------------- indices and guards

std::vector<Expr> region_indices(const BufferRegion& r, const std::vector<Expr>& vars, Span span) {
  std::vector<Expr> out;
  size_t next = 0;
  for (auto& rg : r.ranges) {
    const int64_t* e = const_int(rg.extent);
    if (e && *e == 1) {
      out.push_back(rg.min);
      continue;
    }
    if (next >= vars.size())
      fail(ErrorKind::Internal, span, "region_indices: too few loop variables for " + region_str(r));
    out.push_back(add(rg.min, vars[next++], span));
  }
  if (next != vars.size())
    fail(ErrorKind::Internal, span, "region_indices: too many loop variables for " + region_str(r));
  return out;
}

bool is_guarded_buffer(const Buffer& b) { return b->is_global() || b->const_size() < 0; }

Expr in_bounds(const BufferRegion& r, const std::vector<Expr>& indices, arith::Analyzer& analyzer,
               Span span) {
  const Buffer& b = r.buffer;
  if (!is_guarded_buffer(b)) return nullptr;
  if (indices.size() != b->shape.size() || r.ranges.size() != b->shape.size())
    fail(ErrorKind::Internal, span, "in_bounds: rank mismatch on " + b->name);
  Expr cond;
  auto add_cond = [&](Expr c) { cond = cond ? land(cond, c, span) : c; };
  for (size_t d = 0; d < indices.size(); ++d) {
    const Expr& idx = indices[d];
    const Expr& mn = r.ranges[d].min;
    const Expr& ext = r.ranges[d].extent;
    const Expr& shape = b->shape[d];
    Expr zero = make_int(0, idx->dtype, span);
    // The lower bound holds for the whole region when its min does.
    const int64_t* cmin = const_int(mn);
    bool low_ok = (cmin && *cmin >= 0) || analyzer.can_prove(binary(BinaryOp::GE, mn, zero, span)) ||
                  analyzer.can_prove(binary(BinaryOp::GE, idx, zero, span));
    if (!low_ok) add_cond(binary(BinaryOp::GE, idx, zero, span));
    const int64_t *cext = const_int(ext), *cshape = const_int(shape);
    Expr end = add(mn, ext, span);
    bool high_ok = (cmin && cext && cshape && *cmin + *cext <= *cshape) ||
                   analyzer.can_prove(binary(BinaryOp::LE, end, shape, span)) ||
                   analyzer.can_prove(binary(BinaryOp::LT, idx, shape, span));
    if (!high_ok) add_cond(binary(BinaryOp::LT, idx, shape, span));
  }
  return cond;
}

Expr make_load(const Buffer& b, std::vector<Expr> indices, Span span) {
  return std::make_shared<BufferLoadNode>(b->dtype, b, std::move(indices), span);
}

Expr guarded_load(const BufferRegion& r, const std::vector<Expr>& indices, arith::Analyzer& analyzer,
                  Span span) {
  Expr load = make_load(r.buffer, indices, span);
  Expr cond = in_bounds(r, indices, analyzer, span);
  if (!cond) return load;
  return select(cond, load, cast(r.buffer->dtype, make_int(0, DataType::Int(32), span), span), span);
}

Stmt guard(const Expr& cond, Stmt body, Span span) {
  if (!cond) return body;
  return std::make_shared<IfThenElseNode>(cond, std::move(body), nullptr, span);
}

Stmt guarded_store(const BufferRegion& r, Expr value, const std::vector<Expr>& indices,
                   arith::Analyzer& analyzer, Span span) {
  Stmt store = std::make_shared<BufferStoreNode>(r.buffer, cast(r.buffer->dtype, std::move(value), span),
                                                 indices, span);
  return guard(in_bounds(r, indices, analyzer, span), store, span);
}

// ---------------------------------------------------------------- loops and scopes

void bind_loop_var(arith::Analyzer& analyzer, const VarNode* v, const Expr& min, const Expr& extent) {
  const int64_t *cmin = const_int(min), *cext = const_int(extent);
  if (cmin && cext) {
    if (*cext > 0) analyzer.bind(v, *cmin, *cext);
    return;
  }
  // v lies in [min_lo, min_hi + extent_hi - 1]; an empty loop never runs, so its binding is moot.
  arith::ConstIntBound bmin = analyzer.const_int_bound(min);
  arith::ConstIntBound bext = analyzer.const_int_bound(extent);
  arith::ConstIntBound bound;
  bound.min = bmin.min;
  bound.max = bound_add(bound_add(bmin.max, bext.max), -1);
  if (bound.max == kNegInf) bound.max = kInf;
  if (bound.min != kNegInf || bound.max != kInf) analyzer.bind(v, bound);
}

LoopNest::LoopNest(std::vector<Expr> extents, arith::Analyzer& analyzer, Span span, const std::string& prefix,
                   std::vector<std::string> names)
    : extents_(std::move(extents)), analyzer_(analyzer), span_(span) {
  for (size_t k = 0; k < extents_.size(); ++k) {
    DataType t = extents_[k]->dtype.is_integer() ? extents_[k]->dtype : DataType::Int(32);
    std::string name = k < names.size() ? names[k] : prefix + std::to_string(k);
    Var v = make_var(name, t, span);
    bind_loop_var(analyzer_, v.get(), make_int(0, t, span), extents_[k]);
    vars_.push_back(v);
  }
}

LoopNest::~LoopNest() {
  for (auto& v : vars_) analyzer_.unbind(static_cast<const VarNode*>(v.get()));
}

Stmt LoopNest::wrap(Stmt body, ForKind kind) const {
  for (size_t k = vars_.size(); k-- > 0;) {
    auto v = std::static_pointer_cast<const VarNode>(vars_[k]);
    body =
        std::make_shared<ForNode>(v, make_int(0, v->dtype, span_), extents_[k], kind, body, Attrs{}, span_);
  }
  return body;
}

Buffer make_scalar_buffer(const std::string& name, DataType dtype, Span span) {
  return make_buffer(name, dtype, {make_int(1, DataType::Int(32), span)}, scope::kLocalVar, span);
}

// ---------------------------------------------------------------- user-error checks

void require_regions(const TileOpNode& op, size_t n, const std::string& op_name) {
  if (op.regions.size() != n)
    fail(ErrorKind::Internal, op.span,
         op_name + " expects " + std::to_string(n) + " buffer operand(s), got " +
             std::to_string(op.regions.size()));
}

void check_region(const std::string& op_name, const BufferRegion& r, Span span) {
  const Buffer& b = r.buffer;
  if (r.ranges.size() != b->shape.size())
    fail(ErrorKind::Shape, span,
         op_name + ": region of " + b->name + " has " + std::to_string(r.ranges.size()) +
             " dimension(s) but the buffer has rank " + std::to_string(b->shape.size()) + " (shape " +
             extents_str(b->shape) + ")",
         "index every dimension of the buffer, e.g. " + b->name + "[i, 0:n]");
  for (size_t d = 0; d < r.ranges.size(); ++d) {
    const int64_t *mn = const_int(r.ranges[d].min), *ext = const_int(r.ranges[d].extent);
    const int64_t* shape = const_int(b->shape[d]);
    if (ext && *ext < 0)
      fail(ErrorKind::Shape, span,
           op_name + ": region " + region_str(r) + " has negative extent " + std::to_string(*ext) +
               " in dimension " + std::to_string(d),
           "a slice a:b needs a <= b");
    if (!shape || !ext) continue;
    std::string where = op_name + ": region " + region_str(r) + " is out of bounds in dimension " +
                        std::to_string(d) + " of " + b->name + " (shape " + extents_str(b->shape) + "): ";
    if (b->is_global()) {
      // Tails past the end are guarded; a region that touches nothing is a mistake.
      if (mn && *ext > 0 && (*mn >= *shape || *mn + *ext <= 0))
        fail(ErrorKind::Bounds, span,
             where + "range [" + std::to_string(*mn) + ", " + std::to_string(*mn + *ext) +
                 ") lies entirely outside [0, " + std::to_string(*shape) + ")",
             "check the offsets of the tile");
      continue;
    }
    if (mn && (*mn < 0 || *mn + *ext > *shape))
      fail(ErrorKind::Bounds, span,
           where + "range [" + std::to_string(*mn) + ", " + std::to_string(*mn + *ext) +
               ") is not inside [0, " + std::to_string(*shape) + ")",
           "only global tensors may be accessed past their end; size the " + b->scope +
               " buffer to hold the tile");
    if (!mn && *ext > *shape)
      fail(ErrorKind::Bounds, span,
           where + "extent " + std::to_string(*ext) + " exceeds the dimension's size " +
               std::to_string(*shape),
           "only global tensors may be accessed past their end; size the " + b->scope +
               " buffer to hold the tile");
  }
}

int64_t attr_int(const TileOpNode& op, const std::string& key, int64_t fallback) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return fallback;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (auto* e = std::get_if<Expr>(&it->second)) {
    if (auto* c = const_int(*e)) return *c;
  }
  fail(ErrorKind::Type, op.span, "T." + op.op + ": option '" + key + "' must be a constant integer",
       "pass a Python int or bool");
}

std::string attr_str(const TileOpNode& op, const std::string& key, const std::string& fallback) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return fallback;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  fail(ErrorKind::Type, op.span, "T." + op.op + ": option '" + key + "' must be a string",
       "pass a Python str");
}

}  // namespace tl
