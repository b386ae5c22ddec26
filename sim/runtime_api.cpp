// The CUDA runtime on the simulated GPU: errors and the queue (kernel launches: kernel_launch.cpp;
// devices and their settings: devices.cpp; streams, events and host functions: streams.cpp;
// memory: memory.cpp, its copies and memsets memory_copies.cpp; stream capture: capture.cpp;
// graphs: graph.cpp; properties: device_properties.cpp).
//
// Execution is lazy: every stream's work goes into one global FIFO, which respects each stream's
// order and every event wait (a wait always refers to an earlier record), and the FIFO runs at
// synchronising calls — and, up to a host function (cudaLaunchHostFunc, a stream callback), on a
// background thread, as a GPU's stream reaches those by itself. A fault while it runs is returned
// as its code (cudaErrorLaunchFailure …) by that call, or by the next synchronising one after a
// background run (and by cudaGetLastError / cudaPeekAtLastError of that host thread), and the
// rest of the queue is dropped. Unlike a GPU, the error is not sticky: later calls succeed again.
// An op may also wait at a gate (an NCCL collective until every rank has called, nccl.cpp): its
// stream's later ops wait with it, other streams go on, and a synchronising call waiting for it
// releases the state lock until another host thread opens it or the hang timeout runs out.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <utility>

#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
namespace {

struct Op {
  uint64_t seq;
  std::string name;
  std::function<void()> fn;
  bool cleanup;
  std::shared_ptr<Gate> gate;  // null: runs as soon as its stream reaches it
  uint64_t stream;             // CUstream_st::id
  int device;
  bool legacy, blocking;       // the legacy default stream's implicit synchronisation
  bool at_gate = false;        // its stream reached it and its gate was closed
  bool done = false;           // ran or dropped; removed at the end of the pass
};

// Ops in enqueue order (seq ascending); done ones leave at the end of each pass.
std::deque<Op> g_queue;
uint64_t g_next_seq = 1;
bool g_running = false;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_lock_depth = 0;  // levels of state_mutex() this thread holds (Lock)
std::set<std::string> g_fault_messages;  // cudaGetErrorString's pointers stay valid
const char* g_fault_message = nullptr;
cudaError_t g_fault_code = cudaErrorLaunchFailure;  // the code the latest fault was returned as
cudaError_t g_posted_faults[8] = {};                // post_device_fault, per device
// A fault met while the queue ran in the background (for a host function), for the next
// synchronising call to return.
cudaError_t g_background_fault = cudaSuccess;

// Host threads waiting at closed gates, and the background runner, sleep on this; every change
// that may open a gate (an op arrived, a pass ran something, a fault dropped the queue) bumps the
// generation. Taken after state_mutex(), never before it. Never destroyed: the background thread
// outlives main() blocked on them.
std::mutex& g_gate_mutex = *new std::mutex;
std::condition_variable& g_gate_changed = *new std::condition_variable;
uint64_t g_gate_generation = 0;

Op* find_op(uint64_t seq) {
  auto it = std::lower_bound(g_queue.begin(), g_queue.end(), seq, [](const Op& op, uint64_t s) { return op.seq < s; });
  return it != g_queue.end() && it->seq == seq && !it->done ? &*it : nullptr;
}

bool queue_empty() {
  return std::all_of(g_queue.begin(), g_queue.end(), [](const Op& op) { return op.done; });
}

// Runs every cleanup op left and drops the rest (a fault ended the queue's run). Returns the
// devices the dropped gates say must hear of it.
std::vector<int> drop_queue(const std::string& why) {
  std::vector<int> devices;
  for (size_t i = 0; i < g_queue.size(); ++i) {
    Op& op = g_queue[i];
    if (op.done) continue;
    op.done = true;
    if (op.gate != nullptr) {
      const std::vector<int> told = op.gate->abandon(why);
      devices.insert(devices.end(), told.begin(), told.end());
    }
    if (!op.cleanup) continue;
    std::function<void()> fn = std::move(op.fn);
    try {
      fn();
    } catch (const std::exception&) {  // a cleanup op after a fault: nothing more to report
    }
  }
  return devices;
}

void post_faults(const std::vector<int>& devices, cudaError_t code) {
  for (const int device : devices)
    if (device >= 0 && device < 8) g_posted_faults[device] = code;
}

// One pass over the queue in order: runs each op with seq <= limit that its stream's order, the
// legacy stream's implicit synchronisation and its gate allow. A fault drops the queue and
// sets `status`. Returns whether anything ran or was dropped.
bool run_pass(uint64_t limit, cudaError_t& status) {
  bool progressed = false;
  std::unordered_set<uint64_t> held;  // streams with an earlier op still queued
  bool legacy_held[8] = {}, blocking_held[8] = {};
  for (size_t i = 0; i < g_queue.size() && g_queue[i].seq <= limit; ++i) {
    Op& op = g_queue[i];
    if (op.done) continue;
    bool waits = held.count(op.stream) != 0 ||
                 (op.legacy ? blocking_held[op.device] : op.blocking && legacy_held[op.device]);
    if (!waits && op.gate != nullptr) {
      op.at_gate = !op.gate->open();
      waits = op.at_gate;
    }
    if (waits) {
      held.insert(op.stream);
      if (op.legacy) {
        legacy_held[op.device] = true;
      } else if (op.blocking) {
        blocking_held[op.device] = true;
      }
      continue;
    }
    op.done = true;
    progressed = true;
    std::function<void()> fn = std::move(op.fn);
    const std::string name = op.name;  // `op` may move: an op may queue more
    try {
      fn();
    } catch (const std::exception& error) {
      // Kernel faults already name kernel, block and thread; other ops get their name.
      const auto* fault = dynamic_cast<const Fault*>(&error);
      const std::string message = fault != nullptr ? std::string(error.what()) : name + ": " + error.what();
      status = fault != nullptr ? fault->code : cudaErrorLaunchFailure;
      set_fault(status, message);
      post_faults(drop_queue("dropped after an earlier fault: " + message), status);
      break;
    }
  }
  g_queue.erase(std::remove_if(g_queue.begin(), g_queue.end(), [](const Op& op) { return op.done; }),
                g_queue.end());
  if (progressed) notify_gates_changed();
  return progressed;
}

// Nothing can run and a gate stayed closed past the timeout: fails the first closed gate that
// waits for something of its own (not only for other ops), and drops the queue.
cudaError_t fail_closed_gate(double waited_s) {
  for (Op& op : g_queue) {
    if (op.done || !op.at_gate) continue;
    const std::string what = op.gate->waiting_for();
    if (what.empty()) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", waited_s);
    const std::string message = op.name + " hung: " + what + " after " + seconds +
                                " s (BLOCKSCOPE_SIM_NCCL_TIMEOUT_S)";
    std::vector<int> devices = op.gate->abandon(message);
    op.gate = nullptr;  // failed already; drop_queue need not tell it again
    set_fault(cudaErrorLaunchTimeout, message);
    const std::vector<int> dropped = drop_queue("dropped after a hang: " + message);
    devices.insert(devices.end(), dropped.begin(), dropped.end());
    post_faults(devices, cudaErrorLaunchTimeout);
    g_queue.clear();
    notify_gates_changed();
    return cudaErrorLaunchTimeout;
  }
  return cudaSuccess;  // every closed gate waits for another op: none to blame (cannot happen)
}

// Runs passes until done(); see run_through. `may_wait`: wait at closed gates (else return).
cudaError_t run_until(const std::function<bool()>& done, uint64_t limit, bool may_wait) {
  Lock lock(state_mutex());
  if (g_running) return cudaSuccess;  // an op that synchronises: the outer run goes on
  g_running = true;
  cudaError_t status = std::exchange(g_background_fault, cudaSuccess);
  using Clock = std::chrono::steady_clock;
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(nccl_timeout_seconds()));
  auto since = Clock::now();
  while (status == cudaSuccess && !done()) {
    if (run_pass(limit, status)) {
      since = Clock::now();
      continue;
    }
    if (status != cudaSuccess) break;
    // Nothing ran: what is left waits at a gate. A collective's peers may sit past `limit` (other
    // ranks enqueue later), so the whole queue runs from here, as a GPU would run it anyway.
    if (limit != UINT64_MAX) {
      limit = UINT64_MAX;
      continue;
    }
    if (!may_wait || queue_empty()) break;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> guard(g_gate_mutex);
      generation = g_gate_generation;
    }
    const auto deadline = since + timeout;
    bool changed = false;
    g_running = false;
    with_state_released([&] {
      std::unique_lock<std::mutex> wait(g_gate_mutex);
      changed = g_gate_changed.wait_until(wait, deadline, [&] { return g_gate_generation != generation; });
    });
    g_running = true;
    if (changed) {
      since = Clock::now();  // something arrived: the hang clock starts again
    } else {
      status = fail_closed_gate(std::chrono::duration<double>(Clock::now() - since).count());
      if (status == cudaSuccess) break;
    }
  }
  g_running = false;
  return status;
}

}  // namespace

Lock::Lock(std::recursive_mutex& mutex) : mutex_(mutex) {
  mutex_.lock();
  ++t_lock_depth;
}

Lock::~Lock() {
  --t_lock_depth;
  mutex_.unlock();
}

void with_state_released(const std::function<void()>& wait) {
  const int depth = t_lock_depth;
  for (int i = 0; i < depth; ++i) state_mutex().unlock();
  wait();
  for (int i = 0; i < depth; ++i) state_mutex().lock();
}

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

void set_fault(cudaError_t code, const std::string& message) {
  Lock lock(state_mutex());
  g_fault_code = code;
  set_fault_message(message);
}

void post_device_fault(int device, cudaError_t code) {
  Lock lock(state_mutex());
  post_faults({device}, code);
}

// Read at every use, so a test can shorten it for one case.
double nccl_timeout_seconds() {
  constexpr double kDefault = 20.0;
  const char* env = std::getenv("BLOCKSCOPE_SIM_NCCL_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return kDefault;
  char* end = nullptr;
  const double value = std::strtod(env, &end);
  if (*end != '\0' || !(value > 0)) {
    static std::once_flag warned;
    std::call_once(warned, [env] {
      std::fprintf(stderr, "blockscope sim: BLOCKSCOPE_SIM_NCCL_TIMEOUT_S=%s is not a positive number; using 20\n", env);
    });
    return kDefault;
  }
  return value;
}

void notify_gates_changed() {
  {
    std::lock_guard<std::mutex> guard(g_gate_mutex);
    ++g_gate_generation;
  }
  g_gate_changed.notify_all();
}

uint64_t last_seq() { return g_next_seq - 1; }

cudaError_t submit(CUstream_st* stream, std::string name, std::function<void()> op, bool cleanup,
                   std::shared_ptr<Gate> gate) {
  Lock lock(state_mutex());
  if (Capture* capture = stream->capture) {
    if (capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    auto node = std::make_unique<CUgraphNode_st>();
    node->name = std::move(name);
    node->op = std::move(op);
    node->graph = capture->graph;
    if (!capture->graph->nodes.empty()) node->dependencies.push_back(capture->graph->nodes.back().get());
    capture->graph->nodes.push_back(std::move(node));
    stream->capture_nodes = capture->graph->nodes.size();
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(stream); error != cudaSuccess) return error;
  const uint64_t seq = g_next_seq++;
  if (current_checks().streams) op = ordered_op(order_new_op(stream, name, seq), std::move(op));
  const bool gated = gate != nullptr;
  g_queue.push_back(Op{seq, std::move(name), std::move(op), cleanup, std::move(gate), stream->id, stream->device,
                       stream->legacy, !stream->legacy && (stream->flags & cudaStreamNonBlocking) == 0});
  stream->last_seq = seq;
  if (gated) notify_gates_changed();  // it may open the gates of ops queued before it
  return cudaSuccess;
}

bool op_pending(uint64_t seq) {
  Lock lock(state_mutex());
  return find_op(seq) != nullptr;
}

cudaError_t run_through(uint64_t seq, int device) {
  Lock lock(state_mutex());
  cudaError_t status = run_until([seq] { return seq == UINT64_MAX ? queue_empty() : find_op(seq) == nullptr; },
                                 seq, true);
  // The host has waited for op `seq` (a fault drops the rest of the queue: then for everything).
  if (status == cudaSuccess || queue_empty()) order_host_waited(status == cudaSuccess ? seq : UINT64_MAX);
  // A fault this call returns need not be posted to its device again.
  const int target = device >= 0 ? device : current_device();
  const cudaError_t posted = std::exchange(g_posted_faults[target], cudaSuccess);
  return status != cudaSuccess ? status : posted;
}

cudaError_t run_ready_through(uint64_t seq) {
  Lock lock(state_mutex());
  const cudaError_t status =
      run_until([seq] { return seq == UINT64_MAX ? queue_empty() : find_op(seq) == nullptr; }, seq, false);
  if (status == cudaSuccess && (seq == UINT64_MAX ? queue_empty() : find_op(seq) == nullptr)) order_host_waited(seq);
  return status;
}

cudaError_t run_device(int device) {
  Lock lock(state_mutex());
  const cudaError_t status = run_until(
      [device] {
        return std::none_of(g_queue.begin(), g_queue.end(),
                            [device](const Op& op) { return !op.done && op.device == device; });
      },
      UINT64_MAX, true);
  order_host_waited_device(device);  // done, or dropped by a fault
  const cudaError_t posted = std::exchange(g_posted_faults[device], cudaSuccess);
  return status != cudaSuccess ? status : posted;
}

// A GPU's stream reaches a host function without the host waiting, and programs rely on it (a
// callback that releases a host thread the program then waits for). So the queue up to a host
// function also runs on a background thread, with the state lock held as any run holds it; a
// host function behind a closed gate runs once something opens it.
void run_in_background_through(uint64_t seq) {
  static uint64_t target = 0;  // guarded by g_gate_mutex
  static bool started = false;
  {
    std::lock_guard<std::mutex> guard(g_gate_mutex);
    target = std::max(target, seq);
    if (!started) {
      started = true;
      // Detached: it outlives main() blocked on the condition variable.
      std::thread([] {
        uint64_t done = 0, seen = 0;
        bool stalled = false;  // its target waits at a gate: retry when the gates change
        for (;;) {
          uint64_t through = 0;
          {
            std::unique_lock<std::mutex> wait(g_gate_mutex);
            g_gate_changed.wait(wait, [&] { return target > done || (stalled && g_gate_generation != seen); });
            through = target;
            seen = g_gate_generation;
          }
          Lock lock(state_mutex());
          const cudaError_t status = run_ready_through(through);
          if (status != cudaSuccess) g_background_fault = status;
          stalled = find_op(through) != nullptr && status == cudaSuccess;
          if (!stalled) done = through;
        }
      }).detach();
    }
  }
  notify_gates_changed();
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


}  // namespace blockscope::sim

// ---- The runtime API --------------------------------------------------------------------------
using namespace blockscope::sim;
using namespace blockscope::sim::detail;

namespace {

struct RuntimeErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

// The codes the sim returns, with the runtime's names and texts.
constexpr RuntimeErrorText kRuntimeErrors[] = {
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
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
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

const RuntimeErrorText* find_error(cudaError_t error) {
  for (const RuntimeErrorText& entry : kRuntimeErrors)
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
  const RuntimeErrorText* entry = find_error(error);
  return entry ? entry->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  if (error == g_fault_code) {
    Lock lock(state_mutex());
    if (g_fault_message != nullptr) return g_fault_message;
  }
  const RuntimeErrorText* entry = find_error(error);
  return entry ? entry->text : "unrecognized error code";
}

}  // extern "C"
