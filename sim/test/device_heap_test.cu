// Tests of device-side malloc/free/new/delete (sim/device_heap.cpp, the rewriter's device-code
// calls): the heap cudaLimitMallocHeapSize sizes, NULL when it is exhausted, objects built and
// destroyed, memcheck on the heap's blocks, leaks not an error — as the CUDA C++ Programming
// Guide's "Dynamic Global Memory Allocation and Operations" describes them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "sim/test/launch_result.h"
#include "sim/test/managed.h"

using blockscope::sim::test::Managed;

namespace {

using blockscope::sim::test::finish;
using blockscope::sim::test::has;

std::vector<int> random_ints(size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> value(-1000000, 1000000);
  std::vector<int> out(n);
  for (int& v : out) v = value(rng);
  return out;
}

// ---- malloc / free ------------------------------------------------------------------------------
// Each thread copies its slice into a block of its own, sums it there in reverse, frees it.
__global__ void malloc_sum_kernel(const int* in, long long* sums, int per_thread, uintptr_t* alignment_misses) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  int* mine = static_cast<int*>(malloc(per_thread * sizeof(int)));
  if (mine == nullptr) {
    sums[t] = -1;
    return;
  }
  if (reinterpret_cast<uintptr_t>(mine) % 16 != 0) atomicAdd(reinterpret_cast<unsigned long long*>(alignment_misses), 1ull);
  for (int i = 0; i < per_thread; ++i) mine[i] = in[t * per_thread + i];
  long long sum = 0;
  for (int i = per_thread - 1; i >= 0; --i) sum += mine[i];
  sums[t] = sum;
  free(mine);
}

TEST(DeviceHeap, MallocAndFreeInAKernel) {
  const int threads = 96, per_thread = 13;
  const std::vector<int> values = random_ints(threads * per_thread);
  Managed<int> in(values.size());
  for (size_t i = 0; i < values.size(); ++i) in[i] = values[i];
  Managed<long long> sums(threads);
  Managed<uintptr_t> misses(1, 0);
  malloc_sum_kernel<<<3, 32>>>(in.data(), sums.data(), per_thread, misses.data());
  ASSERT_EQ(finish(), "");
  for (int t = 0; t < threads; ++t) {
    long long expected = 0;
    for (int i = 0; i < per_thread; ++i) expected += values[t * per_thread + i];
    EXPECT_EQ(sums[t], expected) << "thread " << t;
  }
  EXPECT_EQ(*misses, 0u);  // 16-byte aligned, as the guide promises
}

// One thread allocates for the block, the others use it after a barrier (the guide's pattern).
__global__ void shared_block_kernel(const int* in, int* out) {
  __shared__ int* block_data;
  if (threadIdx.x == 0) block_data = static_cast<int*>(std::malloc(blockDim.x * sizeof(int)));
  __syncthreads();
  block_data[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x] * 3;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = block_data[blockDim.x - 1 - threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) std::free(block_data);
}

TEST(DeviceHeap, ABlockAllocatedByOneThreadServesTheBlock) {
  const std::vector<int> values = random_ints(128);
  Managed<int> in(128), out(128, 0);
  for (int i = 0; i < 128; ++i) in[i] = values[i];
  shared_block_kernel<<<2, 64>>>(in.data(), out.data());
  ASSERT_EQ(finish(), "");
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 64; ++t) EXPECT_EQ(out[b * 64 + t], values[b * 64 + 63 - t] * 3);
}

// ---- new / delete -------------------------------------------------------------------------------
struct Counted {
  int value;
  int* live;
  __device__ Counted(int v, int* l) : value(v), live(l) { atomicAdd(live, 1); }
  __device__ ~Counted() { atomicSub(live, 1); }
};

struct Shape {
  __host__ __device__ virtual ~Shape() {}
  __host__ __device__ virtual long long area() const = 0;
};
struct Rect : Shape {
  int w, h;
  __host__ __device__ Rect(int w_, int h_) : w(w_), h(h_) {}
  __host__ __device__ long long area() const override { return static_cast<long long>(w) * h; }
};

__global__ void new_delete_kernel(const int* in, long long* out, int* live, int* live_after_new) {
  const int t = threadIdx.x;
  Counted* one = new Counted(in[t], live);
  Counted* many = new Counted[3]{{in[t] + 1, live}, {in[t] + 2, live}, {in[t] + 3, live}};
  int* plain = new int[4];
  for (int i = 0; i < 4; ++i) plain[i] = in[t] * i;
  Shape* shape = new Rect(in[t], 7);
  __syncthreads();
  if (t == 0) *live_after_new = *live;
  __syncthreads();
  out[t] = one->value + many[0].value + many[1].value + many[2].value + plain[3] + shape->area();
  delete one;
  delete[] many;
  delete[] plain;
  delete shape;  // through the base: the virtual destructor, the most-derived object freed
}

TEST(DeviceHeap, NewAndDeleteBuildAndDestroyObjects) {
  const int threads = 32;
  std::vector<int> values = random_ints(threads);
  for (int& v : values) v %= 10000;
  Managed<int> in(threads), live(1, 0), live_after_new(1, 0);
  for (int i = 0; i < threads; ++i) in[i] = values[i];
  Managed<long long> out(threads, 0);
  new_delete_kernel<<<1, threads>>>(in.data(), out.data(), live.data(), live_after_new.data());
  ASSERT_EQ(finish(), "");
  EXPECT_EQ(*live_after_new, 4 * threads);  // every constructor ran
  EXPECT_EQ(*live, 0);                      // and every destructor
  for (int t = 0; t < threads; ++t) {
    const long long v = values[t];
    EXPECT_EQ(out[t], v + (v + 1) + (v + 2) + (v + 3) + 3 * v + 7 * v) << "thread " << t;
  }
}

// The host side of a __host__ __device__ function keeps the host's new, delete, malloc and free.
__host__ __device__ long long build_and_measure(int w, int h) {
  Shape* shape = new Rect(w, h);
  const long long area = shape->area();
  delete shape;
  int* scratch = static_cast<int*>(malloc(sizeof(int)));
  *scratch = w;
  const int kept = *scratch;
  free(scratch);
  return area + kept;
}

TEST(DeviceHeap, HostSideOfHostDeviceFunctionsUsesTheHostHeap) { EXPECT_EQ(build_and_measure(6, 7), 48); }

// ---- The heap's size ----------------------------------------------------------------------------
__global__ void exhaust_kernel(size_t block_bytes, int* count, int* null_seen) {
  for (int i = 0; i < 1000; ++i) {
    if (malloc(block_bytes) == nullptr) {
      *null_seen = 1;
      return;
    }
    ++*count;  // never freed: a leak is no error
  }
}

TEST(DeviceHeap, LimitSizesTheHeapAndMallocReturnsNullWhenFull) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  size_t limit = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize), cudaSuccess);
  EXPECT_EQ(limit, 8u << 20);  // the documented default
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1u << 20), cudaSuccess);
  {  // freed before cudaDeviceReset frees it
    Managed<int> count(1, 0), null_seen(1, 0);
    exhaust_kernel<<<1, 1>>>(64u << 10, count.data(), null_seen.data());
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*null_seen, 1);
    // 64 KiB blocks (and the 16 bytes kept between blocks) in 1 MiB: 15 fit.
    EXPECT_EQ(*count, 15);
  }
  // Fixed once a kernel has used the heap.
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 2u << 20), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize), cudaSuccess);
  EXPECT_EQ(limit, 1u << 20);
  // cudaDeviceReset frees the heap and the limit may change again.
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 2u << 20), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

__global__ void too_big_kernel(int* got) { *got = malloc(size_t{64} << 20) != nullptr; }

TEST(DeviceHeap, AnAllocationLargerThanTheHeapFails) {
  Managed<int> got(1, -1);
  too_big_kernel<<<1, 1>>>(got.data());
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(*got, 0);
}

// ---- memcheck on the heap -----------------------------------------------------------------------
// Overruns and uses after free are seen through the access instrumentation, which nvcc-sim
// leaves out under ASan (AddressSanitizer's checks take its place; sim/test/CMakeLists.txt):
// those two run in the other presets. Double and foreign frees go through the heap: every preset.
#if !defined(__SANITIZE_ADDRESS__)
__global__ void heap_overrun_kernel(int n) {
  int* p = static_cast<int*>(malloc(10 * sizeof(int)));
  p[n] = 1;
  free(p);
}

TEST(DeviceHeapMemcheck, AnOverrunOfAHeapBlockIsReported) {
  heap_overrun_kernel<<<1, 1>>>(9);
  EXPECT_EQ(finish(), "");  // the last element: fine
  heap_overrun_kernel<<<1, 1>>>(10);
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "out of bounds: it runs 4 bytes past the end of a 40 bytes device-heap block")) << message;
}

__global__ void use_after_free_kernel(int* out, int read_after_free) {
  int* p = new int(41);
  *p += 1;
  *out = *p;
  delete p;
  if (read_after_free) *out = *p;
}

TEST(DeviceHeapMemcheck, AUseAfterFreeIsReported) {
  Managed<int> out(1, 0);
  use_after_free_kernel<<<1, 1>>>(out.data(), 0);
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(*out, 42);
  use_after_free_kernel<<<1, 1>>>(out.data(), 1);
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "use after free: it lies in a 4 bytes device-heap block")) << message;
  EXPECT_TRUE(has(message, "illegal device-heap read of 4 bytes")) << message;
}
#endif  // !__SANITIZE_ADDRESS__

__global__ void double_free_kernel() {
  void* p = malloc(24);
  free(p);
  free(p);
}

TEST(DeviceHeapMemcheck, ADoubleFreeIsReported) {
  double_free_kernel<<<1, 1>>>();
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "double free")) << message;
  EXPECT_TRUE(has(message, "24 bytes")) << message;
}

__global__ void free_foreign_kernel(float* p) { free(p); }

TEST(DeviceHeapMemcheck, FreeingCudaMallocMemoryInAKernelIsReported) {
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  free_foreign_kernel<<<1, 1>>>(p);
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "the device heap did not allocate")) << message;
  cudaFree(p);
}

// Blocks allocated in one launch are live in the next (the heap outlives kernels).
__global__ void allocate_kernel(int** slot, int value) {
  *slot = static_cast<int*>(malloc(sizeof(int)));
  **slot = value;
}
__global__ void read_and_free_kernel(int** slot, int* out) {
  *out = **slot;
  free(*slot);
}

TEST(DeviceHeap, BlocksOutliveTheKernelThatAllocatedThem) {
  const int value = random_ints(1)[0];
  Managed<int*> slot(1, nullptr);
  Managed<int> out(1, 0);
  allocate_kernel<<<1, 1>>>(slot.data(), value);
  read_and_free_kernel<<<1, 1>>>(slot.data(), out.data());
  ASSERT_EQ(finish(), "");
  EXPECT_EQ(*out, value);
}

}  // namespace
