// The extension module tilelang._C. Compile errors become the typed exceptions of
// tilelang.errors, carrying the user's file:line and the hint.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings/handles.h"
#include "ir/error.h"

namespace tl::py {
namespace {

const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Syntax: return "syntax";
    case ErrorKind::Name: return "name";
    case ErrorKind::Type: return "type";
    case ErrorKind::Shape: return "shape";
    case ErrorKind::Bounds: return "bounds";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Layout: return "layout";
    case ErrorKind::Internal: return "internal";
  }
  return "internal";
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const CompileError& e) {
    Span span = e.span().defined() ? e.span() : current_span();
    nb::object make = nb::module_::import_("tilelang.errors").attr("_from_compiler");
    nb::object exc = make(kind_name(e.kind()), e.what(), span.defined() ? Span::file_name(span.file_id) : "",
                          span.line, e.hint());
    PyErr_SetObject((PyObject*)Py_TYPE(exc.ptr()), exc.ptr());
  }
}

}  // namespace
}  // namespace tl::py

NB_MODULE(_C, m) {
  nanobind::register_exception_translator(tl::py::translate);
  tl::py::bind_ir(m);
  tl::py::bind_compiler(m);
  tl::py::bind_cuda(m);
  tl::py::bind_layouts(m);
}
