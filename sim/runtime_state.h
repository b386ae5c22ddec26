// Internal to the sim's runtime API (runtime_api.cpp, devices.cpp, streams.cpp, memory.cpp,
// graph.cpp, device_properties.cpp): the state behind the handles, the one global queue, the
// capture rules. Not for other users.
//
// Everything is guarded by one recursive mutex (state_mutex()): the sim is single-threaded
// inside, whichever host thread calls it.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sim/sim.h"

namespace blockscope::sim::detail {
struct Capture;
struct GraphMemory;
}  // namespace blockscope::sim::detail

// The runtime's opaque handle types, defined here: a handle is a pointer to one of these.
struct CUstream_st {
  int device = 0;
  unsigned flags = 0;    // cudaStreamNonBlocking or not
  int priority = 0;      // kept and reported; the one FIFO runs every stream in enqueue order
  std::map<int, cudaLaunchAttributeValue> attributes;  // cudaStreamSetAttribute, by cudaLaunchAttributeID
  bool legacy = false;   // the per-device legacy default stream (also stands for cudaStreamPerThread)
  uint64_t last_seq = 0; // queue position of its most recent op
  blockscope::sim::detail::Capture* capture = nullptr;  // open capture it records into
  size_t capture_nodes = 0;   // graph size after its last captured node (fork/join bookkeeping)
  size_t joined_through = 0;  // graph size at its last event record another capturing stream waited on
};

struct CUevent_st {
  int device = 0;
  unsigned flags = 0;
  uint64_t record_seq = 0;  // queue position of the latest record; 0: never recorded
  bool completed = false;   // the latest record has executed
  bool destroyed = false;   // cudaEventDestroy'ed while a record was queued: its op deletes it
  std::chrono::steady_clock::time_point time{};
  blockscope::sim::detail::Capture* captured_in = nullptr;  // recorded inside this open capture
  CUstream_st* captured_on = nullptr;
  size_t captured_at = 0;  // graph size when recorded in the capture
};

struct CUgraphNode_st {
  std::string name;
  std::function<void()> op;
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  std::shared_ptr<blockscope::sim::detail::GraphMemory> memory;  // allocations made in the capture
};

struct CUgraphExec_st {
  std::vector<std::pair<std::string, std::function<void()>>> nodes;
  std::shared_ptr<blockscope::sim::detail::GraphMemory> memory;
};

struct CUmemPoolHandle_st {
  int device = 0;
  uint64_t release_threshold = 0;
  uint64_t used_current = 0, used_high = 0;
  int reuse_follow_event_dependencies = 1, reuse_allow_opportunistic = 1, reuse_allow_internal_dependencies = 1;
};

namespace blockscope::sim::detail {

std::recursive_mutex& state_mutex();
using Lock = std::lock_guard<std::recursive_mutex>;

// ---- Errors ---------------------------------------------------------------------------------
// Records a failure as the calling thread's last error (what cudaGetLastError returns) and
// returns it; success passes through untouched.
cudaError_t result(cudaError_t error);
// The message cudaGetErrorString returns for cudaErrorLaunchFailure: the latest fault's.
void set_fault_message(const std::string& message);
// Forgets the calling thread's last error (cudaDeviceReset).
void clear_last_error();

// ---- Devices (devices.cpp) ------------------------------------------------------------------
int device_count();    // BLOCKSCOPE_SIM_DEVICES (default 2, 1..8)
int& current_device(); // per host thread
bool valid_device(int device);
constexpr size_t kTotalGlobalMem = 143771140096ull;  // 141 GB (H200 SXM)
constexpr size_t kSharedPerBlock = 48u << 10;
constexpr size_t kSharedPerBlockOptin = 227u << 10;
constexpr size_t kSharedPerSm = 228u << 10;
constexpr size_t kReservedSharedPerBlock = 1u << 10;
constexpr int kSmCount = 132;
constexpr int kMaxThreadsPerSm = 2048;
constexpr int kMaxBlocksPerSm = 32;
constexpr int kRegistersPerSm = 65536;
constexpr int kFirstPciBus = 0x18;                      // device d sits on bus 0x18 + d
constexpr size_t kPersistingL2CacheMax = 0x4B0000;      // bytes of L2 a stream may keep
constexpr size_t kAccessPolicyMaxWindow = 134213632;    // bytes of an access policy window
// A cooperative grid runs with every block resident: every thread a live fiber at once.
constexpr uint64_t kMaxCooperativeThreads = 16384;
// Opt-in dynamic shared memory of a kernel (cudaFuncSetAttribute), 0 when never set.
size_t max_dynamic_smem(const void* function);

// ---- Streams and events (streams.cpp) ---------------------------------------------------------
// Every stream and event created and not yet destroyed.
std::unordered_set<CUstream_st*>& live_streams();
std::unordered_set<CUevent_st*>& live_events();
// The per-device legacy default stream (also what cudaStreamPerThread names).
CUstream_st* legacy_stream(int device);
// The stream a handle names (legacy and per-thread handles: the current device's legacy
// stream); nullptr when the handle is not a live stream.
CUstream_st* resolve_stream(cudaStream_t stream);
CUevent_st* live_event(cudaEvent_t event);  // nullptr when not a live event
// cudaDeviceReset: the device's streams and events are destroyed (a later use is an error).
void destroy_streams_and_events(int device);
// cudaDeviceGetStreamPriorityRange on an H200; priorities outside are clamped.
constexpr int kLeastStreamPriority = 0, kGreatestStreamPriority = -5;

// ---- The queue (runtime_api.cpp) ---------------------------------------------------------------

// Appends an op on `stream` (or records it into the stream's open capture). `cleanup` ops (frees,
// event records) still run when an earlier op faulted and the rest of the queue is dropped.
cudaError_t submit(CUstream_st* stream, std::string name, std::function<void()> op, bool cleanup = false);
// Runs the queue up to and including op `seq` (everything for UINT64_MAX). A fault stops it,
// drops the remaining non-cleanup ops and returns cudaErrorLaunchFailure.
cudaError_t run_through(uint64_t seq);
// The same on a background thread, for host functions: a GPU's stream reaches them without the
// host waiting. A fault there is returned by the next run_through.
void run_in_background_through(uint64_t seq);
uint64_t last_seq();

// ---- Capture --------------------------------------------------------------------------------
struct Capture {
  CUgraph_st* graph = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  CUstream_st* origin = nullptr;
  std::vector<CUstream_st*> streams;  // origin first, then forked streams
  bool invalidated = false;
  unsigned long long id = 0;
};
std::vector<Capture*>& open_captures();
// A potentially unsafe call (cudaMalloc, synchronous copies, synchronisation…): refused with
// cudaErrorStreamCaptureUnsupported, invalidating the capture, when a capture forbids it (this
// thread's non-relaxed capture, or another thread's global one).
cudaError_t check_unsafe_call();
// Legacy-stream work while a blocking stream of the device captures: cudaErrorStreamCaptureImplicit.
cudaError_t check_legacy_use(const CUstream_st* stream);
// Events recorded in a capture that has ended mark no open graph any more.
void forget_capture_events(const Capture* capture);
// Graph memory: allocations made while capturing belong to the graph (see graph.cpp).
GraphMemory& capture_memory(Capture& capture);
void graph_memory_add(GraphMemory& memory, void* ptr);

// ---- Allocations ----------------------------------------------------------------------------
void* allocate_bytes(size_t bytes, size_t alignment);  // poisoned with 0xFF; nullptr on failure
// Records / forgets an allocation (the table behind find_allocation).
void track(void* ptr, size_t size, AllocationInfo::Kind kind, int device, CUmemPoolHandle_st* pool = nullptr);
void untrack_and_free(void* ptr);
bool is_pinned(const void* p, size_t bytes);
// cudaDeviceReset: frees every allocation made on `device` (host memory registered there is only
// forgotten; graph allocations stay with their graphs).
void forget_device_memory(int device);
size_t free_device_bytes(int device);

}  // namespace blockscope::sim::detail
