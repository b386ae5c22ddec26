// The simulated GPU (build option BLOCKSCOPE_CUDA=SIM): the host-side interface between its
// parts. Nothing here includes blockscope headers: the sim sits below runtime/ (it stands in for
// libcudart and libcublasLt), and nvcc-sim builds programs nobody here wrote against it.
//
//   sim/executor.cpp      runs one grid: every GPU thread a fiber, blocks in the schedule's order
//                         (BLOCKSCOPE_SIM_SCHEDULE); barriers and warp collectives:
//                         executor_sync.cpp; the block's shared memory (static and dynamic,
//                         poisoned per block, with redzones): executor_shared.cpp; the stack
//                         guard and the watchdog: executor_guards.cpp
//   sim/access_hooks.cpp  what the instrumented kernel code reports (every load, store and atomic),
//   sim/checks.cpp        checked there: bounds, alignment, other devices' memory, initcheck,
//   sim/race_check.cpp    shared and global races
//   sim/ptx.cpp           mma.sync, ldmatrix and cp.async (sim/ptx.h)
//   sim/symbols.cpp       __device__/__constant__ variables per device, kernel names and the
//                         ptxas figures (registers, static shared memory) nvcc-sim recorded
//   sim/runtime_api.cpp … the CUDA runtime functions, declared by the real <cuda_runtime_api.h>
//                         and linked in place of libcudart (kernel_launch.cpp, devices.cpp,
//                         streams.cpp, streams_check.cpp, memory.cpp, memory_copies.cpp,
//                         capture.cpp, graph.cpp, device_properties.cpp), and the cuBLASLt
//                         subset (cublaslt.cpp, cublaslt_matmul.cpp; GEMM: cublaslt_model.cpp)
//   sim/nccl.cpp          the NCCL subset, declared by the toolkit's <nccl.h>, linked in place
//                         of libnccl: collectives as gated ops of the queue (communicators:
//                         nccl_comms.cpp)
//   sim/kernel_prelude.h  force-included into every .cu that nvcc-sim compiles (its launches:
//                         sim/kernel_launch.h)
//   sim/nvcc_sim/         the nvcc-sim driver: rewrites nvcc-style CUDA (<<<>>>, __shared__,
//                         __device__ variables) into plain C++ for the host compiler
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace blockscope::sim {

// ---- Faults ---------------------------------------------------------------------------------
// What a GPU would corrupt silently, fault on, or hang on. Thrown inside a grid's execution; the
// queue turns it into `code` at the next synchronising call, and cudaGetErrorString of that code
// returns the fault's full message (kernel, block, thread, what happened, the schedule).
struct Fault : std::runtime_error {
  explicit Fault(const std::string& message, cudaError_t code = cudaErrorLaunchFailure)
      : std::runtime_error(message), code(code) {}
  cudaError_t code;
};

// ---- Schedules ------------------------------------------------------------------------------
// BLOCKSCOPE_SIM_SCHEDULE=inorder|reverse|random[:seed] (default inorder). The order decides
// which thread starts first, which waiter a barrier or warp collective releases first and in
// which order the blocks of a grid run:
//   inorder  threads and blocks by index; a thread runs until it blocks (a barrier, a collective)
//            or polls (an atomic, a volatile access, a fence, __nanosleep)
//   reverse  the same, highest index first
//   random   a random runnable thread at every switch, several blocks resident at once, and a
//            thread may be preempted at any shared or global access (about one in eight)
// A random run draws its grids' seeds from `seed` (a fresh one, printed, when none is given) and
// names it in every fault, so BLOCKSCOPE_SIM_SCHEDULE=random:<seed> replays it.
enum class Order { inorder, reverse, random };
struct Schedule {
  Order order = Order::inorder;
  uint64_t seed = 0;
};
// Parses "inorder", "reverse", "random" or "random:<seed>"; false with `error` set otherwise.
bool parse_schedule(const std::string& text, Schedule* schedule, std::string* error);
std::string schedule_name(const Schedule& schedule);  // "random:42"
Schedule current_schedule();
void set_schedule(const Schedule& schedule);  // for tests; the environment decides otherwise

// ---- Checks ---------------------------------------------------------------------------------
// BLOCKSCOPE_SIM_CHECKS=all (default) | none | a comma list of:
//   race      shared-memory hazards between barriers, global-memory hazards between the threads
//             of a block (compute-sanitizer racecheck's job), and between blocks of one launch
//             not ordered by atomics, fences, volatile accesses or a grid barrier; atomics excepted
//   memcheck  every access inside live memory of the right kind (device allocations of this
//             device or a peer, the block's shared memory variables, __device__ variables,
//             read-only data), aligned to its size; writes to __constant__ refused
//   initcheck a kernel read of cudaMalloc/cudaMallocAsync/graph memory that nothing wrote (no
//             cudaMemset, cudaMemcpy or kernel store since the allocation); managed, pinned and
//             registered memory count as written (the host writes them unseen)
//   synccheck a shuffle reading a lane of its mask that has exited
//   streams   cross-stream races: a kernel, copy or memset touching bytes of an allocation that
//             another stream's work wrote (or read, when it writes) with no event, stream wait or
//             synchronisation ordering the two
//   strictsync (not in `all`) a __syncthreads completed while threads of the block exited
//             without reaching it: PTX releases it (exited threads do not hold up a barrier), the
//             CUDA guide calls a __syncthreads in block-divergent code undefined
// All but streams need kernels built by nvcc-sim (the host compiler's ThreadSanitizer
// instrumentation reporting every access to sim/access_hooks.cpp); nvcc-sim leaves it out in ASan
// builds, where AddressSanitizer and UBSan's alignment check stand in for memcheck and nothing
// for race, initcheck or streams' view of kernels.
struct Checks {
  bool race = true;
  bool memcheck = true;
  bool initcheck = true;
  bool synccheck = true;
  bool streams = true;
  bool strictsync = false;
};
bool parse_checks(const std::string& text, Checks* checks, std::string* error);
Checks current_checks();
void set_checks(const Checks& checks);
// Translation units compiled with the instrumentation so far (each registers at start-up).
int instrumented_units();

// ---- One grid -------------------------------------------------------------------------------
struct GridLaunch {
  const char* name = "?";          // kernel name as the launch spelled it, for messages
  const void* function = nullptr;  // the kernel's address when known (attributes, ptxas figures)
  dim3 grid, block;
  size_t dynamic_smem = 0;
  bool cooperative = false;        // cudaLaunchCooperativeKernel: every block resident, grid.sync()
  const char* file = nullptr;      // launch site, for messages
  int line = 0;
  int device = 0;                  // set by launch(): the stream's device
};

// Runs every block of the grid on the calling thread. `body` runs once per GPU thread with
// threadIdx/blockIdx set. Throws Fault.
void run_grid(const GridLaunch& launch, const std::function<void()>& body);

// ---- The queue ------------------------------------------------------------------------------
// Appends `op` to the stream (nullptr = the legacy default stream). Ops run in the order they
// were enqueued, at the next synchronising call (or are recorded into a graph while the stream
// is capturing). `name` labels the op in launch records and faults.
void enqueue(cudaStream_t stream, const char* name, std::function<void()> op);

// Validates the launch (threads per block, grid and block dimensions, dynamic shared memory
// against the default 48 KiB or the function's opt-in attribute, the device's limits, the
// cooperative limits); on failure sets the runtime's last error (cudaGetLastError), enqueues
// nothing and returns the error. Otherwise enqueues run_grid(launch, body), records the launch
// and returns cudaSuccess.
cudaError_t launch(const GridLaunch& launch, cudaStream_t stream, std::function<void()> body);

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
  // pinned_host: cudaMallocHost/cudaHostAlloc; registered_host: the caller's memory, cudaHostRegister'ed.
  enum class Kind { device, pool, graph, pinned_host, registered_host, managed };
  void* base = nullptr;  // start of the allocation containing the pointer
  size_t size = 0;       // bytes asked for
  int device = 0;        // device current at allocation (pinned host memory: that device too)
  Kind kind = Kind::device;
  struct WrittenBytes* written = nullptr;  // initcheck's shadow (null: counts as written throughout)
};

// initcheck's shadow of one allocation: a bit per byte, set once something wrote the byte.
struct WrittenBytes {
  std::vector<uint64_t> bits;
  size_t size = 0;
  size_t unwritten = 0;                // bytes not written yet (0: the checks skip it)
  const void* allocated_at = nullptr;  // the host code that allocated it, for messages
  explicit WrittenBytes(size_t bytes) : bits((bytes + 63) / 64, 0), size(bytes), unwritten(bytes) {}
  bool test(size_t i) const { return (bits[i / 64] >> (i % 64) & 1u) != 0; }
  void mark(size_t offset, size_t n) {
    size_t i = offset;
    const size_t end = offset + n;
    while (unwritten != 0 && i < end) {
      uint64_t& word = bits[i / 64];
      if (i % 64 == 0 && end - i >= 64) {
        unwritten -= 64 - static_cast<size_t>(__builtin_popcountll(word));
        word = ~uint64_t{0};
        i += 64;
        continue;
      }
      const uint64_t bit = uint64_t{1} << (i % 64);
      if ((word & bit) == 0) {
        word |= bit;
        --unwritten;
      }
      ++i;
    }
  }
  // The first byte of [offset, offset + n) not written, or SIZE_MAX.
  size_t first_unwritten(size_t offset, size_t n) const {
    if (unwritten == 0) return SIZE_MAX;
    for (size_t i = offset; i < offset + n; ++i)
      if (!test(i)) return i;
    return SIZE_MAX;
  }
  void forget() {  // poisoned again (a graph allocation at every launch)
    std::fill(bits.begin(), bits.end(), 0);
    unwritten = size;
  }
};
// initcheck: `bytes` at `p` were written by work the instrumentation does not see (copies,
// memsets, cuBLASLt, NCCL). Ignores memory the sim does not track.
void note_written(const void* p, size_t bytes);
// A copy's destination takes over what of the source was written (all of it for untracked sources).
void note_copied(void* dst, const void* src, size_t bytes);
// The streams check: the op running now (a copy, a memset, a cuBLASLt GEMM) reads or writes
// `bytes` at `p`. Kernels' accesses are recorded by the instrumentation instead.
void note_op_access(const void* p, size_t bytes, bool write);
// True (and *info filled when not null) when p points into a live allocation: [base, base+size).
bool find_allocation(const void* p, AllocationInfo* info);
// Every live allocation, for a grid's memory checks (taken once per grid).
void snapshot_allocations(std::function<void(const AllocationInfo&)> visit);
// Whether kernels on `device` may access memory of `owner` (same device, or peer access enabled).
bool peer_access_enabled(int device, int owner);

// ---- Kernels --------------------------------------------------------------------------------
// What ptxas said of a kernel (nvcc-sim compiles each .cu with nvcc for sm_90 when nvcc is
// there and registers its figures under the kernel's mangled name).
struct KernelResources {
  const char* mangled_name;
  int registers;       // per thread
  int static_smem;     // bytes
  int local_bytes;     // stack frame per thread
  int barriers;
};
void register_kernel_resources(const KernelResources* resources, size_t count);
// The figures of the kernel at `function`; false when nvcc-sim recorded none for it.
bool kernel_resources(const void* function, KernelResources* resources);
// The demangled name of the function at `address` ("" when the symbol table does not know it),
// and its last component without parameters ("softmax_kernel<float, true, 2>").
std::string function_name(const void* address);
std::string short_function_name(const void* address);

// Launching a kernel known only by its address (cudaLaunchKernel((void*)k, ...), as CUDA code
// does through the C API): nvcc-sim registers, after each kernel it compiles that is not a
// template and whose name is not overloaded where it is defined, a launcher that knows its
// parameter types.
using PointerLauncher = cudaError_t (*)(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                        cudaStream_t stream, bool cooperative);
void register_pointer_launcher(const void* kernel, PointerLauncher launcher);
PointerLauncher find_pointer_launcher(const void* kernel);  // nullptr when none was registered

// Name of the most recent kernel launched by the calling thread through the sim (custom kernels
// and the cuBLASLt subset's GEMM kernels): the sim's stand-in for CUPTI's kernel records. A
// kernel's own name when its address is known (a launch through a pointer spells the pointer).
std::string last_kernel_name();
void set_last_kernel_name(std::string name, const void* function = nullptr);

// ---- Counters (Nsight Compute's metric names) --------------------------------------------------
// With counting on, every grid that finishes counts, exactly and per launch, what its threads did
// at the source level (sim/counters.cpp has the list and the rules): global requests and 32-byte
// sectors, shared-memory instructions, wavefronts and bank conflicts, ldmatrix, cp.async, MMAs,
// atomics, barriers, active lanes per memory instruction, and the launch statistics with the
// theoretical occupancy of an sm_90 SM. Kernels must be built by nvcc-sim with its access
// instrumentation (not in ASan builds: there only what the simulator does itself counts —
// launch statistics, MMAs, ldmatrix, cp.async and barriers; no plain loads or stores).
// BLOCKSCOPE_SIM_COUNTERS=FILE.json turns counting on and writes every launch to FILE at exit
// ("%p" in FILE becomes the process id; a forked child writes none). A place that cannot be
// written is said on stderr at start-up and again at exit.
struct KernelCounters {
  std::string name;  // the kernel's function name ("softmax_kernel<float, true>")
  dim3 grid, block;
  int device = 0;
  std::string occupancy_limiter;  // "registers", "shared_mem", "warps" or "blocks"
  std::vector<std::pair<std::string, double>> metrics;  // name → value, in the list's order
};
bool counters_enabled();
void set_counters_enabled(bool on);  // for programs and tests; the environment decides otherwise
// The launches counted since the last call (oldest first), forgotten here; the file still gets them.
std::vector<KernelCounters> take_kernel_counters();
// The JSON document of `launches`: {"kernels": [{"name", "grid", "block", "device",
// "occupancy_limiter", "metrics": {...}}, ...]}.
std::string counters_json(const std::vector<KernelCounters>& launches);

// True when this build's CUDA is the simulator (always, in this library): reports label times
// "simulated" and never compare them with GPU times.
constexpr bool kSimulated = true;

}  // namespace blockscope::sim
