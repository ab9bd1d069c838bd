// The marks of warp specialisation before warp_specialize splits the block: the TMA
// pipeline's loop (attribute ws_pipeline) and the work of one role (`if ws_role(r): ...`,
// r = 1 the producer, 0 the consumers), in the loop's body or around it.
#pragma once
#include "ir/op.h"
#include "ir/stmt.h"

namespace tl {

inline bool is_ws_loop(const Stmt& s) {
  auto* f = as<ForNode>(s);
  return f && f->attrs.count("ws_pipeline");
}

// r for a branch `if ws_role(r): ...` (no else), -1 for any other statement.
inline int64_t role_of(const Stmt& s) {
  auto* branch = as<IfThenElseNode>(s);
  auto* cond = branch && !branch->else_case ? as<CallNode>(branch->cond) : nullptr;
  return cond && cond->op == "ws_role" ? *const_int(cond->args.at(0)) : -1;
}

// `if ws_role(r): body`.
inline Stmt role_branch(int64_t r, Stmt body, Span sp) {
  Expr cond = std::make_shared<CallNode>(DataType::Bool(), "ws_role", std::vector<Expr>{make_int(r)}, sp);
  return std::make_shared<IfThenElseNode>(cond, std::move(body), nullptr, sp);
}

}  // namespace tl
