// Kernel launches on the simulated GPU: the runtime's checks of a launch (block and grid shape,
// shared memory, registers, a cooperative grid's size) and the grid queued as one op of its
// stream; launches through a kernel's address (cudaLaunchKernel); the last kernel's name; and
// what a kernel's clock() and assert() become. Apart from runtime_api.cpp, the queue these ops
// go into, and executor.cpp, which runs the grid.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <utility>

#include "sim/executor_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim {

using namespace detail;

namespace {
thread_local std::string t_last_kernel;
thread_local const void* t_last_kernel_function = nullptr;
}  // namespace

// The runtime's checks, in its order: block shape, grid shape, shared memory, then the stream.
cudaError_t launch(const GridLaunch& config, cudaStream_t stream, std::function<void()> body) {
  Lock lock(state_mutex());
  const dim3 b = config.block, g = config.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 || g.x == 0 ||
      g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    return result(cudaErrorInvalidConfiguration);
  }
  const size_t limit = std::max(kSharedPerBlock, max_dynamic_smem(config.function));
  if (config.dynamic_smem > limit) {
    return result(cudaErrorInvalidValue);  // what the runtime says for dynamic shared memory over the limit
  }
  KernelResources resources{};
  if (config.function != nullptr && kernel_resources(config.function, &resources)) {
    if (config.dynamic_smem + static_cast<size_t>(resources.static_smem) > kSharedPerBlockOptin) {
      return result(cudaErrorInvalidValue);
    }
    if (resources.registers > 0 && threads * static_cast<uint64_t>(resources.registers) > 65536) {
      return result(cudaErrorLaunchOutOfResources);  // too many registers for the block
    }
  }
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr || s->device != current_device()) {  // a launch goes to the current device only
    return result(cudaErrorInvalidResourceHandle);
  }
  if (config.cooperative) {
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, config.function, static_cast<int>(threads),
                                                  config.dynamic_smem);
    const uint64_t blocks = uint64_t{g.x} * g.y * g.z;
    if (blocks > static_cast<uint64_t>(per_sm) * kSmCount) return result(cudaErrorCooperativeLaunchTooLarge);
    if (blocks * threads > kMaxCooperativeThreads) {
      set_fault(cudaErrorNotSupported, "cudaLaunchCooperativeKernel: the simulator keeps at most " +
                                           std::to_string(kMaxCooperativeThreads) +
                                           " threads resident at once; this grid has " + std::to_string(blocks * threads));
      return result(cudaErrorNotSupported);
    }
  }
  GridLaunch copy = config;
  copy.device = s->device;
  const cudaError_t error =
      submit(s, config.name, [copy, body = std::move(body)]() { run_grid(copy, body); });
  if (result(error) == cudaSuccess) set_last_kernel_name(config.name, config.function);
  return error;
}

std::string last_kernel_name() {
  if (t_last_kernel_function != nullptr) {
    const std::string name = short_function_name(t_last_kernel_function);
    if (!name.empty()) return name;
  }
  return t_last_kernel;
}
void set_last_kernel_name(std::string name, const void* function) {
  t_last_kernel = std::move(name);
  t_last_kernel_function = function;
}

}  // namespace blockscope::sim

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

// ---- Launches through a const void* ------------------------------------------------------------
// A kernel named only by its address and void** arguments: its parameter types come from the
// launcher nvcc-sim registered for it (sim/kernel_launch.h). Templates and overloaded kernels
// have none: the typed C++ templates and <<<>>> launch those.
static cudaError_t launch_through_address(const char* api, const void* kernel, dim3 grid, dim3 block, void** args,
                                          size_t smem, cudaStream_t stream, bool cooperative) {
  if (kernel == nullptr) return result(cudaErrorInvalidDeviceFunction);
  if (const blockscope::sim::PointerLauncher launcher = blockscope::sim::find_pointer_launcher(kernel)) {
    return launcher(kernel, grid, block, args, smem, stream, cooperative);
  }
  Lock lock(state_mutex());
  const std::string name = blockscope::sim::function_name(kernel);
  set_fault(cudaErrorNotSupported,
            std::string(api) + " of " + (name.empty() ? std::string("a kernel") : name) +
                " through a const void*: nvcc-sim registers the parameter types of kernels that are neither "
                "templates nor overloaded (and of nothing it did not compile); launch this one with <<<>>> or "
                "the typed " + api + " template, passing the kernel itself");
  return result(cudaErrorNotSupported);
}

cudaError_t cudaLaunchKernel(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem, cudaStream_t stream) {
  return launch_through_address("cudaLaunchKernel", kernel, grid, block, args, smem, stream, false);
}

cudaError_t cudaLaunchCooperativeKernel(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                        cudaStream_t stream) {
  return launch_through_address("cudaLaunchCooperativeKernel", kernel, grid, block, args, smem, stream, true);
}

}  // extern "C"

// ---- clock() in a kernel -------------------------------------------------------------------------------
// A kernel's clock() reads the SM's 32-bit cycle counter; the C library's counts the process's CPU
// time. This definition, linked into the program, takes the C library's place: in a simulated GPU
// thread it gives the cycles (blockscope::sim::sm_cycles), elsewhere what glibc's gives.
extern "C" clock_t clock() noexcept {
  if (blockscope::sim::exec::current_sim_thread() != nullptr) {
    return static_cast<clock_t>(static_cast<unsigned long long>(blockscope::sim::sm_cycles()) & 0xFFFFFFFFull);
  }
  timespec now{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return static_cast<clock_t>(-1);
  return static_cast<clock_t>(now.tv_sec) * CLOCKS_PER_SEC +
         static_cast<clock_t>(now.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
}

// ---- assert() in a kernel ---------------------------------------------------------------------------
// glibc's assert calls __assert_fail; this definition, linked into the program, takes its place.
// In a kernel the grid ends with cudaErrorAssert (as on a GPU, where the context is then lost);
// elsewhere it does what glibc's does.
extern "C" [[noreturn]] void __assert_fail(const char* assertion, const char* file, unsigned int line,
                                           const char* function) noexcept {
  if (blockscope::sim::exec::current_sim_thread() != nullptr) {
    std::string message = std::string("device-side assertion `") + assertion + "' failed at " + file + ":" +
                          std::to_string(line) + " in " + function;
    blockscope::sim::exec::abandon_thread(std::move(message), cudaErrorAssert);
  }
  std::fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, function, assertion);
  std::abort();
}
