// Memory on the simulated GPU: device memory is host memory, 256-byte aligned like cudaMalloc's,
// and every new allocation is filled with 0xFF bytes (NaN in f32/f16/bf16), so a read of memory
// nothing wrote shows up as NaN, as compute-sanitizer's initcheck would flag it. Every
// allocation is tracked, so frees and copies of unknown or out-of-range pointers are errors.
//
// Copies follow the docs' "API synchronization behavior": a pageable host source of an
// asynchronous host-to-device copy is staged (snapshotted) at the call; a device-to-pageable
// copy returns only once done (the queue runs); pinned (cudaMallocHost) memory is read or written
// when the copy executes, so a host reusing a pinned buffer too early sees what a GPU would.
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
  bool freeing = false;  // a stream-ordered free is queued
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

bool is_device_kind(const Allocation& a) { return a.info.kind != AllocationInfo::Kind::pinned_host; }

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

// A device-side range for a copy or memset: inside one live device allocation. Not one with a
// queued free: in the one FIFO the copy would run after it.
bool device_range_ok(const void* p, size_t bytes) {
  const Allocation* a = find_range(p, bytes);
  return a != nullptr && is_device_kind(*a) && !a->freeing;
}

}  // namespace

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
  g_allocations[reinterpret_cast<uintptr_t>(ptr)] = a;
  if (kind != AllocationInfo::Kind::pinned_host) g_device_bytes[device] += size;
  if (pool != nullptr) {
    pool->used_current += size;
    pool->used_high = std::max(pool->used_high, pool->used_current);
  }
}

void untrack_and_free(void* ptr) {
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end()) return;
  const Allocation& a = it->second;
  if (a.info.kind != AllocationInfo::Kind::pinned_host) g_device_bytes[a.info.device] -= a.info.size;
  if (a.pool != nullptr) a.pool->used_current -= a.info.size;
  g_allocations.erase(it);
  std::free(ptr);
}

bool is_pinned(const void* p, size_t bytes) {
  const Allocation* a = find_range(p, bytes);
  return a != nullptr && a->info.kind == AllocationInfo::Kind::pinned_host;
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

using Kind = AllocationInfo::Kind;

cudaError_t device_allocate(void** ptr, size_t size, Kind kind, int device, CUmemPoolHandle_st* pool) {
  if (size > free_device_bytes(device)) return cudaErrorMemoryAllocation;
  void* p = allocate_bytes(size, 256);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  track(p, size, kind, device, pool);
  *ptr = p;
  return cudaSuccess;
}

// One copy as an op: reads its source when it runs, except for a staged (pageable) source.
std::function<void()> copy_op(void* dst, const void* src, size_t count, bool stage) {
  if (stage) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                static_cast<const unsigned char*>(src) + count);
    return [dst, staged]() { std::memcpy(dst, staged->data(), staged->size()); };
  }
  return [dst, src, count]() { std::memmove(dst, src, count); };
}

// Resolves cudaMemcpyDefault and checks the device side(s) of a copy against live allocations.
cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind* kind) {
  if (*kind == cudaMemcpyDefault) {
    const bool dst_device = device_range_ok(dst, count), src_device = device_range_ok(src, count);
    *kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                       : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  switch (*kind) {
    case cudaMemcpyHostToHost: return cudaSuccess;
    case cudaMemcpyHostToDevice: return device_range_ok(dst, count) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return device_range_ok(src, count) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
      return device_range_ok(dst, count) && device_range_ok(src, count) ? cudaSuccess : cudaErrorInvalidValue;
    default: return cudaErrorInvalidMemcpyDirection;
  }
}

cudaError_t memcpy_async(void* dst, const void* src, size_t count, cudaMemcpyKind kind, CUstream_st* s,
                         bool synchronous) {
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t error = check_copy(dst, src, count, &kind); error != cudaSuccess) return error;
  const bool capturing = s->capture != nullptr;
  // Staging a pageable source is what makes the call safe to return early; a graph node reads
  // its source at every launch instead.
  const bool stage = kind == cudaMemcpyHostToDevice && !is_pinned(src, count) && !capturing;
  const char* name = kind == cudaMemcpyHostToDevice   ? "Memcpy HtoD"
                     : kind == cudaMemcpyDeviceToHost ? "Memcpy DtoH"
                     : kind == cudaMemcpyDeviceToDevice ? "Memcpy DtoD"
                                                        : "Memcpy HtoH";
  if (const cudaError_t error = submit(s, name, copy_op(dst, src, count, stage)); error != cudaSuccess) return error;
  const bool to_pageable = (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) && !is_pinned(dst, count);
  if (!capturing && (synchronous || to_pageable)) return run_through(s->last_seq);
  return cudaSuccess;
}

cudaError_t memset_async(void* ptr, int value, size_t count, CUstream_st* s) {
  if (count == 0) return cudaSuccess;
  if (!device_range_ok(ptr, count)) return cudaErrorInvalidValue;
  return submit(s, "Memset", [ptr, value, count]() { std::memset(ptr, value, count); });
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  Lock lock(state_mutex());
  if (ptr == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;  // as the runtime: success and a null pointer
  return result(device_allocate(ptr, size, Kind::device, current_device(), nullptr));
}

cudaError_t cudaFree(void* ptr) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (ptr == nullptr) return cudaSuccess;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.freeing || it->second.info.kind == Kind::pinned_host ||
      it->second.info.kind == Kind::graph) {
    return result(cudaErrorInvalidValue);
  }
  const cudaError_t status = run_through(UINT64_MAX);  // cudaFree synchronises the device
  untrack_and_free(ptr);
  return result(status);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  Lock lock(state_mutex());
  if (ptr == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  if (size > host_available_bytes()) return result(cudaErrorMemoryAllocation);
  void* p = allocate_bytes(size, 4096);
  if (p == nullptr) return result(cudaErrorMemoryAllocation);
  track(p, size, Kind::pinned_host, current_device());
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
  return result(device_allocate(ptr, size, Kind::managed, current_device(), nullptr));
}

cudaError_t cudaFreeHost(void* ptr) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (ptr == nullptr) return cudaSuccess;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.info.kind != Kind::pinned_host) return result(cudaErrorInvalidValue);
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

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  return result(memcpy_async(dst, src, count, kind, resolve_stream(nullptr), true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memcpy_async(dst, src, count, kind, s, false));
}

// Asynchronous for device memory, per the docs (synchronous only for pinned or managed targets).
cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  Lock lock(state_mutex());
  return result(memset_async(ptr, value, count, resolve_stream(nullptr)));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memset_async(ptr, value, count, s));
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
    if (const cudaError_t error = device_allocate(&p, size, Kind::graph, pool->device, nullptr); error != cudaSuccess) {
      return result(error);
    }
    graph_memory_add(capture_memory(*capture), p);
    submit(s, "cudaMallocAsync (graph allocation)", [p, size]() { std::memset(p, 0xFF, size); });
    *ptr = p;
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  return result(device_allocate(ptr, size, Kind::pool, pool->device, pool));
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
  if (it == g_allocations.end() || it->second.freeing || it->second.info.kind == Kind::pinned_host) {
    return result(cudaErrorInvalidValue);
  }
  Allocation& a = it->second;
  if (s->capture != nullptr) {
    // A captured free must name a graph allocation; its node poisons the memory at every launch.
    if (a.info.kind != Kind::graph) return result(cudaErrorInvalidValue);
    const size_t size = a.info.size;
    return result(submit(s, "cudaFreeAsync (graph allocation)", [ptr, size]() { std::memset(ptr, 0xFF, size); }));
  }
  if (a.info.kind == Kind::graph) return result(cudaErrorInvalidValue);  // owned by its graph here
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  a.freeing = true;
  // In stream order: queued kernels before the free may still use the memory.
  return result(submit(s, "cudaFreeAsync", [ptr]() { untrack_and_free(ptr); }, true));
}

}  // extern "C"
