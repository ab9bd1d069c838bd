// Read with cuda.cc: the same passes, for an AMD GPU. What differs is decided inside them
// by the target: the wavefront size (Target::warp_size: 64 on CDNA, 32 on RDNA) for
// reductions by shuffles, the LDS limit for check_block_budget, T.gemm on SIMT
// multiply-adds (reported as a slower path), T.Pipelined copies as plain loads into LDS;
// TMA, wgmma, mma.sync, ldmatrix, clusters and warp specialisation are never chosen.
#include "transform/pipeline/hip.h"

#include "ir/error.h"
#include "ir/functor.h"
#include "transform/pipeline/cuda.h"

namespace tl {
namespace {

bool is_float8(DataType t) { return t.code == TypeCode::Float8E4M3 || t.code == TypeCode::Float8E5M2; }

const char* const kFloat8Hint = "use float16 or bfloat16 on target hip (or target=\"cuda\" for float8)";

// float8 tensors and tiles are refused at their declaration: CDNA 3's float8 are the FNUZ
// formats, which differ from the IR's e4m3/e5m2.
void check_dtypes(const PrimFunc& f) {
  for (auto& p : f->params)
    if (p.is_buffer() && is_float8(p.buffer->dtype))
      fail(ErrorKind::Unsupported, p.buffer->span,
           "tensor '" + p.buffer->name + "' has dtype " + p.buffer->dtype.str() + ", which target hip does not support",
           kFloat8Hint);
  struct Visitor : IRVisitor {
    using IRVisitor::visit;
    void visit_allocate(const AllocateNode* n) override {
      if (is_float8(n->buffer->dtype))
        fail(ErrorKind::Unsupported, n->span,
             "buffer '" + n->buffer->name + "' has dtype " + n->buffer->dtype.str() +
                 ", which target hip does not support",
             kFloat8Hint);
      IRVisitor::visit_allocate(n);
    }
  } visitor;
  visitor.visit(f->body);
}

}  // namespace

PrimFunc lower_for_hip(const PrimFunc& f, const Target& target) {
  if (target.kind != "hip" || !Target::hip_wave_size(target.arch))
    fail(ErrorKind::Unsupported, {}, "target '" + target.str() + "' names no AMD architecture",
         "give one, e.g. target=\"hip -arch=gfx942\" (the wavefront is 64 lanes on CDNA, 32 on RDNA, and the "
         "generated reductions depend on it)");
  check_dtypes(f);
  return lower_for_cuda(f, target);
}

}  // namespace tl
