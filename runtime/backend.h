// The interface every backend implements: memory, copies, synchronisation and timing marks.
// Nothing about ops lives here; ops dispatch on the device of their tensors and reach backend
// specifics (the CUDA stream, the cuBLASLt handle) through runtime/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/device.h"

namespace blockscope {

// Allocator statistics in bytes; `peak_in_use` is resettable so a test or the profiler can
// measure the peak of one region of work.
struct MemoryStats {
  size_t in_use = 0;
  size_t peak_in_use = 0;
  size_t total_allocated = 0;  // sum of all allocation sizes ever made
  size_t allocation_count = 0;
};

// An opaque point in a backend's timeline. On the CPU it is a steady-clock reading; on CUDA a
// pooled cudaEvent recorded on the context stream. Resolved to times only after synchronize().
struct TimeMark {
  int64_t value = -1;
  bool valid() const { return value >= 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // Raw device memory. allocate(0) returns a non-null unique pointer.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;
  // Bytes the device can still give (for the up-front memory estimate).
  virtual size_t memory_available() const = 0;

  // Copies `bytes` between host and this device, or within this device (ordered on the
  // backend's stream; host-bound copies complete before returning).
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;

  // Waits for all work queued on this backend.
  virtual void synchronize() = 0;

  // Timing marks (see TimeMark). elapsed_ms is valid after synchronize().
  virtual TimeMark mark() = 0;
  virtual double elapsed_ms(TimeMark start, TimeMark end) = 0;
  // Returns every mark to the pool (call once per profiled step, after resolving).
  virtual void release_marks() = 0;
};

}  // namespace blockscope
