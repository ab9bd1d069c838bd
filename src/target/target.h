// What the compiler targets: the kind of back end plus its features and limits.
#pragma once
#include <cstdint>
#include <string>

namespace tl {

struct Target {
  std::string kind = "cpu";  // "cpu", "cuda", "hip" or "webgpu" (later: "metal")
  std::string arch;          // "host" for the CPU; "sm_90a", "sm_80"... for CUDA (empty: the device's);
                             // "gfx942", "gfx1100"... for HIP
  // What one launch may ask for (checked at compile time by check_block_budget). The parser
  // sets each target's own: CUDA's by architecture, WebGPU's defaults from the WebGPU
  // specification, which the WebGPU runtime replaces with its adapter's.
  int64_t max_threads_per_block = 1024;
  int64_t max_threads_per_dim[3] = {1024, 1024, 64};
  int64_t max_grid[3] = {2147483647, 65535, 65535};
  // Shared memory one block may use, in bytes (with CUDA's opt-in above 48 KiB); 0: no
  // limit known (the CPU, or CUDA without an architecture).
  int64_t max_shared_bytes = 0;
  // Bytes of arrays one thread may hold (check_thread_budget).
  int64_t max_thread_array_bytes = 16 * 1024;
  // WebGPU: the adapter's subgroup size when the kernel may use subgroup operations (the
  // runtime checks at run time that the subgroups are laid out so); 0 for none.
  int subgroup = 0;
  // Pass configs that switch Hopper features off (tl.disable_wgmma, tl.disable_tma_lower,
  // tl.disable_warp_specialized): the slower path is taken and reported.
  bool disable_wgmma = false;
  bool disable_tma = false;
  bool disable_warp_specialized = false;
  // tl.enable_warpgroup_pingpong: two consumer warpgroups take turns on the tensor cores
  // (transform/pingpong_warpgroups.h; off by default: measured slower so far).
  bool enable_pingpong = false;
  // tl.disable_wgmma_overlap: a pipelined loop's last T.gemm (attention's P*V) is not run
  // one iteration behind (transform/inject_software_pipeline.cc, find_overlap), and T.gemm
  // in a row each wait for their own product (transform/overlap_wgmma_groups.h).
  bool disable_wgmma_overlap = false;
  // tl.disable_producer_tile_loads: tiles loaded once per run of a TMA pipeline (attention's
  // query tile) stay the consumers' own copies (transform/producer_tile_loads.h).
  bool disable_producer_tile_loads = false;
  // Sets the switch a pass config names; false for a name that is not a switch.
  bool set_switch(const std::string& name);

  // Parses a target string: "cpu" (aliases "c", "llvm"), "cuda", "cuda -arch=sm_90a",
  // "webgpu", "webgpu -subgroup=32", "hip -arch=gfx942" (alias "rocm"; the architectures
  // are kHipArchs).
  // "auto" is resolved by the front end (a GPU when one is present). Throws
  // CompileError(Unsupported) for a back end this build does not have.
  static Target parse(const std::string& s);
  std::string str() const;
  // The compute capability of a CUDA arch ("sm_90a" -> 90); 0 when none is given.
  int arch_number() const;
  // Shared memory per block (with the opt-in) of a CUDA compute capability; 0 when unknown.
  static int64_t cuda_max_shared_bytes(int arch);
  // How many threads exchange registers by shuffles (a CUDA warp, an AMD wavefront: 64 on
  // CDNA, 32 on RDNA, a WebGPU subgroup); 1 where lowerings must go through shared memory
  // instead.
  int warp_size() const {
    if (kind == "cuda") return 32;
    if (kind == "hip") return hip_wave_size(arch);
    return kind == "webgpu" && subgroup > 1 ? subgroup : 1;
  }
  // Bytes of registers one thread of a block of `threads` threads can have (what its arrays
  // may take before the rest goes to local memory / scratch, a slower path); 0 where that
  // is not known. CUDA: 255 registers. CDNA: a SIMD's 512 registers a lane (256 vector and
  // 256 accumulation) shared by the block's wavefronts on it; RDNA: up to 256 of a SIMD's
  // 1536 (wave32), shared likewise.
  int64_t register_bytes(int64_t threads) const;
  // The AMD architectures target hip knows, in the order error messages list them.
  static const char* const kHipArchs[];
  // The wavefront of an AMD architecture: 64 on the CDNA parts (gfx9xx), 32 on RDNA
  // (gfx10xx and later, compiled for wave32); 0 for an arch that is not in kHipArchs.
  static int hip_wave_size(const std::string& arch);
};

}  // namespace tl
