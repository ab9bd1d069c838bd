// Runs a kernel over its grid: one block after another, blockDim threads each (std::thread),
// every thread with its own indices, then joined. A thread that returns leaves the block's
// and its wavefront's barriers (as a finished wavefront leaves s_barrier on the device).
#pragma once

#include <hip/hip_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <thread>
#include <utility>

namespace tl_emu {

// args[i] points to the i-th argument: a pointer's value for pointer parameters, else the scalar.
template <typename P>
P argument(void* slot) {
  if constexpr (std::is_pointer_v<P>) {
    return static_cast<P>(*static_cast<void**>(slot));
  } else {
    return *static_cast<P*>(slot);
  }
}

template <typename... P, size_t... I>
void call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  kernel(argument<P>(args[I])...);
}

// Returns 0, or 1 with the first inconsistency in first_error. A block whose threads do not
// all finish within timeout_s (a barrier or cross-lane operation some lanes never reach)
// ends the process with a message: its threads cannot be stopped.
template <typename... P>
int launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block, void** args, size_t dynamic_shared,
           double timeout_s) {
  first_error.clear();
  if (dynamic_shared > kDynamicSharedBytes) {
    fail("dynamic LDS of " + std::to_string(dynamic_shared) + " bytes is more than the emulation holds");
    return 1;
  }
  const int threads = int(block[0] * block[1] * block[2]);
  for (unsigned bz = 0; bz < grid[2]; ++bz) {
    for (unsigned by = 0; by < grid[1]; ++by) {
      for (unsigned bx = 0; bx < grid[0]; ++bx) {
        // LDS starts as NaN bytes (0xff), so that reading what no thread wrote shows.
        std::memset(tl_dyn_smem, 0xff, kDynamicSharedBytes);
        Block state(threads);
        std::mutex mutex;
        std::condition_variable finished;
        int done = 0;
        std::vector<std::thread> pool;
        pool.reserve(threads);
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            const unsigned id = unsigned(t);
            threadIdx = {id % block[0], id / block[0] % block[1], id / (block[0] * block[1])};
            blockIdx = {bx, by, bz};
            blockDim = {block[0], block[1], block[2]};
            gridDim = {grid[0], grid[1], grid[2]};
            Wave* wave = state.waves[t / kWaveSize].get();
            self = {&state, wave, t % kWaveSize};
            call(kernel, args, std::index_sequence_for<P...>{});
            state.sync.arrive_and_drop();
            wave->barrier.arrive_and_drop();
            std::lock_guard<std::mutex> lock(mutex);
            ++done;
            finished.notify_one();
          });
        }
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (!finished.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done == threads; })) {
            std::fprintf(stderr,
                         "hip emulation: block (%u, %u, %u) did not finish in %.0f s: %d of %d threads are waiting "
                         "at a barrier or cross-lane operation the others never reach\n",
                         bx, by, bz, timeout_s, threads - done, threads);
            std::abort();
          }
        }
        for (std::thread& thread : pool) thread.join();
      }
    }
  }
  return first_error.empty() ? 0 : 1;
}

}  // namespace tl_emu

extern "C" __attribute__((visibility("default"))) const char* tl_emu_error() { return tl_emu::first_error.c_str(); }
