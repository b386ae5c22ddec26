// Tests of the sim's CUDA runtime subset (sim/runtime_api.cpp, memory.cpp, graph.cpp,
// device_properties.cpp) through the real <cuda_runtime_api.h> declarations, with the
// semantics of NVIDIA's CUDA Runtime API documentation.
#include <cooperative_groups.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/device.h"
#include "sim/sim.h"
#include "sim/test/managed.h"

namespace sim = blockscope::sim;
using blockscope::sim::test::Managed;

namespace {

__global__ void affine_kernel(const float* in, float* out, int n, float a, float b) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a * in[i] + b;
}

__global__ void append_kernel(int* log, int value) {
  if (threadIdx.x == 0) log[++log[0]] = value;
}

__global__ void sleep_kernel(int ms) {
  if (threadIdx.x == 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

__global__ void faulting_kernel() {
  if (blockIdx.x == 2 && threadIdx.x == 5) __trap();
}

void launch_affine(const float* in, float* out, int n, float a, float b, cudaStream_t stream) {
  affine_kernel<<<(n + 63) / 64, 64, 0, stream>>>(in, out, n, a, b);
}

class Runtime : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaGetLastError();
  }
  void TearDown() override { EXPECT_EQ(cudaGetLastError(), cudaSuccess); }
};

// ---- Memory ---------------------------------------------------------------------------------------
TEST_F(Runtime, NewDeviceMemoryIsPoisonedAlignedAndTracked) {
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  for (int i = 0; i < 4000; ++i) ASSERT_EQ(bytes[i], 0xFF) << i;
  EXPECT_TRUE(std::isnan(p[0]));
  sim::AllocationInfo info;
  ASSERT_TRUE(sim::find_allocation(p + 500, &info));
  EXPECT_EQ(info.base, p);
  EXPECT_EQ(info.size, 4000u);
  EXPECT_EQ(info.kind, sim::AllocationInfo::Kind::device);
  EXPECT_EQ(info.device, 0);
  EXPECT_FALSE(sim::find_allocation(p + 1000, nullptr));
  EXPECT_EQ(cudaFree(p + 1), cudaErrorInvalidValue);  // not an allocation's start
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_FALSE(sim::find_allocation(p, nullptr));
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(&on_stack), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_F(Runtime, CopiesOutsideAnAllocationAreRefused) {
  char* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  std::vector<char> host(128, 1);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), d + 8, 57, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(d + 60, 0, 5), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data() + 64, d, 64, cudaMemcpyDefault), cudaSuccess);  // inferred DtoH
  EXPECT_EQ(host[100], 1);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  cudaGetLastError();
}

TEST_F(Runtime, MemGetInfoRefusesWhatTheHostCannotHold) {
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_EQ(total, 143771140096ull);
  // Independent reading of MemAvailable: free never exceeds it (give 64 MiB of slack for drift).
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  size_t kib = 0, available = SIZE_MAX;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") available = kib * 1024;
  EXPECT_LE(free_bytes, available + (64u << 20));
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, free_bytes + (1ull << 30)), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&p, total + 1), cudaErrorMemoryAllocation);
  cudaGetLastError();
  ASSERT_EQ(cudaMalloc(&p, 256u << 20), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  // The host's MemAvailable moves with other processes: only the sim's own bound is exact.
  EXPECT_LE(free_after, total - (256u << 20));
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

// ---- Lazy execution and streams ------------------------------------------------------------------
TEST_F(Runtime, WorkRunsAtSynchronisationInStreamAndEventOrder) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done_a;
  ASSERT_EQ(cudaEventCreateWithFlags(&done_a, cudaEventDisableTiming), cudaSuccess);
  Managed<int> log(8, 0);
  append_kernel<<<1, 32, 0, a>>>(log.data(), 1);
  append_kernel<<<1, 32, 0, a>>>(log.data(), 2);
  ASSERT_EQ(cudaEventRecord(done_a, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, done_a, 0), cudaSuccess);
  append_kernel<<<1, 32, 0, b>>>(log.data(), 3);
  append_kernel<<<1, 32, 0, a>>>(log.data(), 4);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(log[0], 0);  // nothing ran yet: execution is lazy
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(log[0], 3);  // b's kernel and, before it, everything it waited for
  EXPECT_EQ(log[1] * 100 + log[2] * 10 + log[3], 123);
  EXPECT_EQ(cudaEventQuery(done_a), cudaSuccess);
  ASSERT_EQ(cudaStreamQuery(a), cudaSuccess);  // may run the rest: it does
  EXPECT_EQ(log[0], 4);
  EXPECT_EQ(log[4], 4);
  EXPECT_EQ(cudaEventDestroy(done_a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

TEST_F(Runtime, PageableSourcesAreStagedPinnedOnesReadWhenTheCopyRuns) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 2 * sizeof(int)), cudaSuccess);
  int pageable = 1;
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  *pinned = 1;
  ASSERT_EQ(cudaMemcpyAsync(d, &pageable, sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d + 1, pinned, sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  pageable = 2;  // safe: the pageable source was staged
  *pinned = 2;   // too early: the DMA has not read it yet
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(d[0], 1);
  EXPECT_EQ(d[1], 2);

  // Device to pageable host: returns once done; to pinned: only at synchronisation.
  d[0] = 7, d[1] = 8;
  int back = 0;
  *pinned = 0;
  ASSERT_EQ(cudaMemcpyAsync(&back, d, sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(back, 7);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d + 1, sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(*pinned, 0);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*pinned, 8);
  sim::AllocationInfo info;
  ASSERT_TRUE(sim::find_allocation(pinned, &info));
  EXPECT_EQ(info.kind, sim::AllocationInfo::Kind::pinned_host);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, EventTimesAndTheirErrors) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t start, stop, untimed, never;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&never), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(never), cudaSuccess);  // never recorded: complete
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  sleep_kernel<<<1, 1, 0, s>>>(30);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);  // not run yet
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 29.0f);
  EXPECT_LT(ms, 2000.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, never), cudaErrorInvalidResourceHandle);
  // The untimed record may still be queued (the sync above ran the queue up to `stop`): finish
  // it, or the destroyed event would be freed only when that record runs, after the test.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (cudaEvent_t e : {start, stop, untimed, never}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(start), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// ---- Faults ---------------------------------------------------------------------------------------
TEST_F(Runtime, AFaultIsALaunchFailureNamingItAndDropsTheQueue) {
  Managed<int> log(4, 0);
  faulting_kernel<<<4, 32, 0>>>();
  append_kernel<<<1, 32, 0>>>(log.data(), 9);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);  // launches are fine; the fault comes when it runs
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const std::string message = cudaGetErrorString(cudaErrorLaunchFailure);
  EXPECT_NE(message.find("kernel faulting_kernel, block (2,0,0), thread (5,0,0)"), std::string::npos) << message;
  EXPECT_STREQ(cudaGetErrorName(cudaErrorLaunchFailure), "cudaErrorLaunchFailure");
  EXPECT_EQ(log[0], 0);  // dropped with the rest of the queue
  // Not sticky (a GPU context would be): new work runs.
  append_kernel<<<1, 32, 0>>>(log.data(), 5);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(log[0] * 10 + log[1], 15);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureInvalidated), "cudaErrorStreamCaptureInvalidated");
}

// ---- Devices --------------------------------------------------------------------------------------
TEST_F(Runtime, DevicesAndPerThreadCurrentDevice) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const char* env = std::getenv("BLOCKSCOPE_SIM_DEVICES");
  EXPECT_EQ(count, env ? std::atoi(env) : 2);
  if (count < 2) GTEST_SKIP() << "needs two simulated devices";
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int other_thread_device = -1;
  std::thread([&] { cudaGetDevice(&other_thread_device); }).join();
  EXPECT_EQ(other_thread_device, 0);
  int here = -1;
  ASSERT_EQ(cudaGetDevice(&here), cudaSuccess);
  EXPECT_EQ(here, 1);

  cudaStream_t on_one;
  cudaEvent_t event_on_one;
  ASSERT_EQ(cudaStreamCreate(&on_one), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&event_on_one), cudaSuccess);
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  sim::AllocationInfo info;
  ASSERT_TRUE(sim::find_allocation(p, &info));
  EXPECT_EQ(info.device, 1);
  int stream_device = -1;
  ASSERT_EQ(cudaStreamGetDevice(on_one, &stream_device), cudaSuccess);
  EXPECT_EQ(stream_device, 1);
  EXPECT_EQ(sim::stream_device(on_one), 1);

  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // A kernel goes to the current device only; event and stream must share a device.
  launch_affine(p, p, 16, 1, 0, on_one);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cudaStream_t on_zero;
  ASSERT_EQ(cudaStreamCreate(&on_zero), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(event_on_one, on_zero), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(event_on_one, on_one), cudaSuccess);    // allowed from any current device
  EXPECT_EQ(cudaStreamWaitEvent(on_zero, event_on_one, 0), cudaSuccess);  // cross-device waits are fine
  EXPECT_EQ(cudaEventSynchronize(event_on_one), cudaSuccess);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event_on_one), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(on_one), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(on_zero), cudaSuccess);
}

TEST_F(Runtime, PropertiesAttributesAndOccupancyOfAnH200) {
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "NVIDIA H200 (simulated)");
  EXPECT_EQ(prop.major * 10 + prop.minor, 90);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.maxThreadsDim[2], 64);
  EXPECT_EQ(prop.maxGridSize[1], 65535);
  EXPECT_EQ(prop.sharedMemPerBlock, 49152u);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 232448u);
  EXPECT_EQ(prop.sharedMemPerMultiprocessor, 233472u);
  EXPECT_EQ(prop.totalGlobalMem, 143771140096ull);
  EXPECT_EQ(prop.memoryBusWidth, 6144);
  EXPECT_EQ(prop.l2CacheSize, 50 << 20);
  int value = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_EQ(value, 232448);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrClockRate, 0), cudaSuccess);
  EXPECT_EQ(value, 1980000);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(value, 9);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxThreadsPerMultiProcessor, 0), cudaSuccess);
  EXPECT_EQ(value, 2048);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 8), cudaErrorInvalidDevice);
  cudaGetLastError();
  int version = 0;
  ASSERT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);

  cudaFuncAttributes attributes;
  ASSERT_EQ(cudaFuncGetAttributes(&attributes, sleep_kernel), cudaSuccess);
  EXPECT_EQ(attributes.numRegs, -1);  // unknown: this test is built without ptxas's figures
  EXPECT_EQ(attributes.sharedSizeBytes, 0u);
  EXPECT_EQ(attributes.maxThreadsPerBlock, 1024);
  ASSERT_EQ(cudaFuncSetAttribute(sleep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10), cudaSuccess);
  ASSERT_EQ(cudaFuncGetAttributes(&attributes, sleep_kernel), cudaSuccess);
  EXPECT_EQ(attributes.maxDynamicSharedSizeBytes, 100 << 10);
  int blocks = -1;
  const void* k = reinterpret_cast<const void*>(sleep_kernel);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 256, 0), cudaSuccess);
  EXPECT_EQ(blocks, 8);  // threads: 2048 / 256
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 32, 0), cudaSuccess);
  EXPECT_EQ(blocks, 32);  // blocks per SM
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 100, 0), cudaSuccess);
  EXPECT_EQ(blocks, 16);  // 100 threads take 4 warps
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 64, 100 << 10), cudaSuccess);
  EXPECT_EQ(blocks, 2);  // 228 KiB / (100 + 1 reserved) KiB
}

// ---- Stream-ordered allocator ---------------------------------------------------------------------
TEST_F(Runtime, PoolAllocationsArePoisonedAndFreedInStreamOrder) {
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t threshold = UINT64_MAX, read = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &read), cudaSuccess);
  EXPECT_EQ(read, UINT64_MAX);
  uint64_t used_before = 0, used = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used_before), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* p = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), 1024, pool, s), cudaSuccess);
  EXPECT_TRUE(std::isnan(p[255]));
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, used_before + 1024);
  std::vector<float> in(256, 2.0f);
  ASSERT_EQ(cudaMemcpyAsync(p, in.data(), 1024, cudaMemcpyHostToDevice, s), cudaSuccess);
  launch_affine(p, p, 256, 3, 1, s);
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_TRUE(sim::find_allocation(p, nullptr));  // the queued kernel still needs it
  EXPECT_EQ(cudaFreeAsync(p, s), cudaErrorInvalidValue);  // a second free
  cudaGetLastError();
  std::vector<float> out(256);
  float* q = nullptr;
  ASSERT_EQ(cudaMallocAsync(reinterpret_cast<void**>(&q), 1024, s), cudaSuccess);
  // Queued after the free, so it would run on freed memory: refused.
  EXPECT_EQ(cudaMemcpyAsync(q, p, 1024, cudaMemcpyDeviceToDevice, s), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_FALSE(sim::find_allocation(p, nullptr));
  ASSERT_EQ(cudaFreeAsync(q, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, used_before);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// ---- Graph capture --------------------------------------------------------------------------------
TEST_F(Runtime, CapturedGraphReplaysTheRecordedKernels) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const int n = 100;
  float *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&in, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, n * sizeof(float)), cudaSuccess);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i);
  sim::note_written(in, n * sizeof(float));  // initcheck: the host wrote it directly (the sim's memory is the host's)
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  launch_affine(in, out, n, 2, 1, s);
  launch_affine(out, out, n, 1, 0.5f, s);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_TRUE(std::isnan(out[0]));  // capturing ran nothing
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphUpload(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out[10], 21.5f);
  for (int i = 0; i < n; ++i) in[i] = 100.0f;  // a replay reads the inputs as they are now
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out[10], 201.5f);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(in), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, GraphAllocationsArePoisonedAtEveryLaunch) {
  // The graph's kernel reads memory nothing wrote, on purpose: initcheck off, poison is the point.
  sim::Checks checks;
  checks.initcheck = false;
  sim::set_checks(checks);
  struct Restore {
    ~Restore() { sim::set_checks(sim::Checks{}); }
  } restore;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  float* before = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&before), 64, pool, s), cudaSuccess);
  std::vector<float> result(4);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  float* tmp = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&tmp), 16, pool, s), cudaSuccess);
  launch_affine(tmp, tmp, 2, 1, 1, s);  // reads unwritten graph memory: NaN
  EXPECT_EQ(cudaFreeAsync(before, s), cudaErrorInvalidValue);  // a captured free must name a graph allocation
  cudaGetLastError();
  ASSERT_EQ(cudaFreeAsync(tmp, s), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  tmp[2] = 5.0f;
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(std::isnan(tmp[0]));
  EXPECT_TRUE(std::isnan(tmp[2]));  // the free node poisoned it again
  sim::AllocationInfo info;
  ASSERT_TRUE(sim::find_allocation(tmp, &info));
  EXPECT_EQ(info.kind, sim::AllocationInfo::Kind::graph);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_FALSE(sim::find_allocation(tmp, nullptr));  // released with the graph
  EXPECT_EQ(cudaFreeAsync(before, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Begins a capture, makes `call`, expects `refusal` from it and an invalidated capture.
void expect_refused_in_capture(cudaStreamCaptureMode mode, unsigned stream_flags, cudaError_t refusal,
                               const std::function<cudaError_t(cudaStream_t)>& call) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, stream_flags), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, mode), cudaSuccess);
  EXPECT_EQ(call(s), refusal);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  launch_affine(nullptr, nullptr, 1, 1, 1, s);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST_F(Runtime, CallsTheRuntimeRefusesDuringCapture) {
  const auto local = cudaStreamCaptureModeThreadLocal;
  expect_refused_in_capture(local, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported,
                            [](cudaStream_t s) { return cudaStreamSynchronize(s); });
  expect_refused_in_capture(local, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported,
                            [](cudaStream_t s) { return cudaStreamQuery(s); });
  expect_refused_in_capture(local, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported,
                            [](cudaStream_t) { return cudaDeviceSynchronize(); });
  expect_refused_in_capture(local, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported, [](cudaStream_t) {
    void* p;
    return cudaMalloc(&p, 16);
  });
  expect_refused_in_capture(cudaStreamCaptureModeGlobal, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported,
                            [](cudaStream_t) {
                              int x = 0, y = 0;
                              return cudaMemcpy(&x, &y, sizeof x, cudaMemcpyHostToHost);
                            });
  expect_refused_in_capture(local, cudaStreamNonBlocking, cudaErrorStreamCaptureUnsupported, [](cudaStream_t) {
    cudaEvent_t e;
    cudaEventCreate(&e);
    const cudaError_t error = cudaEventSynchronize(e);
    cudaEventDestroy(e);
    return error;
  });
  // The legacy stream synchronises with blocking streams: using it while one captures.
  expect_refused_in_capture(local, cudaStreamDefault, cudaErrorStreamCaptureImplicit,
                            [](cudaStream_t) { return cudaStreamQuery(nullptr); });
}

TEST_F(Runtime, CaptureModesDecideWhoMayMakeUnsafeCalls) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // Relaxed: cudaMalloc is allowed in the capturing thread.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  // Thread-local: other threads are not affected; global: they are.
  for (auto mode : {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    ASSERT_EQ(cudaStreamBeginCapture(s, mode), cudaSuccess);
    cudaError_t other = cudaSuccess;
    std::thread([&] {
      void* q = nullptr;
      other = cudaMalloc(&q, 16);
      if (q) cudaFree(q);
    }).join();
    EXPECT_EQ(other, mode == cudaStreamCaptureModeGlobal ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
    EXPECT_EQ(cudaStreamEndCapture(s, &graph),
              mode == cudaStreamCaptureModeGlobal ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);  // nothing open
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, ForkedStreamMustJoinBeforeTheCaptureEnds) {
  cudaStream_t origin, side;
  ASSERT_EQ(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  Managed<int> log(4, 0);
  for (bool joined : {true, false}) {
    log[0] = 0;
    ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    append_kernel<<<1, 32, 0, origin>>>(log.data(), 1);
    ASSERT_EQ(cudaEventRecord(fork, origin), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive);
    append_kernel<<<1, 32, 0, side>>>(log.data(), 2);
    if (joined) {
      ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(origin, join, 0), cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(origin, &graph), joined ? cudaSuccess : cudaErrorStreamCaptureUnjoined);
    ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone);
    if (joined) {
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, origin), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(origin), cudaSuccess);
      EXPECT_EQ(log[0] * 100 + log[1] * 10 + log[2], 212);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    cudaGetLastError();
  }
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(side);
}


// ---- Host memory the device uses ------------------------------------------------------------------
__global__ void add_one_kernel(int* p, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] += 1;
}

TEST_F(Runtime, RegisteredHostMemoryIsPinnedKernelUsableAndStaysTheCallers) {
  std::vector<int> host(100);
  for (int i = 0; i < 100; ++i) host[i] = i;
  ASSERT_EQ(cudaHostRegister(host.data(), 100 * sizeof(int), cudaHostRegisterMapped), cudaSuccess);
  sim::AllocationInfo info;
  ASSERT_TRUE(sim::find_allocation(host.data() + 99, &info));
  EXPECT_EQ(info.kind, sim::AllocationInfo::Kind::registered_host);
  EXPECT_EQ(cudaHostRegister(host.data() + 50, 4, 0), cudaErrorHostMemoryAlreadyRegistered);  // inside
  std::vector<int> other(64);
  ASSERT_EQ(cudaHostRegister(other.data() + 32, 8 * sizeof(int), 0), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(other.data(), 33 * sizeof(int), 0), cudaErrorHostMemoryAlreadyRegistered);  // ends inside
  EXPECT_EQ(cudaHostRegister(other.data(), 32 * sizeof(int), 0), cudaSuccess);  // ends where it starts
  EXPECT_EQ(cudaHostUnregister(other.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(other.data() + 32), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(other.data(), 4, 0x80), cudaErrorInvalidValue);  // unknown flag
  cudaGetLastError();
  unsigned flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&flags, host.data()), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaHostRegisterMapped});
  int* device_view = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_view), host.data(), 0), cudaSuccess);
  EXPECT_EQ(device_view, host.data());  // unified addressing
  add_one_kernel<<<2, 64>>>(device_view, 100);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(host[i], i + 1) << i;
  // Pinned: an async copy reads it when the copy runs, not at the call.
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(int)), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, host.data(), sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  host[0] = 42;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(d[0], 42);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);      // not device memory
  EXPECT_EQ(cudaFreeHost(host.data()), cudaErrorInvalidValue);  // not the runtime's to free
  cudaGetLastError();
  ASSERT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  EXPECT_FALSE(sim::find_allocation(host.data(), nullptr));
  EXPECT_EQ(host[0], 42);  // still the caller's, unchanged
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaErrorHostMemoryNotRegistered);
  EXPECT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_view), host.data(), 0), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, PointerAttributesSayWhoseMemoryItIs) {
  float *device = nullptr, *pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64), cudaSuccess);
  Managed<float> managed(4);
  float on_stack[4];
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, device + 3), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.devicePointer, device + 3);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, pinned);
  ASSERT_EQ(cudaPointerGetAttributes(&a, managed.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  ASSERT_EQ(cudaPointerGetAttributes(&a, on_stack), cudaSuccess);  // not an error since CUDA 11
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, device), cudaErrorInvalidValue);
  cudaGetLastError();
  // Managed-memory hints are checked, then change nothing (one copy, never migrated).
  cudaMemLocation here{};
  here.type = cudaMemLocationTypeDevice;
  here.id = 0;
  EXPECT_EQ(cudaMemPrefetchAsync(managed.data(), 16, here, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemPrefetchAsync(managed.data(), 17, here, 0, nullptr), cudaErrorInvalidValue);  // past it
  EXPECT_EQ(cudaMemPrefetchAsync(device, 16, here, 0, nullptr), cudaErrorInvalidValue);  // not managed
  EXPECT_EQ(cudaMemAdvise(managed.data(), 16, cudaMemAdviseSetReadMostly, here), cudaSuccess);
  here.id = 8;
  EXPECT_EQ(cudaMemAdvise(managed.data(), 16, cudaMemAdviseSetReadMostly, here), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, managed.data(), 0, cudaMemAttachSingle), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, managed.data(), 0, 7), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, device, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// ---- Pitched memory, 2D and peer copies -------------------------------------------------------------
TEST_F(Runtime, PitchedRowsCopyAndSetOnlyTheirWidth) {
  constexpr size_t kRows = 7, kCols = 100;  // floats: 400 bytes a row
  float* d = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d), &pitch, kCols * sizeof(float), kRows), cudaSuccess);
  EXPECT_EQ(pitch, 512u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 256, 0u);
  std::vector<float> host(kRows * kCols);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(std::rand()) / RAND_MAX;
  const size_t width = kCols * sizeof(float);
  ASSERT_EQ(cudaMemcpy2D(d, pitch, host.data(), width, width, kRows, cudaMemcpyHostToDevice), cudaSuccess);
  const auto* bytes = reinterpret_cast<const unsigned char*>(d);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols; ++c) ASSERT_EQ(d[r * pitch / sizeof(float) + c], host[r * kCols + c]) << r << "," << c;
    for (size_t b = width; b < pitch; ++b) ASSERT_EQ(bytes[r * pitch + b], 0xFF) << "padding of row " << r;
  }
  // Back into rows 3 floats apart (a wider host pitch), and one row short: the rest untouched.
  const size_t host_pitch = width + 3 * sizeof(float);
  std::vector<float> back(kRows * (kCols + 3), -1.0f);
  ASSERT_EQ(cudaMemcpy2D(back.data(), host_pitch, d, pitch, width, kRows - 1, cudaMemcpyDefault), cudaSuccess);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols + 3; ++c) {
      const float want = r < kRows - 1 && c < kCols ? host[r * kCols + c] : -1.0f;
      ASSERT_EQ(back[r * (kCols + 3) + c], want) << r << "," << c;
    }
  }
  ASSERT_EQ(cudaMemset2D(d, pitch, 0, width - 4, kRows), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // a memset of device memory may return early
  for (size_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(d[r * pitch / sizeof(float) + kCols - 2], 0.0f);
    EXPECT_EQ(d[r * pitch / sizeof(float) + kCols - 1], host[r * kCols + kCols - 1]);  // beyond the width
  }
  // Errors: a width wider than a pitch; a last row past the allocation.
  EXPECT_EQ(cudaMemcpy2D(d, pitch, host.data(), width, pitch + 1, 1, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2D(d, pitch, host.data(), width, width, kRows + 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2D(d, pitch, 0, pitch + 1, 1), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemset2D(d, pitch, 0, width, kRows + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetErrorName(cudaErrorInvalidPitchValue), std::string("cudaErrorInvalidPitchValue"));
  cudaGetLastError();
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(Runtime, PeerCopiesNameBothDevices) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs two simulated devices";
  int *on_zero = nullptr, *on_one = nullptr;
  ASSERT_EQ(cudaMalloc(&on_zero, 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on_one, 16 * sizeof(int)), cudaSuccess);
  for (int i = 0; i < 16; ++i) on_one[i] = 3 * i;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // No peer access needed: the copy may go through the host.
  ASSERT_EQ(cudaMemcpyPeer(on_zero, 0, on_one, 1, 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the copy is asynchronous to the host
  for (int i = 0; i < 16; ++i) ASSERT_EQ(on_zero[i], 3 * i);
  EXPECT_EQ(cudaMemcpyPeer(on_zero, 1, on_one, 1, 4), cudaErrorInvalidValue);  // on_zero is not device 1's
  EXPECT_EQ(cudaMemcpyPeer(on_zero, 0, on_one, 1, 17 * sizeof(int)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyPeerAsync(on_zero, 0, on_one, 8, 4, nullptr), cudaErrorInvalidDevice);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(on_zero), cudaSuccess);
  EXPECT_EQ(cudaFree(on_one), cudaSuccess);
}

// ---- Host functions, priorities, attributes ---------------------------------------------------------
struct HostCall {
  const int* log;
  std::atomic<int> seen{-1};  // written by whichever thread runs the queue
  cudaStream_t stream = nullptr;
  cudaError_t status = cudaErrorUnknown;
};

// Waits up to 30 s for `done`, without any CUDA call.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST_F(Runtime, HostFunctionsAndCallbacksRunInStreamOrderWithoutTheHostWaiting) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Managed<int> log(8, 0);
  HostCall by_func{log.data()}, by_callback{log.data()};
  append_kernel<<<1, 32, 0, s>>>(log.data(), 1);
  ASSERT_EQ(cudaLaunchHostFunc(
                s, [](void* p) { static_cast<HostCall*>(p)->seen = static_cast<HostCall*>(p)->log[0]; }, &by_func),
            cudaSuccess);
  append_kernel<<<1, 32, 0, s>>>(log.data(), 2);
  ASSERT_EQ(cudaStreamAddCallback(
                s,
                [](cudaStream_t stream, cudaError_t status, void* p) {
                  auto* call = static_cast<HostCall*>(p);
                  call->stream = stream, call->status = status;
                  call->seen = call->log[0];
                },
                &by_callback, 0),
            cudaSuccess);
  // A program may wait for its callback by its own means (simpleCallback's barrier): the stream
  // must get there by itself, as a GPU's does.
  ASSERT_TRUE(eventually([&] { return by_callback.seen >= 0; })) << "the callback never ran";
  EXPECT_EQ(by_func.seen, 1);      // after the first kernel, before the second
  EXPECT_EQ(by_callback.seen, 2);  // after the second
  EXPECT_EQ(by_callback.stream, s);
  EXPECT_EQ(by_callback.status, cudaSuccess);
  append_kernel<<<1, 32, 0, s>>>(log.data(), 3);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(log[0], 3);
  EXPECT_EQ(cudaLaunchHostFunc(s, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAddCallback(s, [](cudaStream_t, cudaError_t, void*) {}, nullptr, 1), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, AFaultMetInTheBackgroundIsReturnedByTheNextSynchronisingCall) {
  std::atomic<bool> ran{false};
  faulting_kernel<<<4, 32>>>();
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, [](void* p) { *static_cast<std::atomic<bool>*>(p) = true; }, &ran),
            cudaSuccess);
  // The fault drops the host function with the rest of the queue; the next sync reports it.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_FALSE(ran);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // reported once
}

TEST_F(Runtime, StreamPrioritiesAreClampedAndAttributesKept) {
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  cudaStream_t high, low;
  ASSERT_EQ(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, -100), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&low, cudaStreamDefault, 7), cudaSuccess);
  int priority = 1;
  unsigned flags = 9;
  ASSERT_EQ(cudaStreamGetPriority(high, &priority), cudaSuccess);
  EXPECT_EQ(priority, -5);
  ASSERT_EQ(cudaStreamGetPriority(low, &priority), cudaSuccess);
  EXPECT_EQ(priority, 0);
  ASSERT_EQ(cudaStreamGetFlags(high, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaStreamNonBlocking});
  cudaStreamAttrValue value{};
  value.priority = -2;
  ASSERT_EQ(cudaStreamSetAttribute(low, cudaLaunchAttributePriority, &value), cudaSuccess);
  ASSERT_EQ(cudaStreamGetPriority(low, &priority), cudaSuccess);
  EXPECT_EQ(priority, -2);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  value = {};
  value.accessPolicyWindow.base_ptr = d;
  value.accessPolicyWindow.num_bytes = 4096;
  value.accessPolicyWindow.hitRatio = 0.6f;
  value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  ASSERT_EQ(cudaStreamSetAttribute(low, cudaLaunchAttributeAccessPolicyWindow, &value), cudaSuccess);
  cudaStreamAttrValue read{};
  ASSERT_EQ(cudaStreamGetAttribute(low, cudaLaunchAttributeAccessPolicyWindow, &read), cudaSuccess);
  EXPECT_EQ(read.accessPolicyWindow.base_ptr, d);
  EXPECT_EQ(read.accessPolicyWindow.hitRatio, 0.6f);
  value.accessPolicyWindow.hitRatio = 1.5f;
  EXPECT_EQ(cudaStreamSetAttribute(low, cudaLaunchAttributeAccessPolicyWindow, &value), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSetAttribute(nullptr, cudaLaunchAttributePriority, &value), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSetAttribute(low, cudaLaunchAttributeCooperative, &value), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(high), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(low), cudaSuccess);
}

// ---- Device state --------------------------------------------------------------------------------
TEST_F(Runtime, LimitsFlagsCacheConfigAndBusIds) {
  size_t limit = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&limit, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(limit, 1024u);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64u << 20), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize), cudaSuccess);
  EXPECT_EQ(limit, 64u << 20);
  EXPECT_EQ(cudaDeviceSetLimit(static_cast<cudaLimit>(0x40), 1), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 256), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, unsigned{cudaDeviceScheduleBlockingSync});
  EXPECT_NE(flags & cudaDeviceMapHost, 0u);
  EXPECT_EQ(cudaSetDeviceFlags(0x3), cudaErrorInvalidValue);  // spin | yield: not one schedule
  cudaGetLastError();
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared), cudaSuccess);
  cudaFuncCache cache = cudaFuncCachePreferNone;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&cache), cudaSuccess);
  EXPECT_EQ(cache, cudaFuncCachePreferShared);
  EXPECT_EQ(cudaFuncSetCacheConfig(reinterpret_cast<const void*>(sleep_kernel), cudaFuncCachePreferL1), cudaSuccess);
  char bus[16];
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), cudaSuccess);
  int device = -1;
  ASSERT_EQ(cudaDeviceGetByPCIBusId(&device, bus), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaDeviceGetPCIBusId(bus, 5, 0), cudaErrorInvalidValue);  // too short for the id
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&device, "0000:99:00.0"), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&device, "bus"), cudaErrorInvalidValue);
  cudaGetLastError();
  // Every attribute the runtime declares answers (texture and surface limits with 0: not modelled).
  int value = -1;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrComputeMode, 0), cudaSuccess);
  EXPECT_EQ(value, cudaComputeModeDefault);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxTexture2DWidth, 0), cudaSuccess);
  EXPECT_EQ(value, 0);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrHostRegisterSupported, 0), cudaSuccess);
  EXPECT_EQ(value, 1);
  for (int attr = 1; attr < cudaDevAttrMax; ++attr) {
    const cudaError_t error = cudaDeviceGetAttribute(&value, static_cast<cudaDeviceAttr>(attr), 0);
    EXPECT_TRUE(error == cudaSuccess || error == cudaErrorInvalidValue) << attr;
  }
  cudaGetLastError();
  ASSERT_EQ(cudaSetDeviceFlags(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 8u << 20), cudaSuccess);
}

TEST_F(Runtime, DeviceResetFreesTheDevicesMemoryStreamsAndSettings) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "resets device 1; needs two simulated devices";
  float* on_zero = nullptr;
  ASSERT_EQ(cudaMalloc(&on_zero, 64), cudaSuccess);
  Managed<int> log(4, 0);  // device 0's: survives the reset of device 1
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  float *d = nullptr, *pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 1024), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64), cudaSuccess);
  cudaStream_t s;
  cudaEvent_t e;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  append_kernel<<<1, 32, 0, s>>>(log.data(), 7);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(log[0], 1);  // queued work ran first
  EXPECT_FALSE(sim::find_allocation(d, nullptr));
  EXPECT_FALSE(sim::find_allocation(pinned, nullptr));
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  size_t limit = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&limit, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(limit, 1024u);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_TRUE(sim::find_allocation(on_zero, nullptr));  // another device's memory stays
  EXPECT_EQ(cudaFree(on_zero), cudaSuccess);
}


// ---- Launches through a const void* (the C API) ------------------------------------------------------
// Block b adds up what every block wrote before the grid-wide barrier.
__global__ void grid_sum_kernel(int* slots, int* sums) {
  namespace cg = cooperative_groups;
  if (threadIdx.x == 0) slots[blockIdx.x] = static_cast<int>(blockIdx.x) + 1;
  cg::this_grid().sync();
  if (threadIdx.x == 0) {
    int total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += slots[b];
    sums[blockIdx.x] = total;
  }
}

__global__ void overloaded_kernel(int* p) { p[0] = 1; }
__global__ void overloaded_kernel(float* p) { p[0] = 1.0f; }

template <class T>
__global__ void templated_kernel(T* p) {
  p[0] = T(2);
}

TEST_F(Runtime, KernelsLaunchThroughTheirAddressWithVoidPointerArguments) {
  Managed<float> in(100, 2.0f), out(100, 0.0f);
  float* in_ptr = in.data();
  float* out_ptr = out.data();
  int n = 100;
  float a = 3.0f, b = 1.0f;
  void* args[] = {&in_ptr, &out_ptr, &n, &a, &b};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(affine_kernel), dim3(2), dim3(64), args, 0, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(out[i], 7.0f) << i;
  // Cooperative: the grid-wide barrier holds.
  Managed<int> slots(4, 0), sums(4, 0);
  int* slots_ptr = slots.data();
  int* sums_ptr = sums.data();
  void* grid_args[] = {&slots_ptr, &sums_ptr};
  ASSERT_EQ(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(grid_sum_kernel), dim3(4), dim3(32), grid_args,
                                        0, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int blk = 0; blk < 4; ++blk) EXPECT_EQ(sums[blk], 10) << blk;
}

TEST_F(Runtime, KernelsWithoutOneTypeCannotLaunchThroughTheirAddress) {
  Managed<int> value(1, 0);
  int* p = value.data();
  void* args[] = {&p};
  // The first overload was the only one of its name where it was defined: it has its launcher.
  const void* first = reinterpret_cast<const void*>(static_cast<void (*)(int*)>(overloaded_kernel));
  ASSERT_EQ(cudaLaunchKernel(first, dim3(1), dim3(1), args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(value[0], 1);
  // The second one's name is ambiguous there: it has none.
  Managed<float> number(1, 0.0f);
  float* q = number.data();
  void* float_args[] = {&q};
  const void* second = reinterpret_cast<const void*>(static_cast<void (*)(float*)>(overloaded_kernel));
  EXPECT_EQ(cudaLaunchKernel(second, dim3(1), dim3(1), float_args, 0, nullptr), cudaErrorNotSupported);
  const std::string message = cudaGetErrorString(cudaErrorNotSupported);
  EXPECT_NE(message.find("neither templates nor overloaded"), std::string::npos) << message;
  EXPECT_NE(message.find("overloaded_kernel"), std::string::npos) << message;
  const void* templated = reinterpret_cast<const void*>(templated_kernel<int>);
  EXPECT_EQ(cudaLaunchKernel(templated, dim3(1), dim3(1), args, 0, nullptr), cudaErrorNotSupported);
  EXPECT_EQ(cudaLaunchKernel(nullptr, dim3(1), dim3(1), args, 0, nullptr), cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  // The typed forms launch both.
  ASSERT_EQ(cudaLaunchKernel(templated_kernel<int>, dim3(1), dim3(1), args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(value[0], 2);
}

}  // namespace
