// The layouts a GPU lowering infers, as tables Python can picture: for every fragment,
// the thread and register slot of each element; for every swizzled shared buffer, the
// physical offset of each element of one [rows, cols] tile.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "bindings/handles.h"
#include "ir/error.h"
#include "layout/layout.h"
#include "layout/swizzle.h"
#include "target/target.h"
#include "transform/lower_to_threads.h"
#include "transform/pipeline/cuda.h"
#include "transform/pipeline/hip.h"
#include "transform/pipeline/webgpu.h"

namespace tl::py {
namespace {

std::vector<int64_t> const_shape(const BufferNode* b) {
  std::vector<int64_t> shape;
  for (auto& e : b->shape) {
    const int64_t* v = const_int(e);
    shape.push_back(v ? *v : -1);
  }
  return shape;
}

nb::dict describe_fragment(const BufferNode* b, const TilePartition& p) {
  nb::dict d;
  d["kind"] = "fragment";
  d["name"] = b->name;
  d["dtype"] = b->dtype.str();
  d["shape"] = p.shape();
  d["threads"] = p.threads();
  d["replicas"] = p.replicas();
  d["partition"] = p.str();
  d["line"] = int(b->span.line);
  // thread[r * size + flat]: the thread holding copy r of the element at row-major
  // position flat; local[flat]: its register slot (the same in every copy).
  int64_t size = shape_size(p.shape());
  std::vector<int64_t> thread, local;
  thread.reserve(size * p.replicas());
  local.reserve(size);
  for (int64_t r = 0; r < p.replicas(); ++r)
    for (int64_t flat = 0; flat < size; ++flat) thread.push_back(p.thread_of(unflatten_row_major(flat, p.shape()), r));
  for (int64_t flat = 0; flat < size; ++flat) {
    std::vector<Expr> index;
    for (int64_t v : unflatten_row_major(flat, p.shape())) index.push_back(make_int(v));
    local.push_back(evaluate_index(p.local_index(index), {}));
  }
  d["thread"] = thread;
  d["local"] = local;
  return d;
}

nb::dict describe_shared(const BufferNode* b, const SharedSwizzle& s) {
  std::vector<int64_t> shape = const_shape(b);
  int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1, cols = shape.back();
  nb::dict d;
  d["kind"] = "shared";
  d["name"] = b->name;
  d["dtype"] = b->dtype.str();
  d["bits"] = int(b->dtype.bits);
  d["shape"] = shape;
  d["swizzle"] = std::string(swizzle_mode_name(s.mode));
  d["panel_cols"] = s.panelled(cols) ? s.panel_cols : int64_t(0);
  d["line"] = int(b->span.line);
  // offset[r * cols + c]: the element offset of (r, c) inside one rows x cols tile.
  Layout layout = make_shared_layout(rows, cols, b->dtype.bits, s);
  std::vector<int64_t> offset;
  offset.reserve(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) offset.push_back(layout.evaluate_flat({r, c}));
  d["tile"] = std::vector<int64_t>{rows, cols};
  d["offset"] = offset;
  return d;
}

}  // namespace

void bind_layouts(nb::module_& m) {
  // Lowers func for a GPU target (nothing is compiled) and returns, kernel by kernel in
  // program order, a list of dicts: one per fragment, then one per swizzled shared buffer.
  m.def("kernel_layouts", [](const PyFunc& f, const std::string& target, const std::vector<std::string>& switches) {
    Target t = Target::parse(target);
    for (auto& s : switches) t.set_switch(s);
    nb::list out;
    if (t.kind != "cuda" && t.kind != "hip" && t.kind != "webgpu") return out;  // the CPU back end has no thread layouts
    ObserveLayouts observe([&](const KernelNode&, const KernelLayouts& layouts) {
      auto by_line = [](auto& items) {
        std::sort(items.begin(), items.end(), [](auto& a, auto& b) {
          return a.first->span.line != b.first->span.line ? a.first->span.line < b.first->span.line
                                                          : a.first->name < b.first->name;
        });
      };
      std::vector<std::pair<const BufferNode*, const TilePartition*>> fragments;
      for (auto& [b, p] : layouts.fragments) fragments.push_back({b, &p});
      by_line(fragments);
      std::vector<std::pair<const BufferNode*, const SharedSwizzle*>> shared;
      for (auto& [b, s] : layouts.swizzled)
        if (s.mode != SwizzleMode::None) shared.push_back({b, &s});
      by_line(shared);
      // The buffers live as long as the lowering: the tables are built now.
      for (auto& [b, p] : fragments) out.append(describe_fragment(b, *p));
      for (auto& [b, s] : shared) out.append(describe_shared(b, *s));
    });
    if (t.kind == "cuda") lower_for_cuda(f.f, t);
    else if (t.kind == "hip") lower_for_hip(f.f, t);
    else lower_for_webgpu(f.f, t);
    return out;
  }, nb::arg("func"), nb::arg("target"), nb::arg("switches") = std::vector<std::string>{});
}

}  // namespace tl::py
