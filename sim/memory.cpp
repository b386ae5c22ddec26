// Memory on the simulated GPU: device memory is host memory, 256-byte aligned like cudaMalloc's,
// and every new allocation is filled with 0xFF bytes (NaN in f32/f16/bf16), so a read of memory
// nothing wrote shows up as NaN; device allocations also carry initcheck's shadow (a bit per byte
// written: copies, memsets and kernel stores set it, checks.cpp reports a kernel load of a byte not
// set). Every allocation is tracked, so frees and copies of unknown or out-of-range pointers are errors.
//
// This file is the allocations: the table of them, cudaMalloc and its kin, host memory the device
// may use, managed memory's hints, the stream-ordered allocator. Copies and memsets, which check
// their ranges against it, are memory_copies.cpp.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/runtime_state.h"

namespace blockscope::sim::detail {
namespace {

struct Allocation {
  AllocationInfo info;
  CUmemPoolHandle_st* pool = nullptr;
  bool freeing = false;     // a stream-ordered free is queued
  unsigned host_flags = 0;  // cudaHostAlloc / cudaHostRegister flags
  std::shared_ptr<WrittenBytes> written;  // initcheck: device, pool and graph allocations only
};

// By base address. Never destroyed: device memory lives until the process ends, as on a GPU, and
// this keeps it reachable for LeakSanitizer in the sanitizer builds.
std::map<uintptr_t, Allocation>& g_allocations = *new std::map<uintptr_t, Allocation>();
size_t g_device_bytes[8] = {};

Allocation* find(const void* p) {
  const auto key = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(key);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  const uintptr_t base = it->first;
  return key < base + std::max<size_t>(it->second.info.size, 1) ? &it->second : nullptr;
}

// The allocation holding all of [p, p + bytes), or nullptr.
Allocation* find_range(const void* p, size_t bytes) {
  Allocation* a = find(p);
  if (a == nullptr) return nullptr;
  const auto offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(a->info.base);
  return offset + bytes <= a->info.size ? a : nullptr;
}

bool is_host_kind(AllocationInfo::Kind kind) {
  return kind == AllocationInfo::Kind::pinned_host || kind == AllocationInfo::Kind::registered_host;
}
bool is_device_kind(const Allocation& a) { return !is_host_kind(a.info.kind); }

CUmemPoolHandle_st* default_pool(int device) {
  static CUmemPoolHandle_st pools[8];
  pools[device].device = device;
  return &pools[device];
}

bool live_pool(const CUmemPoolHandle_st* pool) {
  for (int d = 0; d < device_count(); ++d)
    if (pool == default_pool(d)) return true;
  return false;
}

// MemAvailable of /proc/meminfo in bytes (SIZE_MAX when unreadable).
size_t host_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return SIZE_MAX;
}

}  // namespace

// A device-side range for a copy or memset: inside one live device allocation. Not one with a
// queued free: in the one FIFO the copy would run after it.
bool device_range_ok(const void* p, size_t bytes) {
  const Allocation* a = find_range(p, bytes);
  return a != nullptr && is_device_kind(*a) && !a->freeing;
}

// Device memory of `device` (or managed memory) holding [p, p + bytes).
bool on_device(const void* p, size_t bytes, int device) {
  const Allocation* a = find_range(p, bytes);
  return a != nullptr && is_device_kind(*a) && !a->freeing &&
         (a->info.device == device || a->info.kind == AllocationInfo::Kind::managed);
}

void* allocate_bytes(size_t bytes, size_t alignment) {
  void* p = nullptr;
  if (posix_memalign(&p, alignment, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  std::memset(p, 0xFF, bytes);
  return p;
}

void track(void* ptr, size_t size, AllocationInfo::Kind kind, int device, CUmemPoolHandle_st* pool) {
  Allocation a;
  a.info = AllocationInfo{ptr, size, device, kind};
  a.pool = pool;
  // initcheck follows the memory only the runtime and kernels write; the host writes managed,
  // pinned and registered memory directly, unseen, so those count as written throughout.
  if (kind == AllocationInfo::Kind::device || kind == AllocationInfo::Kind::pool ||
      kind == AllocationInfo::Kind::graph) {
    a.written = std::make_shared<WrittenBytes>(size);
    a.info.written = a.written.get();
  }
  g_allocations[reinterpret_cast<uintptr_t>(ptr)] = a;
  if (!is_host_kind(kind)) g_device_bytes[device] += size;
  if (pool != nullptr) {
    pool->used_current += size;
    pool->used_high = std::max(pool->used_high, pool->used_current);
  }
}

void untrack_and_free(void* ptr) {
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end()) return;
  const Allocation& a = it->second;
  if (!is_host_kind(a.info.kind)) g_device_bytes[a.info.device] -= a.info.size;
  if (a.pool != nullptr) a.pool->used_current -= a.info.size;
  const bool owned = a.info.kind != AllocationInfo::Kind::registered_host;  // the caller's memory stays
  forget_stream_accesses(ptr);
  g_allocations.erase(it);
  if (owned) std::free(ptr);
}

bool is_pinned(const void* p, size_t bytes) {
  const Allocation* a = find_range(p, bytes);
  return a != nullptr && is_host_kind(a->info.kind);
}

void forget_writes(void* ptr) {
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it != g_allocations.end() && it->second.written != nullptr) it->second.written->forget();
}

void forget_device_memory(int device) {
  std::vector<void*> gone;
  for (const auto& [base, a] : g_allocations) {
    if (a.info.device == device && a.info.kind != AllocationInfo::Kind::graph) gone.push_back(a.info.base);
  }
  for (void* p : gone) untrack_and_free(p);
}

size_t free_device_bytes(int device) {
  const size_t sim_free = kTotalGlobalMem - std::min(kTotalGlobalMem, g_device_bytes[device]);
  return std::min(sim_free, host_available_bytes());
}

}  // namespace blockscope::sim::detail

namespace blockscope::sim {
void snapshot_allocations(std::function<void(const AllocationInfo&)> visit) {
  detail::Lock lock(detail::state_mutex());
  for (const auto& entry : detail::g_allocations) visit(entry.second.info);
}

void note_written(const void* p, size_t bytes) {
  if (bytes == 0) return;
  detail::Lock lock(detail::state_mutex());
  const detail::Allocation* a = detail::find(p);
  if (a == nullptr || a->written == nullptr) return;
  const size_t offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(a->info.base);
  a->written->mark(offset, std::min(bytes, a->info.size - offset));
}

void note_copied(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  detail::Lock lock(detail::state_mutex());
  const detail::Allocation* to = detail::find(dst);
  if (to == nullptr || to->written == nullptr) return;
  const size_t offset = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(to->info.base);
  bytes = std::min(bytes, to->info.size - offset);
  const detail::Allocation* from = detail::find(src);
  if (from == nullptr || from->written == nullptr || from->written->unwritten == 0) {
    to->written->mark(offset, bytes);
    return;
  }
  const size_t from_offset = reinterpret_cast<uintptr_t>(src) - reinterpret_cast<uintptr_t>(from->info.base);
  for (size_t i = 0; i < bytes && from_offset + i < from->info.size; ++i) {
    if (from->written->test(from_offset + i)) to->written->mark(offset + i, 1);
  }
}

bool find_allocation(const void* p, AllocationInfo* info) {
  detail::Lock lock(detail::state_mutex());
  const detail::Allocation* a = detail::find(p);
  if (a == nullptr) return false;
  if (info != nullptr) *info = a->info;
  return true;
}
}  // namespace blockscope::sim

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

namespace {

using AllocationKind = AllocationInfo::Kind;

cudaError_t device_allocate(void** ptr, size_t size, AllocationKind kind, int device, CUmemPoolHandle_st* pool,
                            const void* caller = nullptr) {
  if (size > free_device_bytes(device)) return cudaErrorMemoryAllocation;
  void* p = allocate_bytes(size, 256);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  track(p, size, kind, device, pool);
  if (WrittenBytes* w = g_allocations[reinterpret_cast<uintptr_t>(p)].written.get()) w->allocated_at = caller;
  *ptr = p;
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  Lock lock(state_mutex());
  if (ptr == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;  // as the runtime: success and a null pointer
  return result(
      device_allocate(ptr, size, AllocationKind::device, current_device(), nullptr, __builtin_return_address(0)));
}

cudaError_t cudaFree(void* ptr) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (ptr == nullptr) return cudaSuccess;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.freeing || is_host_kind(it->second.info.kind) ||
      it->second.info.kind == AllocationKind::graph) {
    return result(cudaErrorInvalidValue);
  }
  const cudaError_t status = run_through(UINT64_MAX);  // cudaFree synchronises the device
  untrack_and_free(ptr);
  return result(status);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  Lock lock(state_mutex());
  constexpr unsigned kKnown = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (ptr == nullptr || (flags & ~kKnown) != 0) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  if (size > host_available_bytes()) return result(cudaErrorMemoryAllocation);
  void* p = allocate_bytes(size, 4096);
  if (p == nullptr) return result(cudaErrorMemoryAllocation);
  track(p, size, AllocationKind::pinned_host, current_device());
  g_allocations[reinterpret_cast<uintptr_t>(p)].host_flags = flags;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

// Managed memory: one allocation the host and every device's kernels use directly (counted
// against the current device's memory; migration is not modelled).
cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  Lock lock(state_mutex());
  if (ptr == nullptr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)) {
    return result(cudaErrorInvalidValue);
  }
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  return result(device_allocate(ptr, size, AllocationKind::managed, current_device(), nullptr));
}

cudaError_t cudaFreeHost(void* ptr) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (ptr == nullptr) return cudaSuccess;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.info.kind != AllocationKind::pinned_host) {
    return result(cudaErrorInvalidValue);
  }
  const cudaError_t status = run_through(UINT64_MAX);  // queued copies may still use it
  untrack_and_free(ptr);
  return result(status);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Lock lock(state_mutex());
  if (free_bytes == nullptr || total_bytes == nullptr) return result(cudaErrorInvalidValue);
  *free_bytes = free_device_bytes(current_device());
  *total_bytes = kTotalGlobalMem;
  return cudaSuccess;
}

// ---- Pitched memory ------------------------------------------------------------------------------
// Rows padded to a multiple of 512 bytes, as cudaMallocPitch does on current GPUs.
cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  Lock lock(state_mutex());
  if (ptr == nullptr || pitch == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  *pitch = (width + 511) / 512 * 512;
  if (width == 0 || height == 0) return cudaSuccess;
  return result(device_allocate(ptr, *pitch * height, AllocationKind::device, current_device(), nullptr));
}

// ---- Host memory the device may use ----------------------------------------------------------------
// The caller's memory, pinned: copies read it when they run, kernels may use it (device pointer =
// host pointer: addressing is unified). Never poisoned: its contents are the caller's.
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  Lock lock(state_mutex());
  constexpr unsigned kKnown =
      cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (ptr == nullptr || size == 0 || (flags & ~kKnown) != 0) return result(cudaErrorInvalidValue);
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  auto next = g_allocations.lower_bound(begin);  // the first allocation starting at or after ptr
  if (find(ptr) != nullptr || (next != g_allocations.end() && next->first < begin + size)) {
    return result(cudaErrorHostMemoryAlreadyRegistered);
  }
  track(ptr, size, AllocationKind::registered_host, current_device());
  g_allocations[begin].host_flags = flags;
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  Lock lock(state_mutex());
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (ptr == nullptr || it == g_allocations.end() || it->second.info.kind != AllocationKind::registered_host) {
    return result(cudaErrorHostMemoryNotRegistered);
  }
  const cudaError_t status = run_through(UINT64_MAX);  // queued copies may still use it
  untrack_and_free(ptr);                               // forgets it; the memory stays the caller's
  return result(status);
}

cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags) {
  Lock lock(state_mutex());
  if (device_ptr == nullptr || flags != 0) return result(cudaErrorInvalidValue);
  const Allocation* a = find(host_ptr);
  if (a == nullptr || !is_host_kind(a->info.kind)) return result(cudaErrorInvalidValue);
  *device_ptr = host_ptr;
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int* flags, void* host_ptr) {
  Lock lock(state_mutex());
  if (flags == nullptr) return result(cudaErrorInvalidValue);
  const Allocation* a = find(host_ptr);
  if (a == nullptr || !is_host_kind(a->info.kind)) return result(cudaErrorInvalidValue);
  *flags = a->host_flags;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  Lock lock(state_mutex());
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof *attributes);
  void* p = const_cast<void*>(ptr);
  const Allocation* a = find(ptr);
  if (a == nullptr) {  // memory the runtime does not know: unregistered host memory (since CUDA 11)
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;  // no device
    attributes->hostPointer = p;
    return cudaSuccess;
  }
  attributes->device = a->info.device;
  attributes->devicePointer = p;
  if (is_host_kind(a->info.kind)) {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = p;
  } else if (a->info.kind == AllocationKind::managed) {
    attributes->type = cudaMemoryTypeManaged;
    attributes->hostPointer = p;
  } else {
    attributes->type = cudaMemoryTypeDevice;
  }
  return cudaSuccess;
}

// ---- Managed memory hints: checked, then nothing to do (there is one copy, never migrated) ---------
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* ptr, size_t length, unsigned int flags) {
  Lock lock(state_mutex());
  if (resolve_stream(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle) {
    return result(cudaErrorInvalidValue);
  }
  const Allocation* a = find(ptr);
  if (a == nullptr || a->info.kind != AllocationKind::managed || (length != 0 && find_range(ptr, length) != a)) {
    return result(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, struct cudaMemLocation location, unsigned int flags,
                                 cudaStream_t stream) {
  Lock lock(state_mutex());
  if (resolve_stream(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  const Allocation* a = find_range(ptr, count);
  if (a == nullptr || a->info.kind != AllocationKind::managed || flags != 0) return result(cudaErrorInvalidValue);
  if (location.type == cudaMemLocationTypeDevice && !valid_device(location.id)) return result(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaMemAdvise(const void* ptr, size_t count, enum cudaMemoryAdvise, struct cudaMemLocation location) {
  Lock lock(state_mutex());
  const Allocation* a = find_range(ptr, count);
  if (a == nullptr || a->info.kind != AllocationKind::managed) return result(cudaErrorInvalidValue);
  if (location.type == cudaMemLocationTypeDevice && !valid_device(location.id)) return result(cudaErrorInvalidDevice);
  return cudaSuccess;
}

// ---- Stream-ordered allocator ------------------------------------------------------------------
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (pool == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  *pool = default_pool(device);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  Lock lock(state_mutex());
  if (!live_pool(pool) || value == nullptr) return result(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: pool->release_threshold = *static_cast<uint64_t*>(value); return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies: pool->reuse_follow_event_dependencies = *static_cast<int*>(value); return cudaSuccess;
    case cudaMemPoolReuseAllowOpportunistic: pool->reuse_allow_opportunistic = *static_cast<int*>(value); return cudaSuccess;
    case cudaMemPoolReuseAllowInternalDependencies: pool->reuse_allow_internal_dependencies = *static_cast<int*>(value); return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:  // only a reset to 0 is allowed
    case cudaMemPoolAttrReservedMemHigh:
      if (*static_cast<uint64_t*>(value) != 0) return result(cudaErrorInvalidValue);
      pool->used_high = pool->used_current;
      return cudaSuccess;
    default: return result(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  Lock lock(state_mutex());
  if (!live_pool(pool) || value == nullptr) return result(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *static_cast<uint64_t*>(value) = pool->release_threshold; return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies: *static_cast<int*>(value) = pool->reuse_follow_event_dependencies; return cudaSuccess;
    case cudaMemPoolReuseAllowOpportunistic: *static_cast<int*>(value) = pool->reuse_allow_opportunistic; return cudaSuccess;
    case cudaMemPoolReuseAllowInternalDependencies: *static_cast<int*>(value) = pool->reuse_allow_internal_dependencies; return cudaSuccess;
    // Freed memory goes back to the host at once, so reserved = used.
    case cudaMemPoolAttrUsedMemCurrent:
    case cudaMemPoolAttrReservedMemCurrent: *static_cast<uint64_t*>(value) = pool->used_current; return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
    case cudaMemPoolAttrReservedMemHigh: *static_cast<uint64_t*>(value) = pool->used_high; return cudaSuccess;
    default: return result(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  Lock lock(state_mutex());
  if (ptr == nullptr || !live_pool(pool)) return result(cudaErrorInvalidValue);
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  *ptr = nullptr;
  if (size == 0) return result(cudaErrorInvalidValue);
  if (Capture* capture = s->capture) {
    if (capture->invalidated) return result(cudaErrorStreamCaptureInvalidated);
    // A graph allocation node: the address is fixed now, the node re-poisons it every launch.
    void* p = nullptr;
    if (const cudaError_t error = device_allocate(&p, size, AllocationKind::graph, pool->device, nullptr);
        error != cudaSuccess) {
      return result(error);
    }
    graph_memory_add(capture_memory(*capture), p);
    submit(s, "cudaMallocAsync (graph allocation)", [p, size]() {
      std::memset(p, 0xFF, size);
      forget_writes(p);
    });
    *ptr = p;
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  return result(device_allocate(ptr, size, AllocationKind::pool, pool->device, pool));
}

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return cudaMallocFromPoolAsync(ptr, size, default_pool(s->device), stream);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (ptr == nullptr) return cudaSuccess;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.freeing || is_host_kind(it->second.info.kind)) {
    return result(cudaErrorInvalidValue);
  }
  Allocation& a = it->second;
  if (s->capture != nullptr) {
    // A captured free must name a graph allocation; its node poisons the memory at every launch.
    if (a.info.kind != AllocationKind::graph) return result(cudaErrorInvalidValue);
    const size_t size = a.info.size;
    return result(submit(s, "cudaFreeAsync (graph allocation)", [ptr, size]() {
      std::memset(ptr, 0xFF, size);
      forget_writes(ptr);
    }));
  }
  if (a.info.kind == AllocationKind::graph) return result(cudaErrorInvalidValue);  // owned by its graph here
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  a.freeing = true;
  // In stream order: queued kernels before the free may still use the memory.
  return result(submit(s, "cudaFreeAsync", [ptr]() { untrack_and_free(ptr); }, true));
}

}  // extern "C"
