// The CUDA back end's runtime, exposed to the JIT layer: device queries, NVRTC, modules,
// kernel descriptions and launches. Nothing here needs a GPU until a module is loaded.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings/handles.h"
#include "codegen/cuda/codegen_cuda.h"
#include "ir/error.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvcc.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda/tensor_map.h"

namespace tl::py {
namespace {

// Launch arguments are packed as 8-byte slots, the kernel reading each slot in its own type,
// except TMA tensor maps: 128 bytes each, in slots aligned as the driver's CUtensorMap.
struct alignas(kTensorMapAlignment) TensorMapSlot {
  uint8_t bytes[kTensorMapBytes];
};

struct PackedArgs {
  std::vector<uint64_t> slots;
  std::vector<TensorMapSlot> maps;
  std::vector<void*> pointers;
};

uint64_t pack(const std::string& dtype, nb::handle v) {
  uint64_t slot = 0;
  DataType t = to_dtype(dtype);
  if (t.is_handle() || t.is_integer() || t.is_bool()) {
    int64_t x = nb::cast<int64_t>(v);
    std::memcpy(&slot, &x, sizeof x);  // little-endian: narrower ints read the low bytes
  } else if (t == DataType::Float(32)) {
    float x = nb::cast<float>(v);
    std::memcpy(&slot, &x, sizeof x);
  } else if (t == DataType::Float(64)) {
    double x = nb::cast<double>(v);
    std::memcpy(&slot, &x, sizeof x);
  } else {
    fail(ErrorKind::Unsupported, {}, "a scalar kernel argument of dtype " + t.str() + " is not supported yet",
         "pass it as float32");
  }
  return slot;
}

TensorMapSlot pack_tensor_map(nb::handle v) {
  if (!nb::isinstance<nb::bytes>(v))
    fail(ErrorKind::Type, {}, std::string("a tensor-map kernel argument must be bytes, got ") +
                                  nb::type_name(v.type()).c_str(),
         "pass the 128 bytes encode_tensor_map returns");
  auto b = nb::borrow<nb::bytes>(v);
  if (b.size() != size_t(kTensorMapBytes))
    fail(ErrorKind::Type, {},
         "a tensor-map kernel argument is " + std::to_string(kTensorMapBytes) + " bytes, got " +
             std::to_string(b.size()),
         "pass the 128 bytes encode_tensor_map returns");
  TensorMapSlot slot;
  std::memcpy(slot.bytes, b.c_str(), kTensorMapBytes);
  return slot;
}

// Packs [(dtype, value) or ("tensormap", bytes)] and points at each slot in order.
void pack_args(const nb::list& args, PackedArgs& packed) {
  packed.slots.reserve(args.size());  // never reallocated, so pointers into it stay valid
  packed.pointers.reserve(args.size());
  for (nb::handle a : args) {
    auto tup = nb::cast<nb::tuple>(a);
    std::string kind = nb::cast<std::string>(tup[0]);
    if (kind == "tensormap") {
      packed.maps.push_back(pack_tensor_map(tup[1]));
      packed.pointers.push_back(nullptr);  // set below: maps may still move as they grow
    } else {
      packed.slots.push_back(pack(kind, tup[1]));
      packed.pointers.push_back(&packed.slots.back());
    }
  }
  size_t next_map = 0;
  for (void*& p : packed.pointers)
    if (!p) p = packed.maps[next_map++].bytes;
}

// ("buffer" | "scalar" | "shape", name, dtype, param index), or for a tensor map
// ("tensormap", name, dtype, index of the buffer it describes, box, swizzle bytes, the
// order its dimensions are stored in: () for their own).
nb::tuple param_tuple(const CudaKernelParam& p) {
  using Kind = CudaKernelParam::Kind;
  if (p.kind == Kind::TensorMap) {
    nb::list box, order;
    for (int64_t e : p.tma.box) box.append(e);
    for (int64_t d : p.tma.order) order.append(d);
    return nb::make_tuple("tensormap", p.name, p.dtype.str(), p.param_index,
                          nb::steal<nb::tuple>(PyList_AsTuple(box.ptr())), p.tma.swizzle_bytes,
                          nb::steal<nb::tuple>(PyList_AsTuple(order.ptr())));
  }
  const char* kind = p.kind == Kind::Buffer ? "buffer" : p.kind == Kind::Scalar ? "scalar" : "shape";
  return nb::make_tuple(kind, p.name, p.dtype.str(), p.param_index);
}

}  // namespace

void bind_cuda(nb::module_& m) {
  m.def("cuda_device_available", []() { return cuda_device_available(); });
  m.def("cuda_unavailable_reason", []() {
    std::string reason;
    cuda_device_available(&reason);
    return reason;
  });
  m.def("cuda_device_arch", [](int device) { return device_arch(device); }, nb::arg("device") = 0);
  m.def("nvrtc_id", []() { return "nvrtc " + nvrtc_version(); });
  // (source, file name, arch, include dirs) -> cubin, through NVRTC in process or nvcc; with
  // with_log, (cubin, the compiler's messages: ptxas' notes on the code it made).
  auto compile_cubin = [](auto compiler) {
    return [compiler](const std::string& source, const std::string& name, const std::string& arch,
                      const std::vector<std::string>& include_dirs, bool fast_math, bool with_log) -> nb::object {
      CudaCompileOptions opts;
      opts.arch = arch;
      opts.fast_math = fast_math;
      opts.include_dirs = include_dirs;
      for (auto& d : cuda_include_dirs()) opts.include_dirs.push_back(d);
      // ptxas' resource lines (registers, spill stores and loads) join its notes in the log.
      if (with_log) opts.extra_flags.push_back("--ptxas-options=-v");
      CompiledCuda out;
      {
        nb::gil_scoped_release release;
        out = compiler(source, name, opts);
      }
      nb::bytes cubin(out.binary.data(), out.binary.size());
      if (!with_log) return cubin;
      return nb::make_tuple(cubin, out.log);
    };
  };
  m.def("nvrtc_compile", compile_cubin([](const std::string& s, const std::string& n, const CudaCompileOptions& o) {
    return compile_with_nvrtc(s, n, o);
  }), nb::arg("source"), nb::arg("name"), nb::arg("arch"), nb::arg("include_dirs"), nb::arg("fast_math") = false,
        nb::arg("with_log") = false);
  m.def("nvcc_compile", compile_cubin([](const std::string& s, const std::string& n, const CudaCompileOptions& o) {
    return compile_with_nvcc(s, n, o);
  }), nb::arg("source"), nb::arg("name"), nb::arg("arch"), nb::arg("include_dirs"), nb::arg("fast_math") = false,
        nb::arg("with_log") = false);
  m.def("nvcc_available", []() { return nvcc_available(); });
  // The 128-byte CUtensorMap of a global tensor (shape and strides in elements, outermost
  // first) read in boxes of `box`; validated first, so a bad argument needs no GPU to report.
  m.def(
      "encode_tensor_map",
      [](const std::string& dtype, uint64_t address, const std::vector<int64_t>& shape,
         const std::vector<int64_t>& strides, const std::vector<int64_t>& box, int swizzle_bytes) {
        TensorMapSpec spec{to_dtype(dtype), box, swizzle_bytes};
        std::array<uint8_t, kTensorMapBytes> map = encode_tensor_map(spec, address, shape, strides);
        return nb::bytes(reinterpret_cast<const char*>(map.data()), map.size());
      },
      nb::arg("dtype"), nb::arg("address"), nb::arg("shape"), nb::arg("strides"), nb::arg("box"),
      nb::arg("swizzle_bytes") = 0);
  m.def("cuda_kernel_infos", [](const PyFunc& f) {
    nb::list out;
    for (auto& k : cuda_kernel_infos(f.f)) {
      nb::dict d;
      d["name"] = k.name;
      nb::list grid;
      for (auto& g : k.grid) grid.append(PyExpr{g});
      d["grid"] = grid;
      d["block"] = nb::make_tuple(k.block[0], k.block[1], k.block[2]);
      d["dynamic_shared_bytes"] = k.dynamic_shared_bytes;
      d["static_shared_bytes"] = k.static_shared_bytes;
      nb::list params;
      for (auto& p : k.params) params.append(param_tuple(p));
      d["params"] = params;
      d["programmatic_launch"] = k.programmatic_launch;
      d["cooperative_launch"] = k.cooperative_launch;
      out.append(d);
    }
    return out;
  });

  nb::class_<CudaFunction>(m, "CudaFunction")
      .def("set_max_dynamic_shared_memory", &CudaFunction::set_max_dynamic_shared_memory)
      .def("attributes", [](const CudaFunction& f) {
        CudaFunctionAttributes a = f.attributes();
        nb::dict d;
        d["registers"] = a.registers;
        d["local_bytes"] = a.local_bytes;
        d["max_threads_per_block"] = a.max_threads_per_block;
        return d;
      })
      // args: [(dtype, value)], in the kernel's parameter order (pointers as "handle"), a
      // tensor map as ("tensormap", its 128 bytes).
      .def("launch", [](const CudaFunction& f, std::vector<int64_t> grid, std::vector<int64_t> block,
                        int64_t shared_bytes, uintptr_t stream, nb::list args, bool programmatic,
                        bool cooperative) {
        PackedArgs packed;
        pack_args(args, packed);
        Dim3 g{unsigned(grid.at(0)), unsigned(grid.at(1)), unsigned(grid.at(2))};
        Dim3 b{unsigned(block.at(0)), unsigned(block.at(1)), unsigned(block.at(2))};
        f.launch(g, b, unsigned(shared_bytes), reinterpret_cast<void*>(stream), packed.pointers.data(), programmatic,
                 cooperative);
      }, nb::arg("grid"), nb::arg("block"), nb::arg("shared_bytes"), nb::arg("stream"), nb::arg("args"),
         nb::arg("programmatic") = false, nb::arg("cooperative") = false);
  nb::class_<CudaModule>(m, "CudaModule")
      .def("__init__", [](CudaModule* self, nb::bytes image) {
        new (self) CudaModule(std::string(image.c_str(), image.size()));
      })
      .def("function", &CudaModule::function);
}

}  // namespace tl::py
