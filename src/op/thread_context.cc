#include "op/thread_context.h"

#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "op/region.h"

namespace tl {

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
    for (size_t d = 0; d < driver.ranges.size(); ++d) {
      const int64_t* mn = const_int(driver.ranges[d].min);
      const int64_t* ext = const_int(driver.ranges[d].extent);
      const int64_t* full = const_int(driver.buffer->shape[d]);
      if (!mn || *mn != 0 || !ext || !full || *ext != *full)
        fail(ErrorKind::Unsupported, span,
             op_name + " on part of the fragment '" + driver.buffer->name + "' is not supported on target " +
                 target.kind,
             "operate on the whole fragment");
    }
    return over_owned(*layout, [&](const std::vector<Expr>& index) {
      std::vector<Expr> point;
      for (int d : dims) point.push_back(index[d]);
      return body(point);
    }, span);
  }
  if (extents.empty()) return body({});
  return over_owned(default_partition(extents, driver.buffer->dtype), body, span);
}

}  // namespace tl
