// The simulated GPU (build option BLOCKSCOPE_CUDA=SIM): the interface between its parts.
//
//   runtime/sim/executor.*   runs one grid: every GPU thread a fiber, barriers and warp
//                            collectives, faults as errors naming kernel, block and thread
//   runtime/sim/runtime_api.* the CUDA runtime functions blockscope calls, declared by the real
//                            <cuda_runtime_api.h> and linked in place of libcudart: device
//                            memory in host memory, streams as one ordered queue run lazily at
//                            synchronising calls, events, graph capture, device properties of an
//                            H200, occupancy, function attributes
//   runtime/sim/cublaslt.*   the cuBLASLt subset blockscope calls (host GEMMs on the queue)
//   runtime/sim/kernel_prelude.h  force-included into every .cu compiled by the host compiler:
//                            __global__/__device__/__shared__, threadIdx…, __syncthreads,
//                            warp intrinsics, atomics, math intrinsics
//
// Nothing here may include blockscope headers: the sim sits below runtime/ (it replaces
// libcudart and libcublasLt).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

namespace blockscope::sim {

// ---- Faults ---------------------------------------------------------------------------------
// What a GPU would corrupt silently or hang on. Thrown inside a grid's execution; the queue
// turns it into cudaErrorLaunchFailure at the next synchronising call, and cudaGetErrorString
// of that code returns the fault's full message (kernel, block, thread, what happened).
struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- One grid -------------------------------------------------------------------------------
struct GridLaunch {
  const char* name = "?";        // kernel name, for faults and launch records
  const void* function = nullptr; // the kernel's address (attributes, opt-in shared memory)
  dim3 grid, block;
  size_t dynamic_smem = 0;
};

// Runs every block of the grid (blocks one after another, the threads of a block as fibers).
// `body` runs once per GPU thread with threadIdx/blockIdx set. Throws Fault.
void run_grid(const GridLaunch& launch, const std::function<void()>& body);

// ---- The queue ------------------------------------------------------------------------------
// Appends `op` to the stream (nullptr = the legacy default stream). Ops run in the order they
// were enqueued, at the next synchronising call (or are recorded into a graph while the stream
// is capturing). `name` labels the op in launch records and faults.
void enqueue(cudaStream_t stream, const char* name, std::function<void()> op);

// Validates the launch (threads per block, grid and block dimensions, dynamic shared memory
// against the default 48 KiB or the function's opt-in attribute, the device's limits); on
// failure sets the runtime's last error (cudaGetLastError) and enqueues nothing. Otherwise
// enqueues run_grid(launch, body) and records the launch (for the profiler's kernel names).
void launch(const GridLaunch& launch, cudaStream_t stream, std::function<void()> body);

// The same through a kernel pointer and its arguments (what ops/common/cuda/launch.cuh calls in
// place of kernel<<<grid, block, smem, stream>>>(args...)). Arguments are copied at launch, as
// the real runtime copies them into the parameter buffer.
template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count mismatch");
  std::tuple<std::decay_t<Params>...> params(static_cast<Params>(std::forward<Args>(args))...);
  GridLaunch config{name, reinterpret_cast<const void*>(kernel), grid, block, dynamic_smem};
  launch(config, stream, [kernel, params]() { std::apply(kernel, params); });
}

// The same, returning what the runtime would return for work on that stream instead of setting
// the last error: cudaErrorInvalidResourceHandle for a destroyed stream,
// cudaErrorStreamCaptureInvalidated on an invalidated capture, cudaErrorStreamCaptureImplicit
// for the legacy stream while a blocking stream captures. (For the cuBLASLt subset.)
cudaError_t try_enqueue(cudaStream_t stream, const char* name, std::function<void()> op);

// The device a stream belongs to (the device current when it was created; for the legacy and
// per-thread streams, the calling thread's current device); -1 for an unknown stream.
int stream_device(cudaStream_t stream);

// ---- Memory ---------------------------------------------------------------------------------
// What the sim knows about a pointer into memory it handed out.
struct AllocationInfo {
  enum class Kind { device, pool, graph, pinned_host };
  void* base = nullptr;  // start of the allocation containing the pointer
  size_t size = 0;       // bytes asked for
  int device = 0;        // device current at allocation (pinned host memory: that device too)
  Kind kind = Kind::device;
};
// True (and *info filled when not null) when p points into a live allocation: [base, base+size).
bool find_allocation(const void* p, AllocationInfo* info);

// ---- Records for the profiler ---------------------------------------------------------------
// Name of the most recent kernel launched by the calling thread through the sim (custom kernels
// and the cuBLASLt subset's GEMM kernels): the sim's stand-in for CUPTI's kernel records.
std::string last_kernel_name();
void set_last_kernel_name(std::string name);

// True when this build's CUDA is the simulator (always, in this library): reports label times
// "simulated" and never compare them with GPU times.
constexpr bool kSimulated = true;

}  // namespace blockscope::sim
