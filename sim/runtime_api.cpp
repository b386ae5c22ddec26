// The CUDA runtime on the simulated GPU: errors, devices, the queue, streams, events and kernel
// launches (memory: memory.cpp; capture and graphs: graph.cpp; properties: device_properties.cpp).
//
// Execution is lazy: every stream's work goes into one global FIFO, which respects each stream's
// order and every event wait (a wait always refers to an earlier record), and the FIFO runs at
// synchronising calls — and, up to a host function (cudaLaunchHostFunc, a stream callback), on a
// background thread, as a GPU's stream reaches those by itself. A fault while it runs is returned
// as its code (cudaErrorLaunchFailure …) by that call, or by the next synchronising one after a
// background run (and by cudaGetLastError / cudaPeekAtLastError of that host thread), and the
// rest of the queue is dropped. Unlike a GPU, the error is not sticky: later calls succeed again.
#include <cuda_profiler_api.h>
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
#include <unordered_set>
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
std::unordered_set<CUstream_st*> g_streams;
std::unordered_set<CUevent_st*> g_events;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_last_kernel;
thread_local const void* t_last_kernel_function = nullptr;
std::set<std::string> g_fault_messages;  // cudaGetErrorString's pointers stay valid
const char* g_fault_message = nullptr;
cudaError_t g_fault_code = cudaErrorLaunchFailure;  // the code the latest fault was returned as
bool g_peer_access[8][8] = {};  // [device][peer]: kernels on device may access peer's memory
unsigned g_device_flags[8] = {};  // cudaSetDeviceFlags
cudaFuncCache g_cache_config[8] = {};

// cudaDeviceSetLimit's values per device, by cudaLimit, and their defaults on an H200.
constexpr int kLimits = cudaLimitPersistingL2CacheSize + 1;
constexpr size_t kDefaultLimits[kLimits] = {1024, 1u << 20, 8u << 20, 2, 2048, 32, 0};
size_t g_limits[8][kLimits];
bool g_limits_set[8] = {};
size_t* device_limits(int device) {
  if (!g_limits_set[device]) {
    std::copy(kDefaultLimits, kDefaultLimits + kLimits, g_limits[device]);
    g_limits_set[device] = true;
  }
  return g_limits[device];
}

constexpr int kLeastPriority = 0, kGreatestPriority = -5;  // cudaDeviceGetStreamPriorityRange on an H200

CUstream_st* legacy_stream(int device) {
  static CUstream_st streams[8];
  static bool initialised = [] {
    for (int d = 0; d < 8; ++d) {
      streams[d].device = d;
      streams[d].legacy = true;
    }
    return true;
  }();
  (void)initialised;
  return &streams[device];
}

}  // namespace

std::recursive_mutex& state_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

cudaError_t result(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

void set_fault_message(const std::string& message) {
  Lock lock(state_mutex());
  g_fault_message = g_fault_messages.insert(message).first->c_str();
}

int device_count() {
  static const int count = [] {
    const char* env = std::getenv("BLOCKSCOPE_SIM_DEVICES");
    if (env == nullptr || *env == '\0') return 2;
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (*end != '\0' || value < 1 || value > 8) {
      std::fprintf(stderr, "blockscope sim: BLOCKSCOPE_SIM_DEVICES=%s is not in 1..8; using 2\n", env);
      return 2;
    }
    return static_cast<int>(value);
  }();
  return count;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

bool valid_device(int device) { return device >= 0 && device < device_count(); }

CUstream_st* resolve_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return legacy_stream(current_device());
  }
  return g_streams.count(stream) ? stream : nullptr;
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

void forget_capture_events(const Capture* capture) {
  for (CUevent_st* e : g_events) {
    if (e->captured_in == capture) {
      e->captured_in = nullptr;
      e->captured_on = nullptr;
    }
  }
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

bool peer_access_enabled(int device, int owner) {
  return device == owner || (valid_device(device) && valid_device(owner) && g_peer_access[device][owner]);
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

CUevent_st* live_event(cudaEvent_t event) { return g_events.count(event) ? event : nullptr; }

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

// ---- Devices ----------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  Lock lock(state_mutex());
  if (!open_captures().empty()) {
    for (Capture* capture : open_captures()) capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  return result(run_through(UINT64_MAX));
}

// Runs what is queued, then frees every allocation of the current device and destroys its streams
// and events, so a later use of any of them is an error as on a GPU; flags, limits, cache
// preference and its peer access return to their defaults.
cudaError_t cudaDeviceReset(void) {
  Lock lock(state_mutex());
  if (!open_captures().empty()) return result(cudaErrorStreamCaptureUnsupported);
  const int device = current_device();
  run_through(UINT64_MAX);  // its faults no longer matter: the device's state goes
  forget_device_memory(device);
  for (auto it = g_streams.begin(); it != g_streams.end();) {
    if ((*it)->device == device) {
      delete *it;
      it = g_streams.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = g_events.begin(); it != g_events.end();) {
    if ((*it)->device == device) {
      delete *it;
      it = g_events.erase(it);
    } else {
      ++it;
    }
  }
  for (int d = 0; d < 8; ++d) g_peer_access[device][d] = g_peer_access[d][device] = false;
  g_device_flags[device] = 0;
  g_cache_config[device] = cudaFuncCachePreferNone;
  g_limits_set[device] = false;
  t_last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  const unsigned schedule = flags & cudaDeviceScheduleMask;
  const bool known_schedule = schedule == cudaDeviceScheduleAuto || schedule == cudaDeviceScheduleSpin ||
                              schedule == cudaDeviceScheduleYield || schedule == cudaDeviceScheduleBlockingSync;
  if (!known_schedule || (flags & ~unsigned{cudaDeviceMask}) != 0) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  g_device_flags[current_device()] = flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (flags == nullptr) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  *flags = g_device_flags[current_device()] | cudaDeviceMapHost;  // mapping is always on (unified addressing)
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  if (limit < 0 || limit >= kLimits) return result(cudaErrorUnsupportedLimit);
  if (limit == cudaLimitMaxL2FetchGranularity && value > 128) return result(cudaErrorInvalidValue);
  if (limit == cudaLimitPersistingL2CacheSize && value > 0x4B0000) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  device_limits(current_device())[limit] = value;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (limit < 0 || limit >= kLimits) return result(cudaErrorUnsupportedLimit);
  Lock lock(state_mutex());
  *value = device_limits(current_device())[limit];
  return cudaSuccess;
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache config) {
  if (config < cudaFuncCachePreferNone || config > cudaFuncCachePreferEqual) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  g_cache_config[current_device()] = config;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* config) {
  if (config == nullptr) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  *config = g_cache_config[current_device()];
  return cudaSuccess;
}

cudaError_t cudaFuncSetCacheConfig(const void* function, enum cudaFuncCache config) {
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  if (config < cudaFuncCachePreferNone || config > cudaFuncCachePreferEqual) return result(cudaErrorInvalidValue);
  return cudaSuccess;  // a preference: the simulated L1 and shared memory do not compete
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = kLeastPriority;
  if (greatest != nullptr) *greatest = kGreatestPriority;
  return cudaSuccess;
}

// Every simulated device is the same H200: any of them matches; the current one is chosen.
cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop) {
  if (device == nullptr || prop == nullptr) return result(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

// "0000:18:00.0" for device 0 (the bus id of cudaDeviceProp::pciBusID).
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  if (bus_id == nullptr || length <= 0) return result(cudaErrorInvalidValue);
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x18 + device);
  if (static_cast<size_t>(length) <= std::strlen(text)) return result(cudaErrorInvalidValue);
  std::snprintf(bus_id, static_cast<size_t>(length), "%s", text);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  if (device == nullptr || bus_id == nullptr) return result(cudaErrorInvalidValue);
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4 &&
      std::sscanf(bus_id, "%x:%x.%x", &bus, &slot, &function) != 3) {
    return result(cudaErrorInvalidValue);
  }
  const int d = static_cast<int>(bus) - 0x18;
  if (domain != 0 || slot != 0 || function != 0 || !valid_device(d)) return result(cudaErrorInvalidDevice);
  *device = d;
  return cudaSuccess;
}

// Profiling ranges for a profiler attached to the process: nothing attaches to the simulated GPU.
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// No L2 cache is modelled: nothing persists, nothing to reset.
cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

// ---- Streams ----------------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  auto* s = new CUstream_st;
  s->device = current_device();
  s->flags = flags;
  s->priority = std::clamp(priority, kGreatestPriority, kLeastPriority);  // the runtime clamps too
  g_streams.insert(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, kLeastPriority);
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (priority == nullptr) return result(cudaErrorInvalidValue);
  *priority = s->priority;
  return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags == nullptr) return result(cudaErrorInvalidValue);
  *flags = s->flags;
  return cudaSuccess;
}

// The attributes a stream takes (access policy window, synchronisation policy, priority, memory
// synchronisation domains): checked and kept; none changes how the simulator runs the stream.
cudaError_t cudaStreamSetAttribute(cudaStream_t stream, cudaStreamAttrID attr, const cudaStreamAttrValue* value) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr || s->legacy) return result(cudaErrorInvalidResourceHandle);
  if (value == nullptr) return result(cudaErrorInvalidValue);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: {
      const cudaAccessPolicyWindow& w = value->accessPolicyWindow;
      if (w.hitRatio < 0.0f || w.hitRatio > 1.0f || w.num_bytes > 134213632) return result(cudaErrorInvalidValue);
      break;
    }
    case cudaLaunchAttributePriority:
      s->priority = std::clamp(value->priority, kGreatestPriority, kLeastPriority);
      break;
    case cudaLaunchAttributeSynchronizationPolicy:
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain: break;
    default: return result(cudaErrorInvalidValue);
  }
  s->attributes[attr] = *value;
  return cudaSuccess;
}

cudaError_t cudaStreamGetAttribute(cudaStream_t stream, cudaStreamAttrID attr, cudaStreamAttrValue* value) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (value == nullptr) return result(cudaErrorInvalidValue);
  std::memset(value, 0, sizeof *value);
  auto it = s->attributes.find(attr);
  if (it != s->attributes.end()) *value = it->second;
  if (attr == cudaLaunchAttributePriority) value->priority = s->priority;
  return cudaSuccess;
}

// A host function in stream order: it runs when the queue reaches it, at a synchronising call or
// in the background, whichever comes first (a captured one runs when its graph does).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = submit(s, "cudaLaunchHostFunc", [fn, user_data]() { fn(user_data); });
      error != cudaSuccess) {
    return result(error);
  }
  if (s->capture == nullptr) run_in_background_through(s->last_seq);
  return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* user_data,
                                  unsigned int flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (callback == nullptr || flags != 0) return result(cudaErrorInvalidValue);
  if (s->capture != nullptr) {  // not capturable (cudaLaunchHostFunc is)
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = submit(s, "cudaStreamAddCallback",
                                       [stream, callback, user_data]() { callback(stream, cudaSuccess, user_data); });
      error != cudaSuccess) {
    return result(error);
  }
  run_in_background_through(s->last_seq);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr || s->legacy) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) s->capture->invalidated = true;  // the capture loses a stream
  // Queued ops do not refer to the stream (only to their position): it can go at once, as the
  // docs allow ("resources released once the device has completed all work in the stream").
  g_streams.erase(s);
  for (Capture* capture : open_captures()) {
    auto& streams = capture->streams;
    streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
    if (capture->origin == s) capture->origin = nullptr;
  }
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) {
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  return result(run_through(s->last_seq));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) {
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  return result(run_through(s->last_seq));  // "may run it": the sim completes the work now
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = s->device;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  CUevent_st* e = live_event(event);
  if (s == nullptr || e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags != 0 && flags != cudaEventWaitExternal) return result(cudaErrorInvalidValue);
  // In the FIFO the wait is already satisfied (the record came first). During a capture it
  // forks a stream into the capture or joins it back (graph.cpp).
  if (e->captured_in != nullptr) {
    Capture* capture = e->captured_in;
    if (s->capture == nullptr) {
      s->capture = capture;
      s->capture_nodes = capture->graph->nodes.size();
      s->joined_through = s->capture_nodes;
      capture->streams.push_back(s);
    } else if (s->capture != capture) {
      return result(cudaErrorStreamCaptureMerge);
    }
    if (e->captured_on != nullptr && e->captured_on != s) {
      e->captured_on->joined_through = std::max(e->captured_on->joined_through, e->captured_at);
    }
  } else if (s->capture != nullptr && s->capture->invalidated) {
    return result(cudaErrorStreamCaptureInvalidated);
  }
  return cudaSuccess;
}

// ---- Events -----------------------------------------------------------------------------------
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~known) != 0) return result(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  auto* e = new CUevent_st;
  e->device = current_device();
  e->flags = flags;
  g_events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  g_events.erase(e);
  // A queued record still refers to the event: the last one deletes it when it runs (records are
  // cleanup ops: they run even after a fault dropped the rest of the queue).
  if (e->record_seq != 0 && !e->completed) {
    e->destroyed = true;
  } else {
    delete e;
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  CUstream_st* s = resolve_stream(stream);
  if (e == nullptr || s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->device != s->device) return result(cudaErrorInvalidResourceHandle);  // per the programming guide
  if (s->capture != nullptr) {
    if (s->capture->invalidated) return result(cudaErrorStreamCaptureInvalidated);
    // Inside a capture a record only marks a point of the graph (for forks and joins).
    e->captured_in = s->capture;
    e->captured_on = s;
    e->captured_at = s->capture->graph->nodes.size();
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  e->captured_in = nullptr;
  e->completed = false;
  const uint64_t seq = last_seq() + 1;  // the record op's own position
  e->record_seq = seq;
  return result(submit(
      s, "cudaEventRecord",
      [e, seq]() {
        if (e->record_seq != seq) return;  // re-recorded since: the newer record decides
        e->completed = true;
        e->time = std::chrono::steady_clock::now();
        if (e->destroyed) delete e;
      },
      true));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (flags != cudaEventRecordDefault && flags != cudaEventRecordExternal) return result(cudaErrorInvalidValue);
  return cudaEventRecord(event, stream);  // external or not: the same point of the queue (or graph)
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (e->record_seq == 0) return cudaSuccess;  // never recorded: complete, per the docs
  if (const cudaError_t error = run_through(e->record_seq); error != cudaSuccess) return result(error);
  return e->completed ? cudaSuccess : result(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (e->record_seq == 0) return cudaSuccess;
  return result(run_through(e->record_seq));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lock(state_mutex());
  CUevent_st* a = live_event(start);
  CUevent_st* b = live_event(end);
  if (ms == nullptr) return result(cudaErrorInvalidValue);
  if (a == nullptr || b == nullptr) return result(cudaErrorInvalidResourceHandle);
  if ((a->flags | b->flags) & cudaEventDisableTiming) return result(cudaErrorInvalidResourceHandle);
  if (a->captured_in != nullptr || b->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (a->record_seq == 0 || b->record_seq == 0) return result(cudaErrorInvalidResourceHandle);
  if (a->device != b->device) return result(cudaErrorInvalidResourceHandle);
  // Does not synchronise: events whose work has not run yet are not ready, as on a GPU.
  if (!a->completed || !b->completed) return result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = 13000;
  return cudaSuccess;
}

// ---- Peer access --------------------------------------------------------------------------------
cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  if (can_access == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device) || !valid_device(peer)) return result(cudaErrorInvalidDevice);
  *can_access = device != peer;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  Lock lock(state_mutex());
  if (flags != 0) return result(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(peer) || peer == device) return result(cudaErrorInvalidDevice);
  if (g_peer_access[device][peer]) return result(cudaErrorPeerAccessAlreadyEnabled);
  g_peer_access[device][peer] = true;
  return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  Lock lock(state_mutex());
  const int device = current_device();
  if (!valid_device(peer) || peer == device) return result(cudaErrorInvalidDevice);
  if (!g_peer_access[device][peer]) return result(cudaErrorPeerAccessNotEnabled);
  g_peer_access[device][peer] = false;
  return cudaSuccess;
}

// ---- Launches through a const void* ------------------------------------------------------------
// A kernel named only by its address and void** arguments: its parameter types come from the
// launcher nvcc-sim registered for it (sim/kernel_prelude.h). Templates and overloaded kernels
// have none: the typed C++ templates and <<<>>> launch those.
static cudaError_t launch_through_address(const char* api, const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                              cudaStream_t stream, bool cooperative) {
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
  return static_cast<clock_t>(now.tv_sec) * CLOCKS_PER_SEC + static_cast<clock_t>(now.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
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
