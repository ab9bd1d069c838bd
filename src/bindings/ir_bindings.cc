// IR construction from Python: expressions (with operators), buffers, statements, functions.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "bindings/handles.h"
#include "arith/analyzer.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/structural.h"
#include "op/async_scope.h"
#include "op/region.h"

namespace tl::py {

Span& current_span() {
  static thread_local Span span;
  return span;
}

DataType to_dtype(const std::string& s) {
  try {
    return DataType::parse(s);
  } catch (const std::invalid_argument&) {
    fail(ErrorKind::Type, current_span(), "unknown dtype '" + s + "'",
         "use a dtype name such as \"float16\", \"bfloat16\", \"float32\", \"int32\", \"bool\"");
  }
}

Expr to_expr(nb::handle h) {
  if (nb::isinstance<PyExpr>(h)) return nb::cast<PyExpr&>(h).e;
  Span sp = current_span();
  if (PyBool_Check(h.ptr())) return make_bool(h.ptr() == Py_True, sp);
  if (PyLong_Check(h.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow) fail(ErrorKind::Type, sp, "integer constant does not fit in 64 bits");
    bool fits32 = v >= INT32_MIN && v <= INT32_MAX;
    return make_int(v, fits32 ? DataType::Int(32) : DataType::Int(64), sp);
  }
  if (PyFloat_Check(h.ptr())) return make_float(PyFloat_AsDouble(h.ptr()), DataType::Float(32), sp);
  // numpy scalars and other number-likes
  if (PyIndex_Check(h.ptr())) return to_expr(nb::steal(PyNumber_Index(h.ptr())));
  if (nb::hasattr(h, "__float__")) return to_expr(nb::float_(nb::borrow(h)));
  if (nb::isinstance<PyBuffer>(h))
    fail(ErrorKind::Type, sp, "buffer '" + nb::cast<PyBuffer&>(h).b->name + "' used as a scalar value",
         "index it, e.g. " + nb::cast<PyBuffer&>(h).b->name + "[i]");
  std::string tname = nb::cast<std::string>(nb::str(h.type().attr("__name__")));
  fail(ErrorKind::Type, sp, "a value of Python type '" + tname + "' cannot be used in a kernel expression",
       "kernel expressions take numbers, loop variables, buffer elements and T.* results");
}

std::vector<Expr> to_exprs(nb::handle seq) {
  std::vector<Expr> out;
  for (nb::handle h : seq) out.push_back(to_expr(h));
  return out;
}

BufferRegion to_region(nb::handle h) {
  auto tup = nb::cast<nb::tuple>(h);
  BufferRegion r;
  r.buffer = nb::cast<PyBuffer&>(tup[0]).b;
  r.span = current_span();
  // A slice's extent is stop - start: `(bx + 1) * 1 - bx * 1` must read as 1.
  arith::Analyzer analyzer;
  for (nb::handle rg : tup[1]) {
    auto pair = nb::cast<nb::tuple>(rg);
    r.ranges.push_back({to_expr(pair[0]), analyzer.simplify(to_expr(pair[1]))});
  }
  return r;
}

Attrs to_attrs(nb::handle dict) {
  Attrs attrs;
  if (dict.is_none()) return attrs;
  for (auto [k, v] : nb::cast<nb::dict>(dict)) {
    std::string key = nb::cast<std::string>(k);
    if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr())) {
      attrs[key] = int64_t(nb::cast<int64_t>(v));
    } else if (PyFloat_Check(v.ptr())) {
      attrs[key] = nb::cast<double>(v);
    } else if (PyUnicode_Check(v.ptr())) {
      attrs[key] = nb::cast<std::string>(v);
    } else if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {
      std::vector<int64_t> ints;
      for (nb::handle x : v) ints.push_back(nb::cast<int64_t>(x));
      attrs[key] = ints;
    } else {
      attrs[key] = to_expr(v);
    }
  }
  return attrs;
}

namespace {

nb::object wrap(Expr e) { return nb::cast(PyExpr{std::move(e)}); }

const char* expr_kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::IntImm: return "IntImm";
    case ExprKind::FloatImm: return "FloatImm";
    case ExprKind::StringImm: return "StringImm";
    case ExprKind::Var: return "Var";
    case ExprKind::Binary: return "Binary";
    case ExprKind::Not: return "Not";
    case ExprKind::Select: return "Select";
    case ExprKind::Cast: return "Cast";
    case ExprKind::BufferLoad: return "BufferLoad";
    case ExprKind::Call: return "Call";
  }
  return "?";
}

BinaryOp parse_op(const std::string& s) {
  static const std::pair<const char*, BinaryOp> ops[] = {
      {"add", BinaryOp::Add}, {"sub", BinaryOp::Sub}, {"mul", BinaryOp::Mul},
      {"div", BinaryOp::Div}, {"mod", BinaryOp::Mod}, {"floordiv", BinaryOp::FloorDiv},
      {"floormod", BinaryOp::FloorMod}, {"min", BinaryOp::Min}, {"max", BinaryOp::Max},
      {"eq", BinaryOp::EQ}, {"ne", BinaryOp::NE}, {"lt", BinaryOp::LT}, {"le", BinaryOp::LE},
      {"gt", BinaryOp::GT}, {"ge", BinaryOp::GE}, {"and", BinaryOp::And}, {"or", BinaryOp::Or},
      {"bitwise_and", BinaryOp::BitAnd}, {"bitwise_or", BinaryOp::BitOr}, {"bitwise_xor", BinaryOp::BitXor},
      {"shift_left", BinaryOp::ShiftLeft}, {"shift_right", BinaryOp::ShiftRight},
  };
  for (auto& [name, op] : ops)
    if (s == name) return op;
  fail(ErrorKind::Internal, current_span(), "unknown binary operator '" + s + "'");
}

ForKind parse_for_kind(const std::string& s) {
  if (s == "serial") return ForKind::Serial;
  if (s == "parallel") return ForKind::Parallel;
  if (s == "unroll") return ForKind::Unrolled;
  if (s == "vectorized") return ForKind::Vectorized;
  if (s == "pipelined") return ForKind::Pipelined;
  fail(ErrorKind::Internal, current_span(), "unknown loop kind '" + s + "'");
}

// Python's `/` on two integers is true division; in a kernel we follow the DSL and make
// it a float division only when an operand is a float, else truncating integer division.
nb::object bin(BinaryOp op, nb::handle a, nb::handle b) {
  return wrap(binary(op, to_expr(a), to_expr(b), current_span()));
}

template <BinaryOp Op>
void def_op(nb::class_<PyExpr>& c, const char* name, const char* rname) {
  c.def(name, [](nb::handle a, nb::handle b) { return bin(Op, a, b); });
  if (rname) c.def(rname, [](nb::handle a, nb::handle b) { return bin(Op, b, a); });
}

}  // namespace

void bind_ir(nb::module_& m) {
  m.def("set_span", [](const std::string& file, int line, int col) {
    current_span() = Span{file.empty() ? 0u : Span::intern(file), line, col};
  });
  m.def("get_span_line", []() { return current_span().line; });
  // (file, line) of the current span: where the front end or the compile call last was.
  m.def("get_span", []() {
    Span sp = current_span();
    return nb::make_tuple(sp.defined() ? Span::file_name(sp.file_id) : std::string(), sp.line);
  });

  auto expr = nb::class_<PyExpr>(m, "Expr");
  expr.def_prop_ro("dtype", [](const PyExpr& x) { return x.e->dtype.str(); })
      .def_prop_ro("kind", [](const PyExpr& x) { return expr_kind_name(x.e->kind); })
      .def_prop_ro("name", [](const PyExpr& x) -> nb::object {
        if (auto* v = as<VarNode>(x.e)) return nb::str(v->name.c_str());
        return nb::none();
      })
      .def_prop_ro("value", [](const PyExpr& x) -> nb::object {
        if (auto* i = as<IntImmNode>(x.e)) {
          if (x.e->dtype.is_bool()) return nb::bool_(i->value != 0);
          return nb::int_(i->value);
        }
        if (auto* f = as<FloatImmNode>(x.e)) return nb::float_(f->value);
        if (auto* s = as<StringImmNode>(x.e)) return nb::str(s->value.c_str());
        return nb::none();
      })
      .def("same_as", [](const PyExpr& a, const PyExpr& b) { return a.e == b.e; })
      .def("structural_equal", [](const PyExpr& a, const PyExpr& b) { return structural_equal(a.e, b.e); })
      .def("__repr__", [](const PyExpr& x) { return to_string(x.e); })
      .def("__hash__", [](const PyExpr& x) { return (intptr_t)x.e.get(); })
      .def("__neg__", [](const PyExpr& x) { return wrap(neg(x.e, current_span())); })
      .def("__pos__", [](const PyExpr& x) { return wrap(x.e); })
      .def("__abs__", [](const PyExpr& x) { return wrap(call("abs", {x.e}, current_span())); })
      // ~ & | ^ << >>: C's bit operations on integers; on bools ~ & | ^ are logical (op.h).
      .def("__invert__", [](const PyExpr& x) { return wrap(bitwise_not(x.e, current_span())); })
      .def("__pow__", [](nb::handle a, nb::handle b) {
        return wrap(call("pow", {to_expr(a), to_expr(b)}, current_span()));
      })
      .def("__rpow__", [](nb::handle a, nb::handle b) {
        return wrap(call("pow", {to_expr(b), to_expr(a)}, current_span()));
      });
  def_op<BinaryOp::Add>(expr, "__add__", "__radd__");
  def_op<BinaryOp::Sub>(expr, "__sub__", "__rsub__");
  def_op<BinaryOp::Mul>(expr, "__mul__", "__rmul__");
  def_op<BinaryOp::Div>(expr, "__truediv__", "__rtruediv__");
  def_op<BinaryOp::FloorDiv>(expr, "__floordiv__", "__rfloordiv__");
  def_op<BinaryOp::FloorMod>(expr, "__mod__", "__rmod__");
  def_op<BinaryOp::LT>(expr, "__lt__", nullptr);
  def_op<BinaryOp::LE>(expr, "__le__", nullptr);
  def_op<BinaryOp::GT>(expr, "__gt__", nullptr);
  def_op<BinaryOp::GE>(expr, "__ge__", nullptr);
  def_op<BinaryOp::EQ>(expr, "__eq__", nullptr);
  def_op<BinaryOp::NE>(expr, "__ne__", nullptr);
  def_op<BinaryOp::BitAnd>(expr, "__and__", "__rand__");
  def_op<BinaryOp::BitOr>(expr, "__or__", "__ror__");
  def_op<BinaryOp::BitXor>(expr, "__xor__", "__rxor__");
  def_op<BinaryOp::ShiftLeft>(expr, "__lshift__", "__rlshift__");
  def_op<BinaryOp::ShiftRight>(expr, "__rshift__", "__rrshift__");

  m.def("const", [](nb::handle v, const std::string& dtype) {
    return wrap(cast(to_dtype(dtype), to_expr(v), current_span()));
  });
  m.def("string", [](const std::string& s) { return wrap(std::make_shared<StringImmNode>(s, current_span())); });
  m.def("var", [](const std::string& name, const std::string& dtype) {
    return wrap(make_var(name, to_dtype(dtype), current_span()));
  });
  m.def("binary", [](const std::string& op, nb::handle a, nb::handle b) { return bin(parse_op(op), a, b); });
  m.def("logical_not", [](nb::handle a) { return wrap(logical_not(to_expr(a), current_span())); });
  m.def("bitwise_not", [](nb::handle a) { return wrap(bitwise_not(to_expr(a), current_span())); });
  m.def("select", [](nb::handle c, nb::handle t, nb::handle f) {
    return wrap(select(to_expr(c), to_expr(t), to_expr(f), current_span()));
  });
  m.def("cast", [](const std::string& dtype, nb::handle v) {
    return wrap(cast(to_dtype(dtype), to_expr(v), current_span()));
  });
  m.def("call", [](const std::string& op, nb::handle args) {
    return wrap(call(op, to_exprs(args), current_span()));
  });
  // A call of a given result dtype that is not a checked intrinsic: T.call_extern,
  // T.access_ptr (address_of), T.reinterpret.
  m.def("call_typed", [](const std::string& dtype, const std::string& op, nb::handle args) {
    return wrap(std::make_shared<CallNode>(to_dtype(dtype), op, to_exprs(args), current_span()));
  });
  m.def("call_void", [](const std::string& op, nb::handle args) {
    return wrap(std::make_shared<CallNode>(DataType::Void(), op, to_exprs(args), current_span()));
  });
  m.def("max_value", [](const std::string& t) { return wrap(max_value(to_dtype(t), current_span())); });
  m.def("min_value", [](const std::string& t) { return wrap(min_value(to_dtype(t), current_span())); });
  m.def("infinity", [](const std::string& t) { return wrap(infinity(to_dtype(t), current_span())); });
  m.def("load", [](const PyBuffer& b, nb::handle idx) {
    return wrap(std::make_shared<BufferLoadNode>(b.b->dtype, b.b, to_exprs(idx), current_span()));
  });

  m.def("load_parts", [](const PyExpr& e) {
    auto* l = as<BufferLoadNode>(e.e);
    if (!l) fail(ErrorKind::Type, current_span(), "expected a buffer element");
    std::vector<PyExpr> idx;
    for (auto& i : l->indices) idx.push_back({i});
    return nb::make_tuple(PyBuffer{l->buffer}, idx);
  });
  // The (min, extent) pairs of the region `A[i, j]` stands for next to a tile of the given
  // extents (op/region.h says how).
  m.def("region_at_point", [](const PyExpr& e, nb::handle tile, const std::string& what) {
    auto* l = as<BufferLoadNode>(e.e);
    if (!l) fail(ErrorKind::Type, current_span(), what + ": expected a buffer element");
    BufferRegion r = region_at_point(l->buffer, l->indices, to_exprs(tile), what, current_span());
    nb::list out;
    for (auto& rg : r.ranges) out.append(nb::make_tuple(PyExpr{rg.min}, PyExpr{rg.extent}));
    return out;
  });


  nb::class_<PyBuffer>(m, "Buffer")
      .def_prop_ro("name", [](const PyBuffer& b) { return b.b->name; })
      .def_prop_ro("dtype", [](const PyBuffer& b) { return b.b->dtype.str(); })
      .def_prop_ro("scope", [](const PyBuffer& b) { return b.b->scope; })
      .def_prop_ro("shape", [](const PyBuffer& b) {
        std::vector<PyExpr> out;
        for (auto& e : b.b->shape) out.push_back({e});
        return out;
      })
      .def_prop_ro("strides", [](const PyBuffer& b) {
        std::vector<PyExpr> out;
        for (auto& e : b.b->strides) out.push_back({e});
        return out;
      })
      .def_prop_ro("data", [](const PyBuffer& b) { return PyExpr{b.b->data}; })
      .def("same_as", [](const PyBuffer& a, const PyBuffer& b) { return a.b == b.b; })
      .def("__hash__", [](const PyBuffer& b) { return (intptr_t)b.b.get(); });
  m.def("make_buffer", [](const std::string& name, const std::string& dtype, nb::handle shape,
                          const std::string& scope, nb::handle strides) {
    return PyBuffer{make_buffer(name, to_dtype(dtype), to_exprs(shape), scope, current_span(),
                                strides.is_none() ? std::vector<Expr>{} : to_exprs(strides))};
  }, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("scope"), nb::arg("strides").none());

  m.def("make_alias", [](const PyBuffer& src, const std::string& name, const std::string& dtype, nb::handle shape) {
    return PyBuffer{make_alias(src.b, name, to_dtype(dtype), to_exprs(shape), current_span())};
  });
  // Whether a == b for every value of the variables in them (T.reshape's element counts).
  m.def("prove_equal", [](nb::handle a, nb::handle b) {
    Expr x = to_expr(a), y = to_expr(b);
    DataType t = DataType::Int(64);
    arith::Analyzer analyzer;
    return analyzer.can_prove(binary(BinaryOp::EQ, cast(t, x), cast(t, y)));
  });

  // e with the given variables replaced by their values, simplified: a slice's extent over
  // names bound in the kernel (H1 - H0 with H1 = H0 + 64 is 64).
  // bindings: (var, value) in the order they were made (a value may use earlier vars), so
  // they are replaced from the last to the first.
  m.def("simplify_with", [](nb::handle e, nb::handle bindings) {
    std::vector<std::pair<const VarNode*, Expr>> lets;
    for (nb::handle pair : bindings) {
      Expr v = to_expr(pair[0]);
      if (auto* node = as<VarNode>(v)) lets.emplace_back(node, to_expr(pair[1]));
    }
    Expr out = to_expr(e);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) out = substitute(out, {{it->first, it->second}});
    arith::Analyzer analyzer;
    return wrap(analyzer.simplify(out));
  });

  nb::class_<PyStmt>(m, "Stmt").def("__repr__", [](const PyStmt& s) { return to_string(s.s); });
  auto stmt_or_null = [](nb::handle h) -> Stmt { return h.is_none() ? nullptr : nb::cast<PyStmt&>(h).s; };
  m.def("seq", [](nb::handle items) {
    std::vector<Stmt> v;
    for (nb::handle h : items) v.push_back(nb::cast<PyStmt&>(h).s);
    return PyStmt{make_seq(std::move(v), current_span())};
  });
  m.def("for_", [=](const PyExpr& var, nb::handle mn, nb::handle ext, const std::string& kind, nb::handle body,
                    nb::handle attrs) {
    auto v = std::static_pointer_cast<const VarNode>(var.e);
    return PyStmt{std::make_shared<ForNode>(v, to_expr(mn), to_expr(ext), parse_for_kind(kind),
                                            stmt_or_null(body), to_attrs(attrs), current_span())};
  }, nb::arg("var"), nb::arg("min"), nb::arg("extent"), nb::arg("kind"), nb::arg("body").none(), nb::arg("attrs").none());
  m.def("while_", [=](nb::handle c, nb::handle body) {
    return PyStmt{std::make_shared<WhileNode>(cast(DataType::Bool(), to_expr(c)), stmt_or_null(body), current_span())};
  }, nb::arg("cond"), nb::arg("body").none());
  m.def("if_", [=](nb::handle c, nb::handle t, nb::handle e) {
    return PyStmt{std::make_shared<IfThenElseNode>(cast(DataType::Bool(), to_expr(c)), stmt_or_null(t),
                                                   stmt_or_null(e), current_span())};
  }, nb::arg("cond"), nb::arg("then_case").none(), nb::arg("else_case").none());
  m.def("store", [](const PyBuffer& b, nb::handle value, nb::handle idx) {
    Expr v = cast(b.b->dtype, to_expr(value), current_span());
    return PyStmt{std::make_shared<BufferStoreNode>(b.b, v, to_exprs(idx), current_span())};
  });
  m.def("let", [=](const PyExpr& var, nb::handle value, nb::handle body) {
    auto v = std::static_pointer_cast<const VarNode>(var.e);
    return PyStmt{std::make_shared<LetStmtNode>(v, to_expr(value), stmt_or_null(body), current_span())};
  }, nb::arg("var"), nb::arg("value"), nb::arg("body").none());
  // `with T.attr(node, "async_scope", 1):` -- the body's global -> shared copies as cp.async.
  m.def("async_scope", [](const PyStmt& body) { return PyStmt{async_scope_copies(body.s)}; });
  m.def("evaluate", [](nb::handle e) { return PyStmt{std::make_shared<EvaluateNode>(to_expr(e), current_span())}; });
  m.def("allocate", [=](const PyBuffer& b, nb::handle body, nb::handle attrs) {
    // The allocation is where the buffer was made (its T.alloc_* line), not where the front
    // end's frame that closes it ends.
    Span where = b.b->span.defined() ? b.b->span : current_span();
    return PyStmt{std::make_shared<AllocateNode>(b.b, stmt_or_null(body), to_attrs(attrs), where)};
  }, nb::arg("buffer"), nb::arg("body").none(), nb::arg("attrs").none());
  m.def("tile_op", [](const std::string& op, nb::handle regions, nb::handle args, nb::handle attrs) {
    std::vector<BufferRegion> rs;
    for (nb::handle r : regions) rs.push_back(to_region(r));
    return PyStmt{std::make_shared<TileOpNode>(op, std::move(rs), to_exprs(args), to_attrs(attrs), current_span())};
  }, nb::arg("op"), nb::arg("regions"), nb::arg("args"), nb::arg("attrs").none());
  m.def("kernel", [=](nb::handle block_vars, nb::handle grid, nb::handle thread_vars, std::vector<int64_t> threads,
                      nb::handle body, std::vector<int64_t> cluster) {
    auto vars = [](nb::handle seq) {
      std::vector<Var> out;
      for (nb::handle h : seq) out.push_back(std::static_pointer_cast<const VarNode>(nb::cast<PyExpr&>(h).e));
      return out;
    };
    return PyStmt{std::make_shared<KernelNode>(vars(block_vars), to_exprs(grid), vars(thread_vars),
                                               std::move(threads), stmt_or_null(body), current_span(),
                                               std::move(cluster))};
  }, nb::arg("block_vars"), nb::arg("grid"), nb::arg("thread_vars"), nb::arg("threads"), nb::arg("body").none(),
     nb::arg("cluster") = std::vector<int64_t>{});

  nb::class_<PyFunc>(m, "PrimFunc")
      .def_prop_ro("name", [](const PyFunc& f) { return f.f->name; })
      .def("script", [](const PyFunc& f) { return to_string(f.f); })
      // Indices of the buffer parameters the kernel writes (stores, tile operator
      // destinations, atomics): the arguments a call must be able to write.
      .def("written_params", [](const PyFunc& f) {
        // By storage: a T.reshape/T.view of a parameter writes the parameter.
        auto written = storage_written(f.f->body);
        std::vector<int> out;
        for (size_t i = 0; i < f.f->params.size(); ++i)
          if (f.f->params[i].is_buffer() && f.f->params[i].buffer->data &&
              written.count(f.f->params[i].buffer->data.get()))
            out.push_back(int(i));
        return out;
      })
      .def("lowering_report", [](const PyFunc& f) {
        auto it = f.f->attrs.find("lowering_report");
        return it != f.f->attrs.end() && std::holds_alternative<std::string>(it->second)
                   ? std::get<std::string>(it->second)
                   : std::string();
      })
      .def("structural_hash", [](const PyFunc& f) { return structural_hash(f.f); })
      .def("structural_equal", [](const PyFunc& a, const PyFunc& b) { return structural_equal(a.f, b.f); })
      .def("shape_vars", [](const PyFunc& f) {
        std::vector<PyExpr> out;
        for (auto& v : shape_vars(*f.f)) out.push_back({v});
        return out;
      })
      .def("__repr__", [](const PyFunc& f) { return to_string(f.f); });
  m.def("make_prim_func", [](const std::string& name, nb::handle params, const PyStmt& body, nb::handle attrs) {
    auto f = std::make_shared<PrimFuncNode>();
    f->name = name;
    f->span = current_span();
    for (nb::handle p : params) {
      if (nb::isinstance<PyBuffer>(p)) {
        auto& b = nb::cast<PyBuffer&>(p).b;
        f->params.push_back({b->data, b});
      } else {
        f->params.push_back({std::static_pointer_cast<const VarNode>(nb::cast<PyExpr&>(p).e), nullptr});
      }
    }
    f->body = body.s;
    f->attrs = to_attrs(attrs);
    return PyFunc{f};
  }, nb::arg("name"), nb::arg("params"), nb::arg("body"), nb::arg("attrs").none());
}

}  // namespace tl::py
