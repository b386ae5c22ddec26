// Internal to the sim's runtime API (runtime_api.cpp, kernel_launch.cpp, devices.cpp, streams.cpp,
// memory*.cpp, capture.cpp, graph.cpp, device_properties.cpp) and its NCCL subset (nccl*.cpp):
// the state behind the handles, the one global queue, the capture rules. Not for other users.
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

#include "sim/occupancy.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
struct Capture;
struct GraphMemory;
}  // namespace blockscope::sim::detail

// The runtime's opaque handle types, defined here: a handle is a pointer to one of these.
struct CUstream_st {
  int device = 0;
  uint64_t id = 0;       // unique per stream ever created: the queue's key for its ordering
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
  std::function<void()> op;  // empty: nothing to run (an empty node)
  CUgraph_st* graph = nullptr;
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;  // captured nodes: empty (their op says what they do)
  std::vector<CUgraphNode_st*> dependencies;        // in edge order; a captured node: the node before it
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  std::shared_ptr<blockscope::sim::detail::GraphMemory> memory;  // allocations made in the capture
};

struct CUgraphExec_st {
  struct Node {
    const CUgraphNode_st* source;  // the graph's node it was instantiated from (the handle users pass)
    size_t index;                  // the source's position in its graph (cudaGraphExecUpdate pairs by it)
    cudaGraphNodeType type;
    std::vector<size_t> dependencies;  // indices of the dependencies' sources, in edge order
    std::string name;
    std::function<void()> op;
  };
  std::vector<Node> nodes;  // in an order that respects every dependency
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
// Holds state_mutex() and counts the levels this thread holds, so that a host thread waiting for
// another (a collective's peers) can release them all (with_state_released).
class Lock {
 public:
  explicit Lock(std::recursive_mutex& mutex);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::recursive_mutex& mutex_;
};
// Runs `wait` with every level of state_mutex() this thread holds released, then takes them back.
void with_state_released(const std::function<void()>& wait);

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
// An H200's SM: sm_90's limits, stated once in sim/occupancy.h.
constexpr size_t kSharedPerSm = static_cast<size_t>(kSm90Limits.smem_per_sm);
constexpr size_t kReservedSharedPerBlock = static_cast<size_t>(kSm90Limits.reserved_smem_per_block);
constexpr int kSmCount = 132;
constexpr int kMaxThreadsPerSm = kSm90Limits.max_warps * 32;
constexpr int kMaxBlocksPerSm = kSm90Limits.max_blocks;
constexpr int kRegistersPerSm = kSm90Limits.registers_per_sm;
constexpr int kFirstPciBus = 0x18;                      // device d sits on bus 0x18 + d
constexpr size_t kPersistingL2CacheMax = 0x4B0000;      // bytes of L2 a stream may keep
constexpr size_t kAccessPolicyMaxWindow = 134213632;    // bytes of an access policy window
// A cooperative grid runs with every block resident: every thread a live fiber at once.
constexpr uint64_t kMaxCooperativeThreads = 16384;
// cudaDeviceSetLimit's value of `limit` on `device`.
size_t device_limit(int device, cudaLimit limit);
// The device heap (device_heap.cpp): once a kernel has allocated from it, cudaLimitMallocHeapSize
// is fixed; cudaDeviceReset frees it.
void mark_device_heap_in_use(int device);
void forget_device_heap(int device);
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
// One FIFO of every stream's ops, run in enqueue order, except that an op may wait at a gate (a
// collective whose peers have not all arrived, a wait on an event recorded behind one): then the
// later ops of its stream wait too — and, as the legacy default stream's implicit
// synchronisation asks, the device's legacy stream behind a waiting blocking stream and the
// blocking streams behind a waiting legacy stream — while every other stream goes on.

// What a gated op waits for. Asked only once the op is next in its stream's order.
class Gate {
 public:
  virtual ~Gate() = default;
  virtual bool open() = 0;                       // the op may run now
  virtual std::string waiting_for() const = 0;   // for the hang error: what has not happened
  // The hang timeout ran out with this gate closed, or a fault dropped its op: `why` says which.
  // Returns the devices whose next synchronising call must report it (post_device_fault).
  virtual std::vector<int> abandon(const std::string& why) = 0;
};

// Appends an op on `stream` (or records it into the stream's open capture). `cleanup` ops (frees,
// event records) still run when an earlier op faulted and the rest of the queue is dropped.
cudaError_t submit(CUstream_st* stream, std::string name, std::function<void()> op, bool cleanup = false,
                   std::shared_ptr<Gate> gate = nullptr);
// Runs the queue until op `seq` has run (everything for UINT64_MAX). A fault stops it, drops the
// remaining non-cleanup ops and returns its code. When what it needs waits at a closed gate, the
// host thread waits (the state lock released) for other threads to open it, up to the hang
// timeout (nccl_timeout_seconds), then fails the gate: cudaErrorLaunchTimeout, its message
// naming what never came. Also returns, once, a fault posted for `device` (-1: the current one).
cudaError_t run_through(uint64_t seq, int device = -1);
// Runs what can run towards op `seq` without waiting at a gate (queries).
cudaError_t run_ready_through(uint64_t seq);
// cudaDeviceSynchronize: runs until no op of `device` is queued (waiting as run_through does).
cudaError_t run_device(int device);
// Whether op `seq` is still queued (not yet run, nor dropped).
bool op_pending(uint64_t seq);
// The same as run_ready_through on a background thread, for host functions: a GPU's stream
// reaches them without the host waiting; one behind a closed gate runs once the gate opens. A
// fault there is returned by the next run_through.
void run_in_background_through(uint64_t seq);
// Wakes host threads waiting at gates (an op arrived that may open one).
void notify_gates_changed();
// A fault the next synchronising call on `device` returns once, although another host thread met
// it (a failed collective is reported on every rank's device).
void post_device_fault(int device, cudaError_t code);
// The message cudaGetErrorString gives for `code`, from now on (a fault that no op threw).
void set_fault(cudaError_t code, const std::string& message);
uint64_t last_seq();
// BLOCKSCOPE_SIM_NCCL_TIMEOUT_S (default 20): how long a host thread waits at a closed gate, and
// ncclCommInitRank for its clique, before reporting a hang.
double nccl_timeout_seconds();

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
// Graph memory: allocations made while capturing belong to the graph (see capture.cpp).
GraphMemory& capture_memory(Capture& capture);
void graph_memory_add(GraphMemory& memory, void* ptr);
// A graph cudaStreamEndCapture built: the graph calls (graph.cpp) know it from now on.
void add_graph(CUgraph_st* graph);

// ---- Allocations ----------------------------------------------------------------------------
void* allocate_bytes(size_t bytes, size_t alignment);  // poisoned with 0xFF; nullptr on failure
// Records / forgets an allocation (the table behind find_allocation).
void track(void* ptr, size_t size, AllocationInfo::Kind kind, int device, CUmemPoolHandle_st* pool = nullptr);
void untrack_and_free(void* ptr);
bool is_pinned(const void* p, size_t bytes);
// A device-side range a copy or memset may use (memory_copies.cpp): all inside one live device or
// managed allocation, none with a queued free; on_device: one of `device` (or managed).
bool device_range_ok(const void* p, size_t bytes);
bool on_device(const void* p, size_t bytes, int device);
// cudaDeviceReset: frees every allocation made on `device` (host memory registered there is only
// forgotten; graph allocations stay with their graphs).
void forget_device_memory(int device);
size_t free_device_bytes(int device);
// initcheck: an allocation poisoned again (a graph allocation's node): nothing of it is written.
void forget_writes(void* ptr);
// The streams check (streams_check.cpp): forgets what was recorded of a freed allocation; gives
// a queued op its place in the streams' order (op `seq` on `stream`) and wraps it so that what it
// touches is checked and recorded when it runs; a stream's next ops follow an event's record; the
// host has waited for op `seq` (UINT64_MAX: for everything), or for everything of a device.
void forget_stream_accesses(const void* base);
std::shared_ptr<const struct OpOrder> order_new_op(const CUstream_st* stream, const std::string& name, uint64_t seq);
std::function<void()> ordered_op(std::shared_ptr<const struct OpOrder> order, std::function<void()> op);
void order_stream_waits_event(const CUstream_st* stream, uint64_t record_seq);
void order_host_waited(uint64_t seq);
void order_host_waited_device(int device);

}  // namespace blockscope::sim::detail
