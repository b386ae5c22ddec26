#include "runtime/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
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

// The simulated GPU names its devices "… (simulated)" (sim/device_properties.cpp): what the build
// links decides, seen through the runtime like any other property of the device.
bool cuda_simulated() {
  static const bool simulated = [] {
    cudaDeviceProp properties{};
    if (cuda_device_count() == 0 || cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return std::strstr(properties.name, "(simulated)") != nullptr;
  }();
  return simulated;
}

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
  destroy_attachments();  // the cuBLASLt plan cache's descriptors go before the handle
  for (int i = 0; i < 2; ++i) {
    if (staging_done_[i]) cudaEventDestroy(staging_done_[i]);
    if (staging_[i]) cudaFreeHost(staging_[i]);
  }
  if (workspace_) cudaFree(workspace_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (stream_) cudaStreamDestroy(stream_);
}

namespace {

// Dense FLOPs per SM per clock, from NVIDIA's architecture whitepapers (A100: 312 TFLOP/s
// bf16 = 108 SMs x 1.41 GHz x 2048; H100 SXM: 989 TFLOP/s = 132 SMs x 1.83 GHz x 4096; L40S /
// Ada: 1024; GA10x: 512 with f32 accumulation; B200: 8192). f32 runs on the FP32 cores
// (no TF32): 2 FLOPs per FMA x FP32 lanes per SM (64 on sm_80, 128 on sm_86+ and sm_90).
// 0 = not in the table (the % of peak column then shows "-").
double flops_per_sm_per_clock(int major, int minor, DType dtype) {
  const bool half = dtype != DType::f32;
  const int cc = major * 10 + minor;
  switch (cc) {
    case 80: return half ? 2048 : 128;
    case 86: return half ? 512 : 256;
    case 87: return half ? 1024 : 256;
    case 89: return half ? 1024 : 256;
    case 90: return half ? 4096 : 256;
    case 100: return half ? 8192 : 256;
    default: return 0;
  }
}

// A device attribute, 0 when it cannot be read: a failure only hides the peak, and is cleared
// (cudaGetLastError) so the next kernel's launch check does not report it as its own.
int attribute_or_zero(cudaDeviceAttr attribute, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return value;
}

}  // namespace

BackendInfo CudaBackend::info(DType dtype) {
  BackendInfo info;
  info.description = properties_.name;
  info.simulated = cuda_simulated();
  DeviceProperties& device = info.device_properties.emplace();
  device.index = index_;
  device.name = properties_.name;
  device.total_global_mem = static_cast<int64_t>(properties_.totalGlobalMem);
  device.compute_major = properties_.major;
  device.compute_minor = properties_.minor;
  device.num_sms = properties_.multiProcessorCount;
  device.max_threads_per_block = properties_.maxThreadsPerBlock;
  device.max_threads_per_sm = properties_.maxThreadsPerMultiProcessor;
  device.regs_per_block = properties_.regsPerBlock;
  device.regs_per_sm = properties_.regsPerMultiprocessor;
  device.warp_size = properties_.warpSize;
  device.shared_mem_per_block = static_cast<int64_t>(properties_.sharedMemPerBlock);
  device.shared_mem_per_sm = static_cast<int64_t>(properties_.sharedMemPerMultiprocessor);
  device.shared_mem_per_block_optin = static_cast<int64_t>(properties_.sharedMemPerBlockOptin);
  if (info.simulated) {
    info.peak_source = "none: simulated GPU";
    return info;
  }
  make_current();
  // Clock rates come from device attributes (cudaDeviceProp's clock fields are gone in
  // CUDA 13). Both are in kHz.
  const int clock_khz = attribute_or_zero(cudaDevAttrClockRate, index_);
  const int memory_clock_khz = attribute_or_zero(cudaDevAttrMemoryClockRate, index_);
  info.peak_tflops = properties_.multiProcessorCount * (clock_khz * 1e3) *
                     flops_per_sm_per_clock(properties_.major, properties_.minor, dtype) / 1e12;
  // Bus width (bits) / 8 x memory clock x 2 (double data rate): H100 SXM 5120 bits x
  // 2.619 GHz x 2 = 3.35 TB/s, the datasheet figure.
  info.peak_gbps = properties_.memoryBusWidth / 8.0 * (memory_clock_khz * 1e3) * 2.0 / 1e9;
  info.peak_source = "nominal: SMs x clock x dense FLOPs per SM per clock; bus width x memory clock x 2";
  return info;
}

std::string CudaBackend::name() const { return std::string("cuda:") + std::to_string(index_) + " (" + properties_.name + ")"; }

void* CudaBackend::allocate(size_t bytes) {
  make_current();
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
  // Called from destructors: never throws. A failure (e.g. freeing, inside a graph capture, a
  // tensor allocated before it: a captured free must name a graph allocation) is said on
  // stderr, and cleared so that the next kernel's launch check (cudaGetLastError) does not
  // report it as that kernel's failure.
  const cudaError_t status = cudaFreeAsync(ptr, stream_);
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "blockscope: cudaFreeAsync of %zu bytes failed: %s (%s); the memory is not returned\n",
                 bytes, cudaGetErrorName(status), cudaGetErrorString(status));
  }
  stats_.in_use -= bytes;
}

size_t CudaBackend::memory_available() const {
  make_current();  // cudaMemGetInfo reports the current device, not this backend's
  size_t free_bytes = 0, total_bytes = 0;
  BS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void CudaBackend::check_not_capturing(const char* what) const {
  if (capturing()) {
    throw Error(ErrorKind::runtime, std::string(what) +
                                        " during a CUDA graph capture: host transfers synchronise the stream and "
                                        "cannot be captured; move them out of the captured forward");
  }
}

void CudaBackend::ensure_staging() {
  if (staging_[0] != nullptr) return;
  for (int i = 0; i < 2; ++i) {
    BS_CUDA_CHECK(cudaMallocHost(&staging_[i], kStagingChunk));
    BS_CUDA_CHECK(cudaEventCreateWithFlags(&staging_done_[i], cudaEventDisableTiming));
  }
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  check_not_capturing("copy_to_device");
  make_current();
  if (bytes < kStagingThreshold) {
    BS_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    // Pageable host memory: the copy must finish before the caller may reuse its buffer.
    BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  // Two pinned chunks in turn: while the DMA of one runs, the host fills the other.
  ensure_staging();
  const char* src = static_cast<const char*>(host_src);
  char* out = static_cast<char*>(dst);
  int chunk_index = 0;
  for (size_t done = 0; done < bytes; done += kStagingChunk, chunk_index ^= 1) {
    const size_t size = std::min(kStagingChunk, bytes - done);
    BS_CUDA_CHECK(cudaEventSynchronize(staging_done_[chunk_index]));  // its previous DMA is over
    std::memcpy(staging_[chunk_index], src + done, size);
    BS_CUDA_CHECK(cudaMemcpyAsync(out + done, staging_[chunk_index], size, cudaMemcpyHostToDevice, stream_));
    BS_CUDA_CHECK(cudaEventRecord(staging_done_[chunk_index], stream_));
  }
  BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  check_not_capturing("copy_to_host");
  make_current();
  if (bytes < kStagingThreshold) {
    BS_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  // Queue the DMA of chunk i+1 before copying chunk i out of pinned memory on the host.
  ensure_staging();
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(host_dst);
  const size_t chunks = (bytes + kStagingChunk - 1) / kStagingChunk;
  auto enqueue = [&](size_t chunk) {
    const size_t offset = chunk * kStagingChunk;
    const size_t size = std::min(kStagingChunk, bytes - offset);
    BS_CUDA_CHECK(cudaMemcpyAsync(staging_[chunk % 2], in + offset, size, cudaMemcpyDeviceToHost, stream_));
    BS_CUDA_CHECK(cudaEventRecord(staging_done_[chunk % 2], stream_));
  };
  enqueue(0);
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + 1 < chunks) enqueue(chunk + 1);
    BS_CUDA_CHECK(cudaEventSynchronize(staging_done_[chunk % 2]));
    const size_t offset = chunk * kStagingChunk;
    std::memcpy(out + offset, staging_[chunk % 2], std::min(kStagingChunk, bytes - offset));
  }
}

void CudaBackend::copy_within(void* dst, const void* src, size_t bytes) {
  make_current();
  BS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() {
  make_current();
  BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

TimeMark CudaBackend::mark() {
  // The event must be created on, and recorded from, this backend's device: an event recorded
  // on another device's stream is cudaErrorInvalidResourceHandle (the recorder calls mark()
  // from whichever context an op runs on, in any order).
  make_current();
  // An event recorded on a capturing stream is not a timestamp: it only marks a point of the
  // graph being built, nothing runs, and cudaEventElapsedTime on it fails later (in
  // Recorder::resolve, far from the cause). A recorder attached during a capture is therefore
  // an error at capture time, naming the fix, like every other uncapturable call.
  if (capturing()) {
    throw Error(ErrorKind::runtime,
                "device timing marks (a profiler recorder attached to the context) cannot be taken during a CUDA "
                "graph capture: nothing runs while capturing; detach the recorder for the capture and profile the "
                "replays instead");
  }
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
  make_current();
  float ms = 0.0f;
  BS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[start.value], events_[end.value]));
  return ms;
}

bool CudaBackend::capturing() const {
  make_current();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  BS_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  return status == cudaStreamCaptureStatusActive;
}

CudaBackend& cuda_backend(Context& ctx) {
  BS_CHECK(ctx.device().is_cuda(), "a CUDA op was called on a ", ctx.device().str(), " context");
  CudaBackend& backend = static_cast<CudaBackend&>(ctx.backend());
  backend.make_current();
  return backend;
}

void CudaBackend::make_current() const {
  // Kernel launches and cuBLASLt calls go to the calling thread's current device, not to the
  // stream's: with contexts on two GPUs in one thread, the last one created would otherwise
  // receive every launch. Every CUDA op reaches its backend through cuda_backend(ctx), so
  // selecting the device here covers them all (cudaGetDevice is a cheap host-side query).
  int current = -1;
  BS_CUDA_CHECK(cudaGetDevice(&current));
  if (current != index_) BS_CUDA_CHECK(cudaSetDevice(index_));
}

}  // namespace blockscope
