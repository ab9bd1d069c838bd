/* A stand-in for the HIP runtime (libamdhip64) with the calls tilelang.jit.hip makes: it
 * reports one device (FAKE_HIP_DEVICES overrides), checks that a loaded image is an
 * AMDGPU ELF for the architecture FAKE_HIP_ARCH names (hipErrorNoBinaryForGpu otherwise),
 * and records each launch instead of running it, for tests/python/test_hip.py to read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { kSuccess = 0, kNoDevice = 100, kInvalidImage = 200, kNoBinaryForGpu = 209, kMaxArgs = 32 };

static char function_names[16][128];
static int n_functions;

static struct {
  int count;
  char name[128];
  unsigned dims[7]; /* grid x y z, block x y z, dynamic shared bytes */
  void* stream;
  unsigned char args[kMaxArgs][8];
} launches;
static int arg_sizes[kMaxArgs], n_arg_sizes;

int hipGetDeviceCount(int* count) {
  const char* e = getenv("FAKE_HIP_DEVICES");
  *count = e ? atoi(e) : 1;
  return *count ? kSuccess : kNoDevice;
}

const char* hipGetErrorName(int err) {
  switch (err) {
    case kSuccess: return "hipSuccess";
    case kNoDevice: return "hipErrorNoDevice";
    case kInvalidImage: return "hipErrorInvalidImage";
    case kNoBinaryForGpu: return "hipErrorNoBinaryForGpu";
    default: return "hipErrorUnknown";
  }
}

/* The AMDGPU ELF's e_flags hold the architecture (EF_AMDGPU_MACH, low byte). */
static unsigned mach_of(const char* arch) {
  if (!strcmp(arch, "gfx90a")) return 0x3f;
  if (!strcmp(arch, "gfx940")) return 0x40;
  if (!strcmp(arch, "gfx942")) return 0x4c;
  if (!strcmp(arch, "gfx1100")) return 0x41;
  return 0;
}

int hipModuleLoadData(void** module, const void* image) {
  const unsigned char* elf = (const unsigned char*)image;
  if (memcmp(elf, "\x7f" "ELF", 4) != 0 || elf[18] != 224 /* EM_AMDGPU */) return kInvalidImage;
  uint32_t flags;
  memcpy(&flags, elf + 48, 4); /* e_flags of a 64-bit ELF */
  const char* arch = getenv("FAKE_HIP_ARCH");
  if (arch && (flags & 0xff) != mach_of(arch)) return kNoBinaryForGpu;
  *module = (void*)0x1000;
  n_functions = 0;
  return kSuccess;
}

int hipModuleGetFunction(void** function, void* module, const char* name) {
  (void)module;
  if (n_functions == 16) return 500;
  strncpy(function_names[n_functions], name, 127);
  *function = (void*)(intptr_t)(++n_functions);
  return kSuccess;
}

int hipModuleLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  (void)extra;
  unsigned dims[7] = {gx, gy, gz, bx, by, bz, shared};
  launches.count++;
  strcpy(launches.name, function_names[(intptr_t)function - 1]);
  memcpy(launches.dims, dims, sizeof dims);
  launches.stream = stream;
  memset(launches.args, 0, sizeof launches.args);
  for (int i = 0; i < n_arg_sizes; ++i) memcpy(launches.args[i], params[i], (size_t)arg_sizes[i]);
  return kSuccess;
}

int hipModuleUnload(void* module) { (void)module; return kSuccess; }

/* For the tests. */
void fake_expect_arg_sizes(int n, const int* sizes) {
  n_arg_sizes = n;
  memcpy(arg_sizes, sizes, sizeof(int) * (size_t)n);
}
int fake_launch_count(void) { return launches.count; }
const char* fake_launched_name(void) { return launches.name; }
void fake_launch_dims(unsigned* out) { memcpy(out, launches.dims, sizeof launches.dims); }
void* fake_launch_stream(void) { return launches.stream; }
void fake_launch_arg(int i, void* out) { memcpy(out, launches.args[i], 8); }
