#include "op/async_scope.h"

#include <string>

#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"

namespace tl {
namespace {

const char* const kHint =
    "write the copy as `for v in T.vectorized(n): S[..., c + v] = G[..., g + v]` (a shared tile from a "
    "global tensor of the same dtype, 4, 8 or 16 bytes), or move the statement out of the async scope";

bool is_copy_element(const BufferStoreNode* store) {
  auto* load = as<BufferLoadNode>(store->value);
  return load && store->buffer->is_shared() && load->buffer->is_global() && load->dtype == store->buffer->dtype;
}

// Whether index moves by one element along the last dimension per step of v, and not
// along the others.
bool unit_stride(const std::vector<Expr>& indices, const Var& v, arith::Analyzer& analyzer) {
  for (size_t d = 0; d < indices.size(); ++d) {
    Expr at1 = substitute(indices[d], {{v.get(), make_int(1)}});
    Expr at0 = substitute(indices[d], {{v.get(), make_int(0)}});
    const int64_t* step = const_int(analyzer.simplify(sub(at1, at0)));
    if (!step || *step != (d + 1 == indices.size() ? 1 : 0)) return false;
  }
  return true;
}

Stmt cp_async(const BufferStoreNode* store, const std::unordered_map<const VarNode*, Expr>& at, int64_t bytes,
              Span span) {
  auto* load = as<BufferLoadNode>(store->value);
  Expr dst = substitute(Expr(std::make_shared<BufferLoadNode>(store->buffer->dtype, store->buffer, store->indices,
                                                              store->span)), at);
  Expr src = substitute(Expr(std::make_shared<BufferLoadNode>(load->dtype, load->buffer, load->indices, load->span)),
                        at);
  return std::make_shared<EvaluateNode>(
      std::make_shared<CallNode>(DataType::Void(), "cp_async", std::vector<Expr>{dst, src, make_int(bytes)}, span),
      span);
}

void refuse(const std::string& what, Span span) {
  fail(ErrorKind::Unsupported, span, "inside T.attr(..., \"async_scope\", 1) " + what, kHint);
}

class AsyncCopies : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    if (n->for_kind != ForKind::Vectorized) return IRMutator::mutate_for(s, n);
    const int64_t* lanes = const_int(n->extent);
    const int64_t* start = const_int(n->min);
    std::vector<Stmt> stores = as<SeqStmtNode>(n->body) ? as<SeqStmtNode>(n->body)->seq : std::vector<Stmt>{n->body};
    std::vector<Stmt> out;
    for (const Stmt& st : stores) {
      auto* store = as<BufferStoreNode>(st);
      if (!store || !is_copy_element(store))
        refuse("a T.vectorized loop holds only element copies from a global tensor into a shared tile", st->span);
      int64_t bytes = lanes ? *lanes * store->buffer->dtype.bytes() : 0;
      if (!start || *start != 0 || (bytes != 4 && bytes != 8 && bytes != 16))
        refuse("a vectorized copy moves 4, 8 or 16 bytes per thread (cp.async); this one moves " +
                   (bytes ? std::to_string(bytes) + " bytes" : std::string("a run-time number of bytes")),
               n->span);
      auto* load = as<BufferLoadNode>(store->value);
      arith::Analyzer analyzer;
      if (!unit_stride(store->indices, n->var, analyzer) || !unit_stride(load->indices, n->var, analyzer))
        refuse("the vectorized loop's variable steps through consecutive elements of the last dimension of "
               "both the shared tile '" + store->buffer->name + "' and the tensor '" + load->buffer->name + "'",
               st->span);
      out.push_back(cp_async(store, {{n->var.get(), make_int(0)}}, bytes, st->span));
    }
    return make_seq(out, n->span);
  }
  Stmt mutate_store(const Stmt& s, const BufferStoreNode* n) override {
    if (!n->buffer->is_shared()) return s;
    int64_t bytes = n->buffer->dtype.bytes();
    if (!is_copy_element(n) || (bytes != 4 && bytes != 8 && bytes != 16))
      refuse("a store into the shared tile '" + n->buffer->name + "' is a copy of one 4-, 8- or 16-byte element "
             "from a global tensor, or a T.vectorized loop of them", n->span);
    return cp_async(n, {}, bytes, n->span);
  }
};

}  // namespace

Stmt async_scope_copies(const Stmt& body) { return AsyncCopies().mutate(body); }

}  // namespace tl
