// The CUDA runtime on the simulated GPU: errors, the queue and kernel launches (devices and their
// settings: devices.cpp; streams, events and host functions: streams.cpp; memory: memory.cpp;
// capture and graphs: graph.cpp; properties: device_properties.cpp).
//
// Execution is lazy: every stream's work goes into one global FIFO, which respects each stream's
// order and every event wait (a wait always refers to an earlier record), and the FIFO runs at
// synchronising calls — and, up to a host function (cudaLaunchHostFunc, a stream callback), on a
// background thread, as a GPU's stream reaches those by itself. A fault while it runs is returned
// as its code (cudaErrorLaunchFailure …) by that call, or by the next synchronising one after a
// background run (and by cudaGetLastError / cudaPeekAtLastError of that host thread), and the
// rest of the queue is dropped. Unlike a GPU, the error is not sticky: later calls succeed again.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "sim/executor_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
namespace {

struct Op {
  uint64_t seq;
  std::string name;
  std::function<void()> fn;
  bool cleanup;
};

std::deque<Op> g_queue;
uint64_t g_next_seq = 1;
bool g_running = false;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_last_kernel;
thread_local const void* t_last_kernel_function = nullptr;
std::set<std::string> g_fault_messages;  // cudaGetErrorString's pointers stay valid
const char* g_fault_message = nullptr;
cudaError_t g_fault_code = cudaErrorLaunchFailure;  // the code the latest fault was returned as


}  // namespace

std::recursive_mutex& state_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

cudaError_t result(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

void clear_last_error() { t_last_error = cudaSuccess; }

void set_fault_message(const std::string& message) {
  Lock lock(state_mutex());
  g_fault_message = g_fault_messages.insert(message).first->c_str();
}



uint64_t last_seq() { return g_next_seq - 1; }

cudaError_t submit(CUstream_st* stream, std::string name, std::function<void()> op, bool cleanup) {
  Lock lock(state_mutex());
  if (Capture* capture = stream->capture) {
    if (capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    auto node = std::make_unique<CUgraphNode_st>();
    node->name = std::move(name);
    node->op = std::move(op);
    capture->graph->nodes.push_back(std::move(node));
    stream->capture_nodes = capture->graph->nodes.size();
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(stream); error != cudaSuccess) return error;
  const uint64_t seq = g_next_seq++;
  g_queue.push_back(Op{seq, std::move(name), std::move(op), cleanup});
  stream->last_seq = seq;
  return cudaSuccess;
}

// A fault met while the queue ran in the background (for a host function), for the next
// synchronising call to return.
cudaError_t g_background_fault = cudaSuccess;

cudaError_t run_through(uint64_t seq) {
  Lock lock(state_mutex());
  if (g_running) return cudaSuccess;  // an op that synchronises: the outer run goes on
  g_running = true;
  cudaError_t status = std::exchange(g_background_fault, cudaSuccess);
  while (!g_queue.empty() && g_queue.front().seq <= seq) {
    Op op = std::move(g_queue.front());
    g_queue.pop_front();
    if (status != cudaSuccess && !op.cleanup) continue;  // dropped after a fault
    try {
      op.fn();
    } catch (const std::exception& error) {
      // Kernel faults already name kernel, block and thread; other ops get their name.
      const auto* fault = dynamic_cast<const Fault*>(&error);
      set_fault_message(fault != nullptr ? std::string(error.what()) : op.name + ": " + error.what());
      status = fault != nullptr ? fault->code : cudaErrorLaunchFailure;
      g_fault_code = status;
      seq = UINT64_MAX;  // drop everything queued, not just up to the target
    }
  }
  g_running = false;
  return status;
}

// A GPU's stream reaches a host function without the host waiting, and programs rely on it (a
// callback that releases a host thread the program then waits for). So the queue up to a host
// function also runs on a background thread, with the state lock held as any run holds it.
void run_in_background_through(uint64_t seq) {
  // Never destroyed: the thread outlives main() blocked on them.
  static auto* mutex = new std::mutex;
  static auto* wake = new std::condition_variable;
  static uint64_t target = 0;
  static bool started = false;
  std::lock_guard<std::mutex> guard(*mutex);
  target = std::max(target, seq);
  if (!started) {
    started = true;
    std::thread([] {
      uint64_t done = 0;
      for (;;) {
        std::unique_lock<std::mutex> wait(*mutex);
        wake->wait(wait, [&] { return target > done; });
        const uint64_t through = target;
        wait.unlock();
        Lock lock(state_mutex());
        const cudaError_t status = run_through(through);
        if (status != cudaSuccess) g_background_fault = status;
        done = through;
      }
    }).detach();
  }
  wake->notify_one();
}


}  // namespace blockscope::sim::detail

// ---- sim.h ----------------------------------------------------------------------------------
namespace blockscope::sim {

using namespace detail;

cudaError_t try_enqueue(cudaStream_t stream, const char* name, std::function<void()> op) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  return submit(s, name, std::move(op));
}

void enqueue(cudaStream_t stream, const char* name, std::function<void()> op) {
  result(try_enqueue(stream, name, std::move(op)));
}

int stream_device(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  return s == nullptr ? -1 : s->device;
}

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
      g_fault_code = cudaErrorNotSupported;
      set_fault_message("cudaLaunchCooperativeKernel: the simulator keeps at most " +
                        std::to_string(kMaxCooperativeThreads) + " threads resident at once; this grid has " +
                        std::to_string(blocks * threads));
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

// ---- The runtime API --------------------------------------------------------------------------
using namespace blockscope::sim;
using namespace blockscope::sim::detail;

namespace {

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

// The codes the sim returns, with the runtime's names and texts.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorUnsupportedLimit, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorCooperativeLaunchTooLarge, "cudaErrorCooperativeLaunchTooLarge",
     "too many blocks in cooperative launch"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const ErrorText* find_error(cudaError_t error) {
  for (const ErrorText& entry : kErrors)
    if (entry.code == error) return &entry;
  return nullptr;
}


}  // namespace

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = t_last_error;
  t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* entry = find_error(error);
  return entry ? entry->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  if (error == g_fault_code) {
    Lock lock(state_mutex());
    if (g_fault_message != nullptr) return g_fault_message;
  }
  const ErrorText* entry = find_error(error);
  return entry ? entry->text : "unrecognized error code";
}

// ---- Launches through a const void* ------------------------------------------------------------
// A kernel named only by its address and void** arguments: its parameter types come from the
// launcher nvcc-sim registered for it (sim/kernel_prelude.h). Templates and overloaded kernels
// have none: the typed C++ templates and <<<>>> launch those.
static cudaError_t launch_through_address(const char* api, const void* kernel, dim3 grid, dim3 block, void** args,
                                          size_t smem, cudaStream_t stream, bool cooperative) {
  if (kernel == nullptr) return result(cudaErrorInvalidDeviceFunction);
  if (const blockscope::sim::PointerLauncher launcher = blockscope::sim::find_pointer_launcher(kernel)) {
    return launcher(kernel, grid, block, args, smem, stream, cooperative);
  }
  Lock lock(state_mutex());
  g_fault_code = cudaErrorNotSupported;
  const std::string name = blockscope::sim::function_name(kernel);
  set_fault_message(std::string(api) + " of " + (name.empty() ? std::string("a kernel") : name) +
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
