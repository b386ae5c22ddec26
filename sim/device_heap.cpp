// The device heap: kernels' malloc/free/new/delete (sim/device_heap.h). One arena per device,
// cudaLimitMallocHeapSize bytes, made at the first allocation of a kernel on that device (from
// then on the limit is fixed, as cudaDeviceSetLimit documents), gone at cudaDeviceReset. Blocks
// are placed first at increasing addresses (a freed block is not handed out again until the
// arena has been gone through, so a use after free finds it still freed), 16-byte aligned, with
// at least 16 bytes between neighbours (an overrun lands between blocks, where memcheck sees it).
#include "sim/device_heap.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "sim/executor_state.h"
#include "sim/runtime_state.h"

namespace blockscope::sim {
namespace {

constexpr size_t kAlignment = 16;  // what CUDA's device malloc guarantees
constexpr size_t kGap = 16;        // unallocated bytes after every block

struct Heap {
  unsigned char* arena = nullptr;
  size_t capacity = 0;
  size_t next = 0;                   // where the next block goes when it fits there
  std::map<size_t, size_t> live;     // offset → bytes asked for
  std::map<size_t, size_t> freed;    // offset → bytes, until the space is handed out again
};

std::mutex g_heap_mutex;  // not the state mutex: kernels allocate from fibers mid-grid
Heap g_heaps[8];

size_t round_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// The footprint of a block of `bytes` (at least one aligned slot, plus the gap).
size_t footprint(size_t bytes) { return round_up(bytes == 0 ? 1 : bytes) + kGap; }

// First offset at or after `from` where `need` bytes fit before the next live block (or the end).
size_t fit_from(const Heap& h, size_t from, size_t need) {
  size_t at = from;
  auto it = h.live.lower_bound(at);
  if (it != h.live.begin()) {
    const auto prev = std::prev(it);
    at = std::max(at, prev->first + footprint(prev->second));
  }
  for (;;) {
    const size_t limit = it == h.live.end() ? h.capacity : it->first;
    if (at + need <= limit) return at;
    if (it == h.live.end()) return SIZE_MAX;
    at = it->first + footprint(it->second);
    ++it;
  }
}

void* heap_allocate(int device, size_t bytes) {
  // The state lock before the heap's, never inside it (cudaDeviceReset takes them in that order).
  const size_t limit = detail::device_limit(device, cudaLimitMallocHeapSize);
  detail::mark_device_heap_in_use(device);
  std::lock_guard<std::mutex> lock(g_heap_mutex);
  Heap& h = g_heaps[device];
  if (h.arena == nullptr) {
    // Pages the kernels never touch cost nothing: the arena is reserved, not filled.
    h.arena = static_cast<unsigned char*>(std::aligned_alloc(4096, (limit + 4095) / 4096 * 4096 + 4096));
    if (h.arena == nullptr) return nullptr;
    h.capacity = limit;
  }
  const size_t need = footprint(bytes);
  if (need > h.capacity) return nullptr;
  size_t at = fit_from(h, h.next, need);
  if (at == SIZE_MAX) at = fit_from(h, 0, need);  // around again: freed space is reused now
  if (at == SIZE_MAX) return nullptr;             // exhausted: malloc returns NULL
  h.live.emplace(at, bytes);
  h.next = at + need;
  // The freed blocks this one overlaps are no longer freed memory.
  auto f = h.freed.upper_bound(at);
  if (f != h.freed.begin() && std::prev(f)->first + footprint(std::prev(f)->second) > at) --f;
  while (f != h.freed.end() && f->first < at + need) f = h.freed.erase(f);
  std::memset(h.arena + at, 0xFF, bytes);  // uninitialised, as cudaMalloc'd memory is poisoned
  return h.arena + at;
}

int grid_device() {
  const exec::GridRun* grid = exec::current_grid();
  return grid != nullptr ? grid->device : detail::current_device();
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

bool in_gpu_thread() noexcept { return exec::current_sim_thread() != nullptr; }

void* device_malloc(size_t bytes) noexcept {
  if (!in_gpu_thread()) return std::malloc(bytes);
  return heap_allocate(grid_device(), bytes);
}

void* device_heap_block_start(void* p) noexcept {
  const int device = grid_device();
  {
    std::lock_guard<std::mutex> lock(g_heap_mutex);
    const Heap& h = g_heaps[device];
    const auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(h.arena);
    if (h.arena != nullptr && a - base < h.capacity) {
      auto it = h.live.upper_bound(a - base);
      if (it != h.live.begin() && a - base - std::prev(it)->first < std::prev(it)->second) {
        return h.arena + std::prev(it)->first;
      }
    }
  }
  return p;  // device_free names the problem
}

void device_free(void* p) noexcept {
  if (p == nullptr) return;  // free(NULL) does nothing, on a GPU too
  if (!in_gpu_thread()) {
    std::free(p);
    return;
  }
  const int device = grid_device();
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(g_heap_mutex);
    Heap& h = g_heaps[device];
    const auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(h.arena);
    const size_t offset = a - base;
    if (h.arena == nullptr || offset >= h.capacity) {
      problem = "free(" + hex(p) + ") in a kernel of memory the device heap did not allocate (only a kernel's "
                "malloc or new gives memory a kernel may free; cudaMalloc'd memory is freed by cudaFree)";
    } else if (auto it = h.live.find(offset); it != h.live.end()) {
      h.freed.emplace(offset, it->second);
      h.live.erase(it);
      return;
    } else if (h.freed.count(offset) != 0) {
      problem = "double free: free(" + hex(p) + ") in a kernel of a device-heap block of " +
                std::to_string(h.freed[offset]) + " bytes that was freed already";
    } else {
      problem = "free(" + hex(p) + ") in a kernel of a pointer that is not the start of a device-heap block";
    }
  }
  exec::abandon_thread(std::move(problem), cudaErrorIllegalAddress);
}

HeapLookup device_heap_lookup(int device, uintptr_t a) {
  HeapLookup found;
  if (device < 0 || device >= 8) return found;
  std::lock_guard<std::mutex> lock(g_heap_mutex);
  const Heap& h = g_heaps[device];
  const auto base = reinterpret_cast<uintptr_t>(h.arena);
  if (h.arena == nullptr || a - base >= h.capacity) return found;
  const size_t offset = a - base;
  auto live = h.live.upper_bound(offset);
  if (live != h.live.begin()) {
    --live;
    found.base = base + live->first;
    found.size = live->second;
    found.kind = offset < live->first + live->second ? HeapLookup::live : HeapLookup::between;
    if (found.kind == HeapLookup::live) return found;
  }
  auto freed = h.freed.upper_bound(offset);
  if (freed != h.freed.begin()) {
    --freed;
    if (offset < freed->first + freed->second) {
      found.kind = HeapLookup::freed;
      found.base = base + freed->first;
      found.size = freed->second;
      return found;
    }
  }
  found.kind = HeapLookup::between;
  return found;
}

}  // namespace blockscope::sim

namespace blockscope::sim::detail {

// cudaDeviceReset: the context's heap goes with it.
void forget_device_heap(int device) {
  std::lock_guard<std::mutex> lock(g_heap_mutex);
  Heap& h = g_heaps[device];
  std::free(h.arena);
  h = Heap{};
}

}  // namespace blockscope::sim::detail

void* operator new(std::size_t bytes, blockscope::sim::DeviceHeapTag) noexcept {
  if (!blockscope::sim::in_gpu_thread()) return ::operator new(bytes, std::nothrow);
  return blockscope::sim::device_malloc(bytes);
}

void* operator new[](std::size_t bytes, blockscope::sim::DeviceHeapTag) noexcept {
  if (!blockscope::sim::in_gpu_thread()) return ::operator new[](bytes, std::nothrow);
  return blockscope::sim::device_malloc(bytes);
}

void operator delete(void* p, blockscope::sim::DeviceHeapTag) noexcept {
  if (!blockscope::sim::in_gpu_thread()) {
    ::operator delete(p);
    return;
  }
  blockscope::sim::device_free(p);
}

void operator delete[](void* p, blockscope::sim::DeviceHeapTag) noexcept {
  if (!blockscope::sim::in_gpu_thread()) {
    ::operator delete[](p);
    return;
  }
  blockscope::sim::device_free(p);
}
