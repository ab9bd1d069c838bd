// A stand-in libcuda.so.1 for tests on machines without a GPU: it reports one device, keeps a
// current context per thread, "loads" any image, records what each launch's parameters point
// to (as many bytes of each as the test announced), and, when built with FAKE_CUDA_HAS_TMA,
// records the arguments of cuTensorMapEncodeTiled and fills the map with a known pattern.
#include <cstdint>
#include <cstring>

#include "fake_cuda.h"

namespace {

FakeEncodeCall last_call;
int encode_calls = 0;
int next_encode_result = 0;
bool refuse_without_context = false;
thread_local void* current_context = nullptr;
int primary_context = 0;  // its address is the context handle
int module_handle = 0, function_handle = 0;

constexpr int kMaxParams = 16, kMaxParamBytes = 128;
int param_sizes[kMaxParams] = {};
int param_count = 0;
uintptr_t param_addresses[kMaxParams] = {};
uint8_t param_bytes[kMaxParams][kMaxParamBytes] = {};
int launches = 0;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuInit(unsigned) { return 0; }
__attribute__((visibility("default"))) int cuDriverGetVersion(int* v) { *v = 11080; return 0; }
__attribute__((visibility("default"))) int cuGetErrorName(int rc, const char** name) {
  *name = rc == 1 ? "CUDA_ERROR_INVALID_VALUE" : rc == 201 ? "CUDA_ERROR_INVALID_CONTEXT" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
__attribute__((visibility("default"))) int cuGetErrorString(int rc, const char** text) {
  *text = rc == 1 ? "invalid argument" : rc == 201 ? "invalid device context" : "unknown error";
  return 0;
}
__attribute__((visibility("default"))) int cuDeviceGetCount(int* n) { *n = 1; return 0; }
__attribute__((visibility("default"))) int cuDeviceGet(int* d, int ordinal) { *d = ordinal; return 0; }
__attribute__((visibility("default"))) int cuDeviceGetName(char* name, int length, int) {
  std::strncpy(name, "fake device", size_t(length));
  return 0;
}
__attribute__((visibility("default"))) int cuDeviceGetAttribute(int* v, int, int) { *v = 0; return 0; }
__attribute__((visibility("default"))) int cuDevicePrimaryCtxRetain(void** c, int) {
  *c = &primary_context;
  return 0;
}
__attribute__((visibility("default"))) int cuCtxGetCurrent(void** c) { *c = current_context; return 0; }
__attribute__((visibility("default"))) int cuCtxSetCurrent(void* c) { current_context = c; return 0; }
__attribute__((visibility("default"))) int cuCtxGetDevice(int* d) { *d = 0; return 0; }
__attribute__((visibility("default"))) int cuCtxSynchronize() { return 0; }
__attribute__((visibility("default"))) int cuModuleLoadData(void** m, const void*) {
  *m = &module_handle;
  return 0;
}
__attribute__((visibility("default"))) int cuModuleUnload(void*) { return 0; }
__attribute__((visibility("default"))) int cuModuleGetFunction(void** f, void*, const char*) {
  *f = &function_handle;
  return 0;
}
__attribute__((visibility("default"))) int cuFuncSetAttribute(void*, int, int) { return 1; }
__attribute__((visibility("default"))) int cuFuncGetAttribute(int* v, int, void*) { *v = 0; return 0; }
__attribute__((visibility("default"))) int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                          unsigned, unsigned, void*, void** params, void**) {
  ++launches;
  for (int i = 0; i < param_count; ++i) {
    param_addresses[i] = reinterpret_cast<uintptr_t>(params[i]);
    std::memcpy(param_bytes[i], params[i], size_t(param_sizes[i]));
  }
  return 0;
}
__attribute__((visibility("default"))) int cuStreamSynchronize(void*) { return 0; }
__attribute__((visibility("default"))) int cuMemAlloc_v2(unsigned long long*, size_t) { return 1; }
__attribute__((visibility("default"))) int cuMemFree_v2(unsigned long long) { return 0; }
__attribute__((visibility("default"))) int cuMemcpyHtoD_v2(unsigned long long, const void*, size_t) { return 1; }
__attribute__((visibility("default"))) int cuMemcpyDtoH_v2(void*, unsigned long long, size_t) { return 1; }

#if FAKE_CUDA_HAS_TMA
__attribute__((visibility("default"))) int cuTensorMapEncodeTiled(
    void* map, int data_type, uint32_t rank, void* address, const uint64_t* dims, const uint64_t* strides,
    const uint32_t* box, const uint32_t* element_strides, int interleave, int swizzle, int l2_promotion,
    int oob_fill) {
  ++encode_calls;
  if (refuse_without_context && !current_context) return 201;
  FakeEncodeCall c;
  c.map_address = reinterpret_cast<uintptr_t>(map);
  c.data_type = data_type;
  c.rank = rank;
  c.address = reinterpret_cast<uintptr_t>(address);
  for (uint32_t i = 0; i < rank && i < 5; ++i) {
    c.dims[i] = dims[i];
    c.box[i] = box[i];
    c.element_strides[i] = element_strides[i];
    if (i + 1 < rank) c.strides[i] = strides[i];
  }
  c.interleave = interleave;
  c.swizzle = swizzle;
  c.l2_promotion = l2_promotion;
  c.oob_fill = oob_fill;
  last_call = c;
  if (next_encode_result != 0) {
    int rc = next_encode_result;
    next_encode_result = 0;
    return rc;
  }
  auto* bytes = static_cast<uint8_t*>(map);
  for (int i = 0; i < 128; ++i) bytes[i] = uint8_t(i * 3 + 1);
  return 0;
}
#endif

__attribute__((visibility("default"))) const FakeEncodeCall* fake_cuda_last_encode() { return &last_call; }
__attribute__((visibility("default"))) int fake_cuda_encode_calls() { return encode_calls; }
__attribute__((visibility("default"))) void fake_cuda_fail_next_encode(int rc) { next_encode_result = rc; }
__attribute__((visibility("default"))) void fake_cuda_refuse_without_context(bool on) {
  refuse_without_context = on;
}
__attribute__((visibility("default"))) void fake_cuda_clear_context() { current_context = nullptr; }
// The size of each parameter the next launches pass (at most 16, of at most 128 bytes).
__attribute__((visibility("default"))) void fake_cuda_expect_params(const int* sizes, int count) {
  param_count = count < kMaxParams ? count : kMaxParams;
  for (int i = 0; i < param_count; ++i) param_sizes[i] = sizes[i] < kMaxParamBytes ? sizes[i] : kMaxParamBytes;
}
__attribute__((visibility("default"))) int fake_cuda_launches() { return launches; }
__attribute__((visibility("default"))) uintptr_t fake_cuda_param_address(int i) { return param_addresses[i]; }
__attribute__((visibility("default"))) const uint8_t* fake_cuda_param_bytes(int i) { return param_bytes[i]; }

}  // extern "C"
