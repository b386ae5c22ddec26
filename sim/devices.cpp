// The simulated GPUs as devices: how many, the current one per host thread, their settings
// (flags, limits, cache preference, peer access) and reset, bus ids, versions.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
namespace {

bool g_peer_access[8][8] = {};  // [device][peer]: kernels on device may access peer's memory
unsigned g_device_flags[8] = {};  // cudaSetDeviceFlags
cudaFuncCache g_cache_config[8] = {};

// cudaDeviceSetLimit's values per device, by cudaLimit, and their defaults on an H200.
constexpr int kLimits = cudaLimitPersistingL2CacheSize + 1;
using Limits = std::array<size_t, kLimits>;
constexpr Limits kDefaultLimits = {1024, 1u << 20, 8u << 20, 2, 2048, 32, 0};
std::array<Limits, 8> g_limits = [] {
  std::array<Limits, 8> all;
  all.fill(kDefaultLimits);
  return all;
}();

bool g_heap_in_use[8] = {};  // a kernel has allocated from the device heap: its size is fixed

}  // namespace

size_t device_limit(int device, cudaLimit limit) {
  Lock lock(state_mutex());
  return g_limits[device][limit];
}

void mark_device_heap_in_use(int device) {
  Lock lock(state_mutex());
  g_heap_in_use[device] = true;
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

}  // namespace blockscope::sim::detail

namespace blockscope::sim {
using namespace detail;

bool peer_access_enabled(int device, int owner) {
  return device == owner || (valid_device(device) && valid_device(owner) && g_peer_access[device][owner]);
}

}  // namespace blockscope::sim

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

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
  return result(run_device(current_device()));
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
  forget_device_heap(device);
  g_heap_in_use[device] = false;
  destroy_streams_and_events(device);
  for (int d = 0; d < 8; ++d) g_peer_access[device][d] = g_peer_access[d][device] = false;
  g_device_flags[device] = 0;
  g_cache_config[device] = cudaFuncCachePreferNone;
  g_limits[device] = kDefaultLimits;
  clear_last_error();
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
  if (limit == cudaLimitPersistingL2CacheSize && value > kPersistingL2CacheMax) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  // "must not be performed after launching any kernel that uses the malloc() or free() device
  // system calls": here, once a kernel has allocated from the heap.
  if (limit == cudaLimitMallocHeapSize && g_heap_in_use[current_device()]) return result(cudaErrorInvalidValue);
  g_limits[current_device()][limit] = value;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (limit < 0 || limit >= kLimits) return result(cudaErrorUnsupportedLimit);
  Lock lock(state_mutex());
  *value = g_limits[current_device()][limit];
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
  if (least != nullptr) *least = kLeastStreamPriority;
  if (greatest != nullptr) *greatest = kGreatestStreamPriority;
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
  std::snprintf(text, sizeof text, "0000:%02x:00.0", kFirstPciBus + device);
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
  const int d = static_cast<int>(bus) - kFirstPciBus;
  if (domain != 0 || slot != 0 || function != 0 || !valid_device(d)) return result(cudaErrorInvalidDevice);
  *device = d;
  return cudaSuccess;
}

// Profiling ranges for a profiler attached to the process: nothing attaches to the simulated GPU.
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// No L2 cache is modelled: nothing persists, nothing to reset.
cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

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

}  // extern "C"
