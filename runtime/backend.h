// The interface every backend implements: memory, copies, synchronisation, timing marks and a
// description of the hardware (name, peaks). Nothing about ops lives here; ops dispatch on the
// device of their tensors and reach backend specifics (the CUDA stream, the cuBLASLt handle)
// through runtime/cuda/. State a higher layer keeps per backend (ops/common/cuda's cuBLASLt
// plan cache) hangs off it as an attachment, so this layer never names that layer's types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"

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

// A GPU's properties as cudaGetDeviceProperties reports them (the simulated GPU: the H200 it
// models, nominal). Traces carry them as Kineto's "deviceProperties" (profiler/trace.cpp).
struct DeviceProperties {
  int index = 0;  // the CUDA device index
  std::string name;
  int64_t total_global_mem = 0;  // bytes
  int compute_major = 0, compute_minor = 0;
  int num_sms = 0;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  int regs_per_block = 0, regs_per_sm = 0;
  int warp_size = 0;
  int64_t shared_mem_per_block = 0, shared_mem_per_sm = 0, shared_mem_per_block_optin = 0;  // bytes
};

// What the profiler says about the hardware and measures against. Peaks are 0 when unknown
// (the % of peak column then shows "-"); `peak_source` says where the figures come from.
struct BackendInfo {
  std::string description;  // "NVIDIA H200", "cpu (2 threads, openblas gemm)"
  bool simulated = false;   // the simulated GPU: times say nothing about the modelled GPU
  double peak_tflops = 0;   // dense, in the dtype asked for
  double peak_gbps = 0;     // memory bandwidth, GB/s
  std::string peak_source;
  bool peaks_cached = false;  // read from a cache of an earlier measurement (CPU), not measured now
  int cpu_threads = 0;        // the CPU backend's thread count; 0 for devices
  // Said to users where a 16-bit dtype is no faster than f32 (the CPU's measured GEMM peaks:
  // a CPU without native bf16 kernels widens to f32); empty otherwise.
  std::string dtype_note;
  std::optional<DeviceProperties> device_properties;  // a GPU's (none on the CPU)
};

// One kernel launch's hardware counters, by Nsight Compute's metric names (sim__ for what only
// the simulated GPU counts): what `profile --counters` shows.
struct KernelCounterRecord {
  std::string name;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::string occupancy_limiter;  // "registers", "shared_mem", "warps", "blocks"
  std::vector<std::pair<std::string, double>> metrics;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  virtual BackendInfo info(DType dtype) = 0;
  // Measured peaks (the CPU's) are measured again at the next info() call, and the cache
  // rewritten: `info --remeasure-peaks`, or a run whose own FLOP rate beat the cached peak (a
  // peak measured while the machine was busy). Nominal peaks (CUDA) have nothing to redo.
  virtual void remeasure_peaks() {}

  // Raw device memory. allocate(0) returns a non-null unique pointer.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;
  // Sets the peak to max(peak, in use): puts back an outer peak after measuring an inner one
  // with reset_peak_memory() (the profiler's per-op peaks nest this way).
  virtual void restore_peak_memory(size_t peak) = 0;
  // Bytes the device can still give (for the up-front memory estimate).
  virtual size_t memory_available() const = 0;

  // Copies `bytes` between host and this device, or within this device (ordered on the
  // backend's stream; host-bound copies complete before returning).
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;

  // Waits for all work queued on this backend.
  virtual void synchronize() = 0;

  // Kernel counters: the launches between begin_counting() and end_counting() (which waits for
  // them), each with its counters. Empty `counters_unavailable()` means this backend counts; else
  // it says why not (the CPU has no kernels to count; a GPU needs CUPTI's range profiler).
  virtual std::string counters_unavailable() const { return "the " + name() + " backend has no kernel counters"; }
  virtual void begin_counting() {}
  virtual std::vector<KernelCounterRecord> end_counting() { return {}; }

  // Timing marks (see TimeMark). elapsed_ms is valid after synchronize().
  virtual TimeMark mark() = 0;
  virtual double elapsed_ms(TimeMark start, TimeMark end) = 0;
  // Returns every mark to the pool (call once per profiled step, after resolving).
  virtual void release_marks() = 0;

  // The attachment of type T, made (default-constructed) on first use and destroyed with the
  // backend, before its streams and library handles. One per type per backend.
  template <class T>
  T& attachment() {
    std::shared_ptr<void>& slot = attachments_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 protected:
  // Backends whose attachments hold library objects call this first in their destructor.
  void destroy_attachments() { attachments_.clear(); }

 private:
  std::map<std::type_index, std::shared_ptr<void>> attachments_;
};

}  // namespace blockscope
