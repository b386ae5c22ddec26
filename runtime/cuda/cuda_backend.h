// The CUDA backend: one device, one non-blocking stream, a stream-ordered memory pool with
// statistics, a cuBLASLt handle, workspace and descriptor cache, pooled events for timing
// marks, and a pinned staging buffer for large host<->device transfers.
// Ops reach it with cuda_backend(ctx); the cuBLASLt plan cache and GEMM settings are an
// attachment of ops/common/cuda/cublaslt_gemm.h.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/backend.h"
#include "runtime/context.h"

namespace blockscope {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;

  Device device() const override { return Device::cuda(index_); }
  std::string name() const override;
  // Name, and peaks from the device's attributes and NVIDIA's per-SM throughput table; on the
  // simulated GPU no peaks (simulated times say nothing about the modelled GPU's speed).
  BackendInfo info(DType dtype) override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  MemoryStats memory_stats() const override { return stats_; }
  void reset_peak_memory() override { stats_.peak_in_use = stats_.in_use; }
  void restore_peak_memory(size_t peak) override { stats_.peak_in_use = std::max(peak, stats_.in_use); }
  size_t memory_available() const override;

  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_within(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;

  TimeMark mark() override;
  double elapsed_ms(TimeMark start, TimeMark end) override;
  void release_marks() override { next_event_ = 0; }

  // The simulated GPU counts every launch (sim/sim.h); a GPU would need CUPTI's range profiler
  // (kernel_counters.cpp).
  std::string counters_unavailable() const override;
  void begin_counting() override;
  std::vector<KernelCounterRecord> end_counting() override;

  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const cudaDeviceProp& properties() const { return properties_; }
  // Makes this backend's GPU the calling thread's current device (cuda_backend(ctx) calls it,
  // so every CUDA op launches on its context's device).
  void make_current() const;
  // True while a CUDA graph capture is open on the stream (no synchronising calls allowed).
  bool capturing() const;

 private:
  int index_;
  cudaDeviceProp properties_{};
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  MemoryStats stats_;
  std::vector<cudaEvent_t> events_;  // pool, reused every step
  size_t next_event_ = 0;

  // Pinned staging for transfers of at least kStagingThreshold bytes: pageable memory is
  // copied through two pinned chunks so the memcpy on the host overlaps the DMA.
  void ensure_staging();
  void check_not_capturing(const char* what) const;
  static constexpr size_t kStagingThreshold = 1u << 20;   // 1 MiB
  static constexpr size_t kStagingChunk = 8u << 20;       // 8 MiB per buffer
  void* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};
};

// The CUDA backend of a context on a CUDA device (throws otherwise).
CudaBackend& cuda_backend(Context& ctx);

}  // namespace blockscope
