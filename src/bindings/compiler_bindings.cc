// Lowering, code generation, host compilation and loading, exposed to the JIT layer.
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <unordered_map>

#include "bindings/handles.h"
#include "codegen/cpu/codegen_cpu.h"
#include "codegen/cuda/codegen_cuda.h"
#include "codegen/hip/codegen_hip.h"
#include "codegen/wgsl/codegen_wgsl.h"
#include "ir/error.h"
#include "ir/functor.h"
#include "ir/op.h"
#include "runtime/host_compiler.h"
#include "runtime/host_module.h"
#include "target/target.h"
#include "transform/pipeline/cpu.h"
#include "transform/pipeline/cuda.h"
#include "transform/pipeline/hip.h"
#include "transform/pipeline/webgpu.h"

namespace tl::py {
namespace {

// A loaded kernel entry point. The caller keeps its HostModule alive (JITKernel does).
struct KernelEntry {
  using Fn = int32_t (*)(void* const*);
  Fn fn = nullptr;
  std::string name;
};

int64_t eval_int(const Expr& e, const std::unordered_map<std::string, int64_t>& vars) {
  if (auto* i = as<IntImmNode>(e)) return i->value;
  if (auto* v = as<VarNode>(e)) {
    auto it = vars.find(v->name);
    if (it == vars.end()) fail(ErrorKind::Shape, e->span, "dynamic dimension '" + v->name + "' is not bound");
    return it->second;
  }
  if (auto* c = as<CastNode>(e)) return eval_int(c->value, vars);
  if (auto* s = as<SelectNode>(e)) return eval_int(s->cond, vars) ? eval_int(s->true_value, vars)
                                                                  : eval_int(s->false_value, vars);
  if (auto* b = as<BinaryNode>(e)) {
    int64_t x = eval_int(b->a, vars), y = eval_int(b->b, vars);
    auto fdiv = [](int64_t p, int64_t q) { return p / q - ((p % q != 0) && ((p < 0) != (q < 0))); };
    switch (b->op) {
      case BinaryOp::Add: return x + y;
      case BinaryOp::Sub: return x - y;
      case BinaryOp::Mul: return x * y;
      case BinaryOp::Div: return y ? x / y : 0;
      case BinaryOp::Mod: return y ? x % y : 0;
      case BinaryOp::FloorDiv: return y ? fdiv(x, y) : 0;
      case BinaryOp::FloorMod: return y ? x - fdiv(x, y) * y : 0;
      case BinaryOp::Min: return std::min(x, y);
      case BinaryOp::Max: return std::max(x, y);
      case BinaryOp::EQ: return x == y;
      case BinaryOp::NE: return x != y;
      case BinaryOp::LT: return x < y;
      case BinaryOp::LE: return x <= y;
      case BinaryOp::GT: return x > y;
      case BinaryOp::GE: return x >= y;
      case BinaryOp::And: return x && y;
      case BinaryOp::Or: return x || y;
      case BinaryOp::BitAnd:
      case BinaryOp::BitOr:
      case BinaryOp::BitXor:
      case BinaryOp::ShiftLeft:
      case BinaryOp::ShiftRight:
        if (auto r = fold_bitwise(b->op, b->a->dtype, x, y)) return *r;
        fail(ErrorKind::Shape, e->span, "a shift amount out of range in a shape expression");
    }
  }
  fail(ErrorKind::Shape, e->span, "a shape expression that cannot be evaluated at call time");
}

}  // namespace

void bind_compiler(nb::module_& m) {
  m.def("normalise_target", [](const std::string& s) { return Target::parse(s).str(); });
  // switches: the switch pass configs that are set (Target::set_switch).
  // limits: the device's own, where the runtime knows them (a WebGPU adapter's), in place of
  // the target's defaults: max_threads_per_block, max_threads_per_dim (3 ints), max_grid
  // (3 ints), max_shared_bytes.
  m.def("lower", [](const PyFunc& f, const std::string& target, const std::vector<std::string>& switches,
                    nb::handle limits) {
    Target t = Target::parse(target);
    for (auto& s : switches) t.set_switch(s);
    if (!limits.is_none()) {
      nb::dict d = nb::cast<nb::dict>(limits);
      for (auto [key, value] : d) {
        std::string k = nb::cast<std::string>(key);
        auto three = [&](int64_t* out) {
          auto v = nb::cast<std::vector<int64_t>>(value);
          for (size_t i = 0; i < 3 && i < v.size(); ++i) out[i] = v[i];
        };
        if (k == "max_threads_per_block") t.max_threads_per_block = nb::cast<int64_t>(value);
        else if (k == "max_shared_bytes") t.max_shared_bytes = nb::cast<int64_t>(value);
        else if (k == "max_threads_per_dim") three(t.max_threads_per_dim);
        else if (k == "max_grid") three(t.max_grid);
        else throw nb::key_error(("unknown limit '" + k + "'").c_str());
      }
    }
    if (t.kind == "cuda") return PyFunc{lower_for_cuda(f.f, t)};
    if (t.kind == "hip") return PyFunc{lower_for_hip(f.f, t)};
    if (t.kind == "webgpu") return PyFunc{lower_for_webgpu(f.f, t)};
    return PyFunc{lower_for_cpu(f.f, t)};
  }, nb::arg("func"), nb::arg("target"), nb::arg("switches") = std::vector<std::string>{},
     nb::arg("limits").none() = nb::none());
  // The WGSL of a function lowered for webgpu, with what the runtime needs to launch it.
  m.def("codegen_wgsl", [](const PyFunc& f, const std::string& target, bool has_f16) {
    WgslOptions opts;
    opts.has_f16 = has_f16;
    opts.subgroup = Target::parse(target).subgroup;
    WgslKernel k = codegen_wgsl(f.f, opts);
    nb::dict d;
    d["source"] = k.source;
    nb::list grid;
    for (auto& g : k.grid) grid.append(PyExpr{g});
    d["grid"] = grid;
    d["workgroup_size"] = nb::make_tuple(k.workgroup_size[0], k.workgroup_size[1], k.workgroup_size[2]);
    d["workgroup_bytes"] = k.workgroup_bytes;
    nb::list buffers, uniforms;
    for (auto& b : k.buffers) buffers.append(nb::make_tuple(b.param_index, b.name, b.dtype.str(), b.written));
    for (auto& u : k.uniforms) uniforms.append(nb::make_tuple(u.param_index, u.name, u.dtype.str()));
    d["buffers"] = buffers;
    d["uniforms"] = uniforms;
    d["status_binding"] = k.status_binding;
    // Where the T.Kernel was written, for the runtime's errors about the adapter's limits.
    struct FindKernel : IRVisitor {
      using IRVisitor::visit;
      Span span;
      void visit_kernel(const KernelNode* n) override {
        if (!span.defined()) span = n->span;
      }
    } find;
    find.visit(f.f->body);
    d["kernel_file"] = find.span.defined() ? Span::file_name(find.span.file_id) : std::string();
    d["kernel_line"] = find.span.defined() ? int(find.span.line) : 0;
    return d;
  });
  m.def("codegen", [](const PyFunc& f, const std::string& target) {
    Target t = Target::parse(target);
    if (t.kind == "cuda") {
      CudaCodegenOptions opts;
      if (!t.arch.empty()) opts.arch = t.arch;
      return codegen_cuda(f.f, opts);
    }
    if (t.kind == "hip") {
      HipCodegenOptions opts;
      if (!t.arch.empty()) opts.arch = t.arch;
      return codegen_hip(f.f, opts);
    }
    if (t.kind == "webgpu") {
      WgslOptions opts;
      opts.has_f16 = true;
      opts.subgroup = t.subgroup;
      return codegen_wgsl(f.f, opts).source;
    }
    return codegen_cpu(f.f);
  });
  m.def("host_compiler_id", []() { return host_compiler_id(); });
  m.def("compile_host", [](const std::string& source, const std::string& out, const std::string& include_dir,
                           const std::vector<std::string>& flags) {
    nb::gil_scoped_release release;
    compile_shared_object(source, out, include_dir, flags);
  });
  m.def("eval_int", [](const PyExpr& e, const std::unordered_map<std::string, int64_t>& vars) {
    return eval_int(e.e, vars);
  });
  nb::class_<KernelEntry>(m, "KernelEntry")
      .def("__call__", [](const KernelEntry& k, const std::vector<uintptr_t>& ptrs) {
        std::vector<void*> args(ptrs.size());
        for (size_t i = 0; i < ptrs.size(); ++i) args[i] = reinterpret_cast<void*>(ptrs[i]);
        int32_t rc;
        {
          nb::gil_scoped_release release;
          rc = k.fn(args.data());
        }
        if (rc != 0) fail(ErrorKind::Internal, {}, "kernel '" + k.name + "' returned error code " + std::to_string(rc));
      });
  nb::class_<HostModule>(m, "HostModule")
      .def("__init__", [](HostModule* self, const std::string& path) { new (self) HostModule(path); })
      .def("entry", [](HostModule& mod, const std::string& name) {
        KernelEntry k;
        k.fn = reinterpret_cast<KernelEntry::Fn>(mod.symbol(name));
        k.name = name;
        return k;
      });
}

}  // namespace tl::py
