// Small out-of-line pieces of the IR data structures.
#include <unordered_set>

#include "ir/function.h"

namespace tl {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Mod: return "mod";
    case BinaryOp::FloorDiv: return "floordiv";
    case BinaryOp::FloorMod: return "floormod";
    case BinaryOp::Min: return "min";
    case BinaryOp::Max: return "max";
    case BinaryOp::EQ: return "eq";
    case BinaryOp::NE: return "ne";
    case BinaryOp::LT: return "lt";
    case BinaryOp::LE: return "le";
    case BinaryOp::GT: return "gt";
    case BinaryOp::GE: return "ge";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
    case BinaryOp::BitAnd: return "bitwise_and";
    case BinaryOp::BitOr: return "bitwise_or";
    case BinaryOp::BitXor: return "bitwise_xor";
    case BinaryOp::ShiftLeft: return "shift_left";
    case BinaryOp::ShiftRight: return "shift_right";
  }
  return "?";
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::EQ || op == BinaryOp::NE || op == BinaryOp::LT || op == BinaryOp::LE ||
         op == BinaryOp::GT || op == BinaryOp::GE;
}
bool is_logical(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }
bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitAnd || op == BinaryOp::BitOr || op == BinaryOp::BitXor || is_shift(op);
}
bool is_shift(BinaryOp op) { return op == BinaryOp::ShiftLeft || op == BinaryOp::ShiftRight; }

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial: return "serial";
    case ForKind::Parallel: return "Parallel";
    case ForKind::Unrolled: return "unroll";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Pipelined: return "Pipelined";
  }
  return "?";
}

std::vector<Expr> BufferNode::effective_strides() const {
  if (!strides.empty()) return strides;
  std::vector<Expr> out(shape.size());
  Expr acc = make_int(1, shape.empty() ? DataType::Int(32) : shape.back()->dtype);
  for (size_t i = shape.size(); i-- > 0;) {
    out[i] = acc;
    const int64_t* a = const_int(acc);
    const int64_t* s = const_int(shape[i]);
    if (a && s) {
      acc = make_int(*a * *s, acc->dtype);
    } else if (a && *a == 1) {
      acc = shape[i];
    } else {
      DataType t = acc->dtype.bits >= shape[i]->dtype.bits ? acc->dtype : shape[i]->dtype;
      acc = std::make_shared<BinaryNode>(BinaryOp::Mul, t, acc, shape[i]);
    }
  }
  return out;
}

int64_t BufferNode::const_size() const {
  int64_t n = 1;
  for (auto& e : shape) {
    const int64_t* v = const_int(e);
    if (!v) return -1;
    n *= *v;
  }
  return n;
}

Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape, std::string scope,
                   Span span, std::vector<Expr> strides) {
  auto b = std::make_shared<BufferNode>();
  b->data = make_var(name, DataType::Handle(), span);
  b->name = std::move(name);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->strides = std::move(strides);
  b->scope = std::move(scope);
  b->span = span;
  return b;
}

Buffer make_alias(const Buffer& src, std::string name, DataType dtype, std::vector<Expr> shape, Span span) {
  auto b = std::make_shared<BufferNode>();
  b->data = src->data;
  b->is_view = true;
  b->name = std::move(name);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->scope = src->scope;
  b->span = span;
  return b;
}

BufferRegion full_region(const Buffer& b, Span span) {
  BufferRegion r{b, {}, span};
  for (auto& e : b->shape) r.ranges.push_back({make_int(0, e->dtype), e});
  return r;
}

Stmt make_seq(std::vector<Stmt> stmts, Span span) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s) continue;
    if (auto* seq = as<SeqStmtNode>(s)) {
      flat.insert(flat.end(), seq->seq.begin(), seq->seq.end());
    } else {
      flat.push_back(s);
    }
  }
  if (flat.size() == 1) return flat[0];
  if (!span.defined() && !flat.empty()) span = flat[0]->span;
  return std::make_shared<SeqStmtNode>(std::move(flat), span);
}

Stmt call_stmt(const std::string& op, std::vector<Expr> args, Span span) {
  return std::make_shared<EvaluateNode>(std::make_shared<CallNode>(DataType::Void(), op, std::move(args), span), span);
}

std::vector<Var> shape_vars(const PrimFuncNode& f) {
  std::vector<Var> out;
  std::unordered_set<const VarNode*> seen;
  for (auto& p : f.params) {
    if (!p.is_buffer()) continue;
    for (auto* dims : {&p.buffer->shape, &p.buffer->strides}) {
      for (auto& e : *dims) {
        if (auto* v = as<VarNode>(e)) {
          if (seen.insert(v).second) out.push_back(std::static_pointer_cast<const VarNode>(e));
        }
      }
    }
  }
  return out;
}

}  // namespace tl
