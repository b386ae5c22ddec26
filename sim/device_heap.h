// Device-side malloc/free/new/delete on the simulated GPU (sim/device_heap.cpp).
//
// A GPU gives each device a heap for kernels' malloc() and new, cudaLimitMallocHeapSize bytes
// (8 MB by default), fixed once a kernel has allocated from it; malloc returns NULL (new: nullptr)
// when it is exhausted, blocks are 16-byte aligned, and what a kernel does not free stays
// allocated until the context goes (not an error). nvcc-sim's rewriter sends the calls in
// __global__ and __device__ function bodies here:
//   malloc(n) / free(p)   →  device_malloc(n) / device_free(p)
//   new T...              →  new (device_heap) T...   (placement new on the heap, nothrow)
//   delete p / delete[] p →  DeviceDelete{} ->* p / DeviceDeleteArray{} ->* p
// In a GPU thread they use the heap of the grid's device, and memcheck knows its blocks: an
// access past a block's end, into a freed block or into the heap between blocks is reported.
// On the host (the host side of a __host__ __device__ function) they do what the C library and
// the ordinary new and delete do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

namespace blockscope::sim {

// Whether the caller runs as a GPU thread of a simulated kernel.
bool in_gpu_thread() noexcept;
void* device_malloc(std::size_t bytes) noexcept;
// free() in a kernel: a pointer the heap did not give (or gave and took back already) is a fault.
void device_free(void* p) noexcept;
// The start of the live heap block containing p (the array cookie sits before a delete[]'s
// pointer); the fault of device_free when there is none.
void* device_heap_block_start(void* p) noexcept;

// For memcheck (sim/checks.cpp): what the heap of `device` holds at address a.
struct HeapLookup {
  enum Kind { outside, live, freed, between } kind = outside;  // between: in the heap, in no block
  std::uintptr_t base = 0;                                     // live/freed: the block; between: the block before (0: none)
  std::size_t size = 0;                                        // bytes the block's malloc asked for
};
HeapLookup device_heap_lookup(int device, std::uintptr_t a);

struct DeviceHeapTag {};
inline constexpr DeviceHeapTag device_heap{};

struct DeviceDelete {};
struct DeviceDeleteArray {};

template <class T>
void operator->*(DeviceDelete, T* p) {
  if (!in_gpu_thread()) {
    delete p;
    return;
  }
  if (p == nullptr) return;
  void* storage = p;
  if constexpr (std::is_polymorphic_v<T>) storage = dynamic_cast<void*>(p);  // the most-derived object
  p->~T();
  device_free(storage);
}

template <class T>
void operator->*(DeviceDeleteArray, T* p) {
  if (!in_gpu_thread()) {
    delete[] p;
    return;
  }
  if (p == nullptr) return;
  if constexpr (std::is_trivially_destructible_v<T>) {
    device_free(p);
  } else {
    // The Itanium C++ ABI's array cookie: the element count in the size_t just before the first
    // element, at the end of max(sizeof(size_t), alignof(T)) bytes that start the allocation.
    const std::size_t count = reinterpret_cast<const std::size_t*>(p)[-1];
    for (std::size_t i = count; i > 0; --i) p[i - 1].~T();
    device_free(device_heap_block_start(p));
  }
}

}  // namespace blockscope::sim

// Placement forms the rewritten new-expressions call: nothrow, so a full heap gives nullptr.
void* operator new(std::size_t bytes, blockscope::sim::DeviceHeapTag) noexcept;
void* operator new[](std::size_t bytes, blockscope::sim::DeviceHeapTag) noexcept;
// Called only when a constructor throws (host code).
void operator delete(void* p, blockscope::sim::DeviceHeapTag) noexcept;
void operator delete[](void* p, blockscope::sim::DeviceHeapTag) noexcept;
