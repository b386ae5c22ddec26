#include "runtime/cuda/cuda_backend.h"

#include <cstring>

#include "runtime/cuda/cuda_check.h"

namespace blockscope {

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

bool cuda_available() { return cuda_device_count() > 0; }

std::shared_ptr<Backend> make_cuda_backend(int index) { return std::make_shared<CudaBackend>(index); }

CudaBackend::CudaBackend(int device_index) : index_(device_index) {
  BS_CUDA_CHECK(cudaSetDevice(index_));
  BS_CUDA_CHECK(cudaGetDeviceProperties(&properties_, index_));
  BS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  BS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, index_));
  // Keep freed memory in the pool between steps instead of returning it to the driver.
  uint64_t threshold = UINT64_MAX;
  BS_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
  BS_CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
  workspace_bytes_ = 32u << 20;  // 32 MiB: what cuBLAS recommends for Hopper
  BS_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: errors here are ignored on purpose.
  cudaSetDevice(index_);
  if (stream_) cudaStreamSynchronize(stream_);
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
  if (workspace_) cudaFree(workspace_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const { return std::string("cuda:") + std::to_string(index_) + " (" + properties_.name + ")"; }

void* CudaBackend::allocate(size_t bytes) {
  void* ptr = nullptr;
  BS_CUDA_CHECK(cudaMallocFromPoolAsync(&ptr, bytes == 0 ? 256 : bytes, pool_, stream_));
  stats_.in_use += bytes;
  stats_.total_allocated += bytes;
  stats_.allocation_count += 1;
  if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
  return ptr;
}

void CudaBackend::deallocate(void* ptr, size_t bytes) {
  cudaSetDevice(index_);
  cudaFreeAsync(ptr, stream_);  // called from destructors: never throws
  stats_.in_use -= bytes;
}

size_t CudaBackend::memory_available() const {
  size_t free_bytes = 0, total_bytes = 0;
  BS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  BS_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // Pageable host memory: the copy must finish before the caller may reuse its buffer.
  BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  BS_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_within(void* dst, const void* src, size_t bytes) {
  BS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() { BS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

TimeMark CudaBackend::mark() {
  if (next_event_ == events_.size()) {
    cudaEvent_t event;
    BS_CUDA_CHECK(cudaEventCreate(&event));
    events_.push_back(event);
  }
  cudaEvent_t event = events_[next_event_];
  BS_CUDA_CHECK(cudaEventRecord(event, stream_));
  return TimeMark{static_cast<int64_t>(next_event_++)};
}

double CudaBackend::elapsed_ms(TimeMark start, TimeMark end) {
  BS_CHECK(start.valid() && end.valid() && static_cast<size_t>(end.value) < next_event_, "unknown time mark");
  float ms = 0.0f;
  BS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[start.value], events_[end.value]));
  return ms;
}

bool CudaBackend::capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  BS_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  return status == cudaStreamCaptureStatusActive;
}

CudaBackend& cuda_backend(Context& ctx) {
  BS_CHECK(ctx.device().is_cuda(), "a CUDA op was called on a ", ctx.device().str(), " context");
  return static_cast<CudaBackend&>(ctx.backend());
}

}  // namespace blockscope
