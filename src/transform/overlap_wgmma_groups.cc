#include "transform/overlap_wgmma_groups.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"
#include "op/region.h"
#include "transform/pass.h"

namespace tl {
namespace {

using Storage = std::unordered_set<const VarNode*>;

bool meets(const Storage& a, const Storage& b) {
  for (auto* v : a)
    if (b.count(v)) return true;
  return false;
}

const TileOpNode* as_gemm(const Stmt& s) {
  auto* op = as<TileOpNode>(s);
  return op && op->op == "gemm" && op->regions.size() == 3 ? op : nullptr;
}

// What a statement does to storage (data handles, so that T.reshape / T.view aliases meet),
// or that it is opaque: a call (barrier, wait, intrinsic), a while loop or a nested T.gemm,
// across which nothing moves and before which every group is waited for.
struct Effects {
  Storage touched, written;
  bool writes_shared = false, reads_shared = false;
  bool opaque = false;
};

Effects gemm_effects(const TileOpNode& g) {
  Effects e;
  for (int k = 0; k < 3; ++k) {
    const Buffer& b = g.regions[k].buffer;
    e.touched.insert(b->data.get());
    if (k < 2) e.reads_shared = e.reads_shared || b->is_shared();
  }
  e.written.insert(g.regions[2].buffer->data.get());
  return e;
}

Effects effects(const Stmt& s) {
  if (auto* g = as_gemm(s)) return gemm_effects(*g);
  struct V : IRVisitor {
    Effects* e;
    using IRVisitor::visit;
    void visit_buffer(const Buffer& b) override {
      e->touched.insert(b->data.get());
      e->reads_shared = e->reads_shared || b->is_shared();
    }
    void visit_evaluate(const EvaluateNode* n) override {
      e->opaque = true;
      IRVisitor::visit_evaluate(n);
    }
    void visit_while(const WhileNode* n) override {
      e->opaque = true;
      IRVisitor::visit_while(n);
    }
    void visit_tile_op(const TileOpNode* n) override {
      e->opaque = e->opaque || n->op == "gemm";
      IRVisitor::visit_tile_op(n);
    }
  } v;
  Effects e;
  v.e = &e;
  v.visit(s);
  e.written = storage_written(s);
  for (auto* b : buffers_written(s)) e.writes_shared = e.writes_shared || b->is_shared();
  return e;
}

// Whether statement s must not run while group g may still be in flight (or, for moving g
// up, must not be crossed by it): s touches what g writes or writes what g reads.
bool depends(const Effects& g, const Effects& s) {
  return s.opaque || meets(g.written, s.touched) || meets(g.touched, s.written);
}

bool program_schedules_wgmma(const Stmt& s) {
  bool found = false;
  for_each_expr(s, [&](const ExprNode* e) {
    auto* c = dynamic_cast<const CallNode*>(e);
    found = found || (c && c->op == "wait_wgmma");
  });
  struct V : IRVisitor {
    bool* found;
    using IRVisitor::visit;
    void visit_tile_op(const TileOpNode* n) override {
      *found = *found || (n->op == "gemm" && attr_int(*n, "wg_wait", 0) != 0);
      IRVisitor::visit_tile_op(n);
    }
  } v;
  v.found = &found;
  v.visit(s);
  return found;
}

std::string line_of(const Stmt& s) { return "line " + std::to_string(s->span.line); }

bool same_constant_region(const BufferRegion& a, const BufferRegion& b) {
  if (a.buffer != b.buffer || a.ranges.size() != b.ranges.size()) return false;
  for (size_t d = 0; d < a.ranges.size(); ++d) {
    const int64_t *am = const_int(a.ranges[d].min), *ae = const_int(a.ranges[d].extent);
    const int64_t *bm = const_int(b.ranges[d].min), *be = const_int(b.ranges[d].extent);
    if (!am || !ae || !bm || !be || *am != *bm || *ae != *be) return false;
  }
  return true;
}

// Whether `next` may add into the accumulator of `first` while first's group is in flight:
// wgmma instructions of one shape accumulating into the same registers are ordered by the
// hardware. The same accumulator tile (one fragment layout, so one warpgroup split and
// instruction width), inputs of the same width (the same K per instruction), next adding to
// it (no clear) and reading nothing first writes.
bool chains(const TileOpNode& first, const TileOpNode& next) {
  if (!same_constant_region(first.regions[2], next.regions[2]) || attr_int(next, "clear_accum", 0)) return false;
  if (first.regions[0].buffer->dtype.bits != next.regions[0].buffer->dtype.bits) return false;
  const Buffer& c = first.regions[2].buffer;
  return next.regions[0].buffer->data != c->data && next.regions[1].buffer->data != c->data;
}

class Overlap : public IRMutator {
 public:
  std::vector<std::string> report;

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* n) override {
    ++loops_;
    Stmt out = IRMutator::mutate_for(s, n);
    --loops_;
    return out;
  }
  Stmt mutate_while(const Stmt& s, const WhileNode* n) override {
    ++loops_;
    Stmt out = IRMutator::mutate_while(s, n);
    --loops_;
    return out;
  }

  Stmt mutate_seq(const Stmt& s, const SeqStmtNode* n) override {
    Stmt inner = IRMutator::mutate_seq(s, n);
    auto* seq = as<SeqStmtNode>(inner);
    if (!seq) return inner;
    int gemms = 0;
    for (auto& st : seq->seq) gemms += as_gemm(st) ? 1 : 0;
    if (gemms < 2 || program_schedules_wgmma(inner)) return inner;
    std::vector<Stmt> body = issue_early(seq->seq);
    return make_seq(place_waits(body), seq->span);
  }

 private:
  // Step 1: each T.gemm moves up past the statements it does not depend on.
  std::vector<Stmt> issue_early(std::vector<Stmt> body) {
    size_t floor = 0;  // just after the previous T.gemm: gemms keep their order
    for (size_t j = 0; j < body.size(); ++j) {
      if (!as_gemm(body[j])) continue;
      Effects g = effects(body[j]);
      size_t p = j;
      while (p > floor && !as_gemm(body[p - 1]) && !depends(g, effects(body[p - 1]))) --p;
      if (p < j) {
        report.push_back(body[j]->span.str() + ": T.gemm into " + as_gemm(body[j])->regions[2].buffer->name +
                         " issued before the statements at " + line_of(body[p]) +
                         (j - p > 1 ? " to " + line_of(body[j - 1]) : std::string()) +
                         ", which do not touch its operands (its product runs while they do)");
        Stmt g_stmt = body[j];
        body.erase(body.begin() + j);
        body.insert(body.begin() + p, g_stmt);
      }
      floor = p + 1;
    }
    return body;
  }

  // Step 2: T.gemm issued without waiting; waits right before the first dependent statement.
  std::vector<Stmt> place_waits(const std::vector<Stmt>& body) {
    struct Pending {
      Effects e;
      Stmt gemm;
    };
    std::vector<Pending> pending;  // in issue order
    std::vector<Stmt> out;
    Span sp = body.front()->span;
    auto wait = [&](size_t upto, const Stmt& before, const std::string& why) {
      // Groups complete in order: waiting for pending[upto] leaves those after it in flight.
      int64_t in_flight = int64_t(pending.size() - 1 - upto);
      out.push_back(call_stmt("wait_wgmma", {make_int(in_flight)}, before->span));
      const Stmt& g = pending[upto].gemm;
      report.push_back(g->span.str() + ": T.gemm into " + as_gemm(g)->regions[2].buffer->name + " waited for before " +
                       line_of(before) + why +
                       (in_flight ? " (" + std::to_string(in_flight) + " later group" +
                                        (in_flight > 1 ? "s stay" : " stays") + " in flight)"
                                  : std::string()));
      pending.erase(pending.begin(), pending.begin() + upto + 1);
    };
    for (auto& st : body) {
      Effects e = effects(st);
      int last = -1;
      const TileOpNode* g_next = as_gemm(st);
      for (size_t k = 0; k < pending.size(); ++k) {
        bool shared_bytes = loops_ == 0 && pending[k].e.reads_shared && e.writes_shared;
        bool chained = g_next && chains(*as_gemm(pending[k].gemm), *g_next);
        if (chained)
          report.push_back(st->span.str() + ": T.gemm into " + g_next->regions[2].buffer->name +
                           " adds to the accumulator of the T.gemm at " + line_of(pending[k].gemm) +
                           " while that one runs (same instruction shape: the hardware orders them)");
        if (!chained && (depends(pending[k].e, e) || shared_bytes)) last = int(k);
      }
      if (last >= 0)
        wait(size_t(last), st, e.opaque ? ", a barrier, wait or call" : ", which uses its result or rewrites an operand");
      if (auto* g = as_gemm(st)) {
        Attrs attrs = g->attrs;
        attrs["wg_wait"] = int64_t(-1);
        Stmt async = std::make_shared<TileOpNode>(g->op, g->regions, g->args, attrs, g->span);
        out.push_back(async);
        pending.push_back({e, st});
        continue;
      }
      out.push_back(st);
    }
    if (!pending.empty()) {
      out.push_back(call_stmt("wait_wgmma", {make_int(0)}, sp));
      for (auto& p : pending)
        report.push_back(p.gemm->span.str() + ": T.gemm into " + as_gemm(p.gemm)->regions[2].buffer->name +
                         " waited for at the end of its statement sequence");
    }
    return out;
  }

  int loops_ = 0;
};

}  // namespace

PrimFunc overlap_wgmma_groups(const PrimFunc& f, const Target& target) {
  if (target.kind != "cuda" || target.arch_number() < 90 || target.disable_wgmma || target.disable_wgmma_overlap)
    return f;
  Overlap pass;
  Stmt body = pass.mutate(f->body);
  return with_report(body == f->body ? f : with_body(f, body), pass.report);
}

}  // namespace tl
