// Tests of what the simulated GPU checks and how it schedules (sim/checks.cpp, sim/executor.cpp):
// every hazard a GPU would hide or fault on must be a fault here (or a visibly wrong result), with
// a message that names the kernel, block, thread(s), address and source line; correct code must
// run under every schedule. Kernels are plain CUDA, built by nvcc-sim.
#undef NDEBUG  // assert() in a kernel is tested here, in every build type
#include <cassert>
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sim/device.h"
#include "sim/sim.h"
#include "sim/test/launch_result.h"
#include "sim/test/managed.h"

namespace sim = blockscope::sim;
using blockscope::sim::test::Managed;

namespace {

using blockscope::sim::test::finish;
using blockscope::sim::test::has;

size_t occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Runs a test body under a schedule and checks, restoring the defaults after.
class Setting {
 public:
  Setting(const char* schedule, const char* checks = "all") {
    std::string error;
    sim::Schedule s;
    sim::Checks c;
    EXPECT_TRUE(sim::parse_schedule(schedule, &s, &error)) << error;
    EXPECT_TRUE(sim::parse_checks(checks, &c, &error)) << error;
    sim::set_schedule(s);
    sim::set_checks(c);
  }
  ~Setting() {
    sim::set_schedule(sim::Schedule{});
    sim::set_checks(sim::Checks{});
  }
};

// ---- Schedules -------------------------------------------------------------------------------------
__global__ void order_kernel(int* ticket, int* order_of_thread, int* order_of_block) {
  const int t = atomicAdd(ticket, 1);  // the order in which threads get here
  order_of_thread[blockIdx.x * blockDim.x + threadIdx.x] = t;
  if (threadIdx.x == 0) order_of_block[blockIdx.x] = atomicAdd(ticket + 1, 1);
}

struct Order {
  std::vector<int> threads, blocks;
};

Order order_under(const char* schedule) {
  Setting setting(schedule);
  Managed<int> ticket(2, 0), threads(4 * 64, -1), blocks(4, -1);
  order_kernel<<<4, 64>>>(ticket.data(), threads.data(), blocks.data());
  EXPECT_EQ(finish(), "");
  return Order{threads.vector(), blocks.vector()};
}

TEST(Schedules, DecideTheOrderOfThreadsAndBlocks) {
  const Order inorder = order_under("inorder"), reverse = order_under("reverse");
  const Order random = order_under("random:42"), again = order_under("random:42"), other = order_under("random:43");
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(inorder.blocks[b], b);
    EXPECT_EQ(reverse.blocks[b], 3 - b);
    for (int t = 0; t < 64; ++t) {
      EXPECT_EQ(inorder.threads[b * 64 + t], b * 64 + t);
      EXPECT_EQ(reverse.threads[b * 64 + t], (3 - b) * 64 + 63 - t);
    }
  }
  EXPECT_NE(random.threads, inorder.threads);
  EXPECT_NE(random.threads, reverse.threads);
  EXPECT_EQ(random.threads, again.threads);  // a seed replays the run
  EXPECT_NE(random.threads, other.threads);
  std::vector<int> sorted = random.threads;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(sorted[i], i);  // every thread ran once
}

TEST(Schedules, ParseAndNameThemselves) {
  sim::Schedule s;
  std::string error;
  ASSERT_TRUE(sim::parse_schedule("random:7", &s, &error));
  EXPECT_EQ(sim::schedule_name(s), "random:7");
  EXPECT_FALSE(sim::parse_schedule("random:x", &s, &error));
  EXPECT_TRUE(has(error, "non-negative integer")) << error;
  EXPECT_FALSE(sim::parse_schedule("backwards", &s, &error));
  EXPECT_TRUE(has(error, "inorder, reverse, random")) << error;
  sim::Checks c;
  EXPECT_FALSE(sim::parse_checks("race,speed", &c, &error));
  EXPECT_TRUE(has(error, "'speed' is not a check")) << error;
}

// A non-atomic read-modify-write of one shared counter, with other memory accesses between the
// read and the write: with the checks off (what a GPU does), a random schedule switches threads
// in between and loses updates; in order, a thread runs to its next barrier and none are lost.
__global__ void lost_update_kernel(int* out, int* scratch) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  const int seen = count;
  for (int k = 0; k < 64; ++k) scratch[threadIdx.x * 64 + k] = k;
  count = seen + 1;
  __syncthreads();
  if (threadIdx.x == 0) *out = count;
}

TEST(Schedules, RandomPreemptionMakesALostUpdateVisible) {
  Managed<int> out(1, -1), scratch(256 * 64, 0);
  {
    Setting setting("inorder", "none");
    lost_update_kernel<<<1, 256>>>(out.data(), scratch.data());
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*out, 256);
  }
  {
    Setting setting("random:5", "none");
    lost_update_kernel<<<1, 256>>>(out.data(), scratch.data());
    EXPECT_EQ(finish(), "");
    EXPECT_LT(*out, 256);
  }
  Setting setting("inorder");  // and with the race check on, it is a fault under any schedule
  lost_update_kernel<<<1, 256>>>(out.data(), scratch.data());
  EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "shared-memory race"));
}

// ---- The race check --------------------------------------------------------------------------------
__global__ void neighbour_kernel(const int* in, int* out, bool barrier) {
  __shared__ int s[128];
  s[threadIdx.x] = in[threadIdx.x];
  if (barrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % 128];
}

TEST(RaceCheck, AMissingBarrierIsReportedUnderEverySchedule) {
  Managed<int> in(128, 3), out(128, 0);
  for (const char* schedule : {"inorder", "reverse", "random:1", "random:2"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    neighbour_kernel<<<1, 128>>>(in.data(), out.data(), false);
    const std::string message = finish(cudaErrorLaunchFailure);
    EXPECT_TRUE(has(message, "kernel neighbour_kernel, block (0,0,0), thread (")) << message;
    EXPECT_TRUE(has(message, "shared-memory race (")) << message;
    EXPECT_TRUE(has(message, "`s` (")) << message;
    // Where `s` is declared, and the source lines of both accesses.
    EXPECT_EQ(occurrences(message, "checks_test.cu:"), 3u) << message;
    neighbour_kernel<<<1, 128>>>(in.data(), out.data(), true);
    EXPECT_EQ(finish(), "");
  }
}

// A 2-byte struct copied into shared memory: GCC reports the store before the load that feeds
// it, so the store has not happened at the next access; it must still be race-checked.
__global__ void half_copy_kernel(const __half* in, float* out) {
  __shared__ __half t[64];
  if (threadIdx.x == 0) t[0] = in[1];
  if (threadIdx.x == 32) out[0] = __half2float(t[0]);  // another warp, no barrier
}

TEST(RaceCheck, AStoreReportedBeforeTheLoadFeedingItIsStillChecked) {
  Managed<__half> in(8, __float2half(2.0f));
  Managed<float> out(1, 0.0f);
  for (const char* schedule : {"inorder", "reverse"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    half_copy_kernel<<<1, 64>>>(in.data(), out.data());
    const std::string message = finish(cudaErrorLaunchFailure);
    EXPECT_TRUE(has(message, "shared-memory race (")) << message;
  }
}

__global__ void two_writers_kernel(int* out, int same) {
  __shared__ int cell;
  if (threadIdx.x < 2) cell = same ? 7 : static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = cell;
}

// Two threads writing one address: a hazard when the values differ; the same value is benign.
TEST(RaceCheck, WriteAfterWriteWithDifferentValues) {
  Managed<int> out(32, 0);
  two_writers_kernel<<<1, 32>>>(out.data(), 0);
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "write after write, racecheck's WAW hazard")) << message;
  EXPECT_TRUE(has(message, "thread (1,0,0)")) << message;
  EXPECT_TRUE(has(message, "thread (0,0,0)")) << message;
  two_writers_kernel<<<1, 32>>>(out.data(), 1);
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(out[5], 7);
}

__global__ void warp_exchange_kernel(int* out, bool syncwarp) {
  __shared__ int s[32];
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  if (syncwarp) __syncwarp();
  out[threadIdx.x] = s[threadIdx.x ^ 1];
}

// Threads of one warp are not in lockstep (Volta and later): only __syncwarp orders them.
TEST(RaceCheck, SyncwarpOrdersTheLanesOfAWarp) {
  Managed<int> out(32, -1);
  warp_exchange_kernel<<<1, 32>>>(out.data(), true);
  EXPECT_EQ(finish(), "");
  for (int l = 0; l < 32; ++l) EXPECT_EQ(out[l], l ^ 1);
  warp_exchange_kernel<<<1, 32>>>(out.data(), false);
  EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "shared-memory race"));
}

__global__ void global_neighbour_kernel(int* data) {
  data[threadIdx.x] = static_cast<int>(threadIdx.x) * 3;
  data[threadIdx.x] += data[(threadIdx.x + 1) % blockDim.x];  // another thread's element, no barrier
}

TEST(RaceCheck, GlobalMemoryBetweenThreadsOfABlock) {
  Managed<int> data(64, 0);
  global_neighbour_kernel<<<1, 64>>>(data.data());
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "global-memory race")) << message;
  EXPECT_TRUE(has(message, "cudaMallocManaged allocation of 256 bytes")) << message;
}

__global__ void atomic_count_kernel(int* out) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  atomicAdd(&count, 1);
  __syncthreads();
  if (threadIdx.x == 0) *out = count;
}

TEST(RaceCheck, AtomicsAreNotRaces) {
  Managed<int> out(1, 0);
  for (const char* schedule : {"inorder", "random:9"}) {
    Setting setting(schedule);
    atomic_count_kernel<<<1, 256>>>(out.data());
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*out, 256);
  }
}

// ---- Memcheck ------------------------------------------------------------------------------------------
__global__ void vector_load_kernel(const float* in, float* out, int offset) {
  const float4 v = *reinterpret_cast<const float4*>(in + offset);
  out[threadIdx.x] = v.x + v.w;
}

TEST(Memcheck, AMisalignedVectorAccessFaults) {
  Managed<float> in(64, 1.0f), out(32, 0.0f);
  vector_load_kernel<<<1, 32>>>(in.data(), out.data(), 4);
  EXPECT_EQ(finish(), "");
  vector_load_kernel<<<1, 32>>>(in.data(), out.data(), 1);
  const std::string message = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(message, "misaligned 16-byte read at ")) << message;
  EXPECT_TRUE(has(message, "checks_test.cu:")) << message;
  EXPECT_TRUE(has(message, "4 bytes past a multiple of 16")) << message;
}

// A byte array cleared as 32-bit words (as NVIDIA's histogram64 sample does): fine when the
// array is declared 4-aligned, a misaligned access when it is declared as bytes only.
template <bool kAligned>
__global__ void clear_bytes_as_words_kernel(unsigned* out) {
  __shared__ unsigned char bytes[128];
  __shared__ __align__(4) unsigned char aligned_bytes[128];
  unsigned char* target = kAligned ? aligned_bytes : bytes;
  reinterpret_cast<unsigned*>(target)[threadIdx.x] = 0;
  __syncthreads();
  out[threadIdx.x] = target[threadIdx.x * 4];
}

TEST(Memcheck, AByteArrayAccessedAsWordsMustBeDeclaredAligned) {
  Managed<unsigned> out(32, 1);
  clear_bytes_as_words_kernel<true><<<1, 32>>>(out.data());
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(out[31], 0u);
  clear_bytes_as_words_kernel<false><<<1, 32>>>(out.data());
  const std::string message = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(message, "misaligned 4-byte write")) << message;
  EXPECT_TRUE(has(message, "`bytes` is declared with alignment 1 only")) << message;
  EXPECT_TRUE(has(message, "declare it __align__(4)")) << message;
}

__global__ void past_the_end_kernel(const float* in, float* out, int n) { out[threadIdx.x] = in[threadIdx.x + n - 31]; }

TEST(Memcheck, AReadOnePastAnAllocationFaults) {
  float* in = nullptr;
  ASSERT_EQ(cudaMalloc(&in, 100 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(in, 0, 100 * sizeof(float)), cudaSuccess);  // initcheck: written
  Managed<float> out(32, 0.0f);
  past_the_end_kernel<<<1, 32>>>(in, out.data(), 99);
  EXPECT_EQ(finish(), "");
  past_the_end_kernel<<<1, 32>>>(in, out.data(), 100);
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "thread (31,0,0)")) << message;
  EXPECT_TRUE(has(message, "just past the end of a 400 bytes allocation")) << message;
  cudaFree(in);
}

__global__ void host_memory_kernel(int* p) { *p = 1; }

TEST(Memcheck, HostMemoryIsNotDeviceMemory) {
  int on_the_host = 0;
  host_memory_kernel<<<1, 1>>>(&on_the_host);
  EXPECT_TRUE(has(finish(cudaErrorIllegalAddress), "not memory of the simulated GPU"));
  EXPECT_EQ(on_the_host, 0);  // never written
}

__global__ void shared_index_kernel(float* out, int index) {
  __shared__ float first[32];
  __shared__ float second[32];
  first[threadIdx.x] = 1.0f;
  second[threadIdx.x] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = first[index];
}

TEST(Memcheck, AStaticSharedIndexOutOfRangeFaults) {
  Managed<float> out(32, 0.0f);
  shared_index_kernel<<<1, 32>>>(out.data(), 31);
  EXPECT_EQ(finish(), "");
  shared_index_kernel<<<1, 32>>>(out.data(), 32);  // on a GPU, maybe `second`'s first element
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "out-of-bounds shared-memory read of 4 bytes")) << message;
  EXPECT_TRUE(has(message, "just past the end of `first` (")) << message;
}

__global__ void other_device_kernel(float* p) { p[threadIdx.x] = 1.0f; }

TEST(Memcheck, AnotherDevicesMemoryNeedsPeerAccess) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_GE(devices, 2) << "the simulated GPU has two devices by default";
  float* on_one = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on_one, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  other_device_kernel<<<1, 32>>>(on_one);
  const std::string message = finish(cudaErrorIllegalAddress);
  EXPECT_TRUE(has(message, "of device 1's memory")) << message;
  EXPECT_TRUE(has(message, "without peer access")) << message;
  int can = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  EXPECT_EQ(can, 1);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  cudaGetLastError();
  other_device_kernel<<<1, 32>>>(on_one);
  EXPECT_EQ(finish(), "");
  ASSERT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaFree(on_one);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(Memcheck, TurnedOffSomethingWrongGoesUnseen) {
  Setting setting("inorder", "none");
  Managed<float> in(64, 1.0f), out(32, 0.0f);
  vector_load_kernel<<<1, 32>>>(in.data(), out.data(), 1);  // what the hardware would fault on
  EXPECT_EQ(finish(), "");
}

// ---- Shared memory -------------------------------------------------------------------------------------
__global__ void leftover_kernel(unsigned* out) {
  __shared__ unsigned s[64];
  if (blockIdx.x > 0) out[blockIdx.x] = s[threadIdx.x];  // before anything was written
  s[threadIdx.x] = 1234u;
  __syncthreads();
}

TEST(SharedMemory, StaticSharedMemoryIsPoisonedForEveryBlock) {
  Setting setting("inorder", "none");  // the read of unwritten memory is the point here
  Managed<unsigned> out(4, 0);
  leftover_kernel<<<4, 64>>>(out.data());
  EXPECT_EQ(finish(), "");
  for (int b = 1; b < 4; ++b) EXPECT_EQ(out[b], 0xFFFFFFFFu) << b;  // not the previous block's 1234
}

__global__ void big_static_kernel(float* out) {
  __shared__ float a[8192];  // 32 KiB
  __shared__ float b[8192];  // 32 KiB more: 64 KiB, which ptxas refuses
  a[threadIdx.x] = 1.0f;
  b[threadIdx.x] = 2.0f;
  out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

TEST(SharedMemory, MoreThan48KiBOfStaticSharedMemoryIsRefused) {
  Managed<float> out(32, 0.0f);
  big_static_kernel<<<1, 32>>>(out.data());
  const std::string message = finish(cudaErrorLaunchOutOfResources);
  EXPECT_TRUE(has(message, "over the 48 KiB ptxas accepts")) << message;
  EXPECT_TRUE(has(message, "__shared__ b (")) << message;
}

__global__ void alignment_kernel(uintptr_t* out) {
  __shared__ float plain[8];
  __shared__ __align__(16) float aligned[8];
  __shared__ double wide[2];
  if (threadIdx.x == 0) {
    out[0] = reinterpret_cast<uintptr_t>(plain) % 16;
    out[1] = reinterpret_cast<uintptr_t>(aligned) % 16;
    out[2] = reinterpret_cast<uintptr_t>(wide) % 16;
  }
}

// A variable is aligned as declared and no more, so a wider access than it was declared for is
// caught instead of working by luck.
TEST(SharedMemory, VariablesAreAlignedAsDeclaredAndNoMore) {
  Managed<uintptr_t> out(3, 99);
  alignment_kernel<<<1, 32>>>(out.data());
  EXPECT_EQ(finish(), "");
  EXPECT_NE(out[0] % 8, 0u);  // 4-byte aligned, not 8
  EXPECT_EQ(out[1], 0u);
  EXPECT_EQ(out[2], 8u);      // 8-byte aligned, not 16
}

// ---- Progress and resources ------------------------------------------------------------------------------
__global__ void wait_for_later_block_kernel(int* flag) {
  if (blockIdx.x == 0) {
    while (atomicAdd(flag, 0) == 0) {
    }
  } else if (threadIdx.x == 0) {
    atomicExch(flag, 1);
  }
}

// In order, blocks run one at a time: block 0 can never see block 1's store. (A random schedule
// keeps two blocks resident, and there the wait can end, as on a GPU that happens to run both.)
TEST(Progress, ABlockWaitingForALaterBlockIsReportedNotAHang) {
  Setting setting("inorder");
  Managed<int> flag(1, 0);
  wait_for_later_block_kernel<<<2, 32>>>(flag.data());
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "no progress after")) << message;
  EXPECT_TRUE(has(message, "a spin-wait that cannot finish")) << message;
}

// A GPU thread may have up to 512 KiB of local memory; a fiber's stack is 1 MiB.
__global__ void local_array_kernel(int* out, int at) {
  volatile char big[128 << 10];
  big[at] = 1;
  out[threadIdx.x] = big[at];
}

__global__ void deep_stack_kernel(int* out, int at) {
  volatile char big[2 << 20];
  big[at] = 1;
  out[threadIdx.x] = big[at];
}

TEST(Progress, AStackOverflowIsAFaultNamingTheThread) {
  Managed<int> out(4, 0);
  local_array_kernel<<<1, 4>>>(out.data(), (128 << 10) - 1);
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(out[3], 1);
  deep_stack_kernel<<<1, 4>>>(out.data(), 100);
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "kernel deep_stack_kernel, block (0,0,0), thread (")) << message;
  EXPECT_TRUE(has(message, "stack overflow")) << message;
  EXPECT_TRUE(has(message, "BLOCKSCOPE_SIM_STACK_KIB")) << message;
}

__global__ void assert_kernel(int* out) {
  assert(threadIdx.x < 16);
  out[threadIdx.x] = 1;
}

TEST(Progress, AnAssertInAKernelIsCudaErrorAssert) {
  Managed<int> out(32, 0);
  assert_kernel<<<1, 32>>>(out.data());
  const std::string message = finish(cudaErrorAssert);
  EXPECT_TRUE(has(message, "device-side assertion `threadIdx.x < 16' failed")) << message;
}

// ---- CUDA semantics ------------------------------------------------------------------------------------------
__global__ void arch_kernel(int* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDACC__)
  out[0] = __CUDA_ARCH__;
#else
  out[0] = -1;
#endif
}

TEST(Semantics, CudaArchIsAnH200s) {
  Managed<int> out(1, 0);
  arch_kernel<<<1, 1>>>(out.data());
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(*out, 900);
}

__global__ void reduce_match_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x;
  out[0 * 32 + lane] = __reduce_add_sync(0xffffffffu, lane);
  out[1 * 32 + lane] = __reduce_max_sync(0xffffffffu, lane * 3 % 17);
  out[2 * 32 + lane] = static_cast<unsigned>(__reduce_min_sync(0xffffffffu, static_cast<int>(lane) - 20));
  out[3 * 32 + lane] = __reduce_or_sync(0xffffffffu, 1u << (lane % 8));
  out[4 * 32 + lane] = __match_any_sync(0xffffffffu, lane % 4);
  int all = -1;
  out[5 * 32 + lane] = __match_all_sync(0xffffffffu, 5u, &all);
  out[6 * 32 + lane] = static_cast<unsigned>(all);
  out[7 * 32 + lane] = __match_all_sync(0xffffffffu, lane < 31 ? 5u : 6u, &all);
  out[8 * 32 + lane] = static_cast<unsigned>(all);
}

TEST(Semantics, WarpReductionsAndMatch) {
  Managed<unsigned> out(9 * 32, 7);
  reduce_match_kernel<<<1, 32>>>(out.data());
  EXPECT_EQ(finish(), "");
  for (unsigned l = 0; l < 32; ++l) {
    EXPECT_EQ(out[0 * 32 + l], 496u);
    EXPECT_EQ(out[1 * 32 + l], 16u);
    EXPECT_EQ(static_cast<int>(out[2 * 32 + l]), -20);
    EXPECT_EQ(out[3 * 32 + l], 0xFFu);
    EXPECT_EQ(out[4 * 32 + l], 0x11111111u << (l % 4));
    EXPECT_EQ(out[5 * 32 + l], 0xFFFFFFFFu);
    EXPECT_EQ(out[6 * 32 + l], 1u);
    EXPECT_EQ(out[7 * 32 + l], 0u);
    EXPECT_EQ(out[8 * 32 + l], 0u);
  }
}

__device__ int per_device;
__constant__ float constants[2];

__global__ void symbol_kernel(int* out) { out[0] = per_device + static_cast<int>(constants[1]); }
__global__ void constant_writer_kernel() { constants[0] = 1.0f; }

TEST(Semantics, DeviceVariablesHaveACopyPerDevice) {
  Managed<int> out(1, 0);
  for (int device : {0, 1}) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    const int value = 100 * (device + 1);
    const float c[2] = {0.0f, static_cast<float>(device + 1)};
    ASSERT_EQ(cudaMemcpyToSymbol(per_device, &value, sizeof value), cudaSuccess);
    ASSERT_EQ(cudaMemcpyToSymbol(constants, c, sizeof c), cudaSuccess);
  }
  for (int device : {0, 1}) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    symbol_kernel<<<1, 1>>>(out.data());
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*out, 101 * (device + 1)) << "device " << device;
    int back = 0;
    ASSERT_EQ(cudaMemcpyFromSymbol(&back, per_device, sizeof back), cudaSuccess);
    EXPECT_EQ(back, 100 * (device + 1));
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&size, constants), cudaSuccess);
  EXPECT_EQ(size, 2 * sizeof(float));
  int not_a_symbol = 0;
  EXPECT_EQ(cudaMemcpyToSymbol(not_a_symbol, &size, sizeof(int)), cudaErrorInvalidSymbol);
  cudaGetLastError();
  constant_writer_kernel<<<1, 1>>>();
  EXPECT_TRUE(has(finish(cudaErrorIllegalAddress), "to __constant__ variable `constants`"));
}

// ---- Cooperative launches ---------------------------------------------------------------------------------
namespace cg = cooperative_groups;

__global__ void grid_phases_kernel(int* data, int* out) {
  cg::grid_group grid = cg::this_grid();
  const unsigned i = static_cast<unsigned>(grid.thread_rank());
  data[i] = static_cast<int>(i);
  grid.sync();  // every block's writes are visible after this
  out[i] = data[(i + blockDim.x) % grid.size()];
}

TEST(Cooperative, GridSyncNeedsACooperativeLaunch) {
  const int blocks = 4, threads = 64;
  Managed<int> data(blocks * threads, -1), out(blocks * threads, -1);
  grid_phases_kernel<<<blocks, threads>>>(data.data(), out.data());
  EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "not launched with cudaLaunchCooperativeKernel"));
  int* d = data.data();
  int* o = out.data();
  void* args[] = {&d, &o};
  for (const char* schedule : {"inorder", "reverse", "random:3"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    ASSERT_EQ(cudaLaunchCooperativeKernel(grid_phases_kernel, blocks, threads, args), cudaSuccess);
    EXPECT_EQ(finish(), "");
    for (int i = 0; i < blocks * threads; ++i) ASSERT_EQ(out[i], (i + threads) % (blocks * threads)) << i;
  }
  EXPECT_EQ(cudaLaunchCooperativeKernel(grid_phases_kernel, 10000, 1024, args), cudaErrorCooperativeLaunchTooLarge);
  cudaGetLastError();
}

// ---- initcheck ------------------------------------------------------------------------------------------
// A min-reduction over a buffer nothing wrote: on a GPU the answer is whatever the memory held —
// with 0xFF poison (NaN) and fminf even silently right. initcheck reports the first such read.
__global__ void min_kernel(const float* in, float* out, int n) {
  float m = INFINITY;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) m = fminf(m, in[i]);
  for (int offset = 16; offset > 0; offset /= 2) m = fminf(m, __shfl_down_sync(0xffffffffu, m, offset));
  if (threadIdx.x == 0) *out = m;
}

__global__ void fill_kernel(float* out, int n, float value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value + static_cast<float>(i);
}

TEST(Initcheck, AReadOfMemoryNothingWroteIsReported) {
  const int n = 256;
  float* in = nullptr;
  ASSERT_EQ(cudaMalloc(&in, n * sizeof(float)), cudaSuccess);
  Managed<float> out(1, 0.0f);  // managed memory: the host writes it unseen, so it counts as written
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i) + 3.0f;
  ASSERT_EQ(cudaMemcpy(in, host.data(), (n - 1) * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);  // one short
  min_kernel<<<1, 32>>>(in, out.data(), n);
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "kernel min_kernel, block (0,0,0), thread (31,0,0)")) << message;
  EXPECT_TRUE(has(message, "uninitialized global-memory read (initcheck)")) << message;
  EXPECT_TRUE(has(message, "byte +1020 of the allocation")) << message;
  EXPECT_EQ(occurrences(message, "checks_test.cu:"), 2u) << message;  // the read, the cudaMalloc
  // Written by a copy, a memset or a kernel: no report.
  ASSERT_EQ(cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  min_kernel<<<1, 32>>>(in, out.data(), n);
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(out[0], 3.0f);
  float* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, n * sizeof(float)), cudaSuccess);
  fill_kernel<<<2, 128>>>(other, n, 5.0f);
  min_kernel<<<1, 32>>>(other, out.data(), n);
  EXPECT_EQ(finish(), "");
  EXPECT_EQ(out[0], 5.0f);
  float* copy = nullptr;
  ASSERT_EQ(cudaMalloc(&copy, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(copy, 0, sizeof(float)), cudaSuccess);  // only the first element
  ASSERT_EQ(cudaMemcpy(copy + 1, other + 1, (n - 2) * sizeof(float), cudaMemcpyDeviceToDevice), cudaSuccess);
  min_kernel<<<1, 32>>>(copy, out.data(), n);  // the last element is still unwritten
  EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "byte +1020 of the allocation"));
  {
    Setting setting("inorder", "race,memcheck,synccheck,streams");  // initcheck off
    min_kernel<<<1, 32>>>(copy, out.data(), n);
    EXPECT_EQ(finish(), "");
  }
  cudaFree(in);
  cudaFree(other);
  cudaFree(copy);
}

// Atomics count as writes, not reads: an atomicAdd into memory nothing cleared is a wrong count,
// not undefined data, and what it wrote is initialised from then on.
__global__ void atomic_then_read_kernel(int* counter, int* out) {
  atomicMax(counter, static_cast<int>(threadIdx.x));
  __syncthreads();
  if (threadIdx.x == 0) *out = *counter;
}

TEST(Initcheck, AtomicsWrite) {
  int* counter = nullptr;
  ASSERT_EQ(cudaMalloc(&counter, sizeof(int)), cudaSuccess);
  Managed<int> out(1, 0);
  atomic_then_read_kernel<<<1, 64>>>(counter, out.data());
  EXPECT_EQ(finish(), "");
  cudaFree(counter);
}

// ---- synccheck --------------------------------------------------------------------------------------------
// PTX: "barrier{.cta} instruction causes executing thread to wait for all non-exited threads" and,
// of exit, "if the exiting threads are holding up the barrier, the barrier is released". So a
// __syncthreads met by part of a block whose other threads exited is released on a GPU, and here.
__global__ void early_exit_kernel(const int* in, int* out, int n) {
  __shared__ int s[128];
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;
  s[i] = in[i];
  __syncthreads();
  out[i] = s[(i + 1) % n];
}

__global__ void branch_barrier_kernel(int* out) {
  __shared__ int s[64];
  if (threadIdx.x < 16) {  // the other threads skip the barrier and exit
    s[threadIdx.x] = static_cast<int>(threadIdx.x) * 2;
    __syncthreads();
    out[threadIdx.x] = s[15 - threadIdx.x];
  }
}

TEST(Synccheck, ABarrierAfterOtherThreadsExitedIsReleasedAsPtxSays) {
  Managed<int> in(128, 0), out(128, -1);
  for (int i = 0; i < 128; ++i) in[i] = i * 10;
  for (const char* schedule : {"inorder", "reverse", "random:4"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    early_exit_kernel<<<1, 128>>>(in.data(), out.data(), 100);
    EXPECT_EQ(finish(), "");
    for (int i = 0; i < 100; ++i) ASSERT_EQ(out[i], ((i + 1) % 100) * 10) << i;
    branch_barrier_kernel<<<1, 64>>>(out.data());
    EXPECT_EQ(finish(), "");
    for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], (15 - i) * 2) << i;
  }
}

// The CUDA guide's stricter rule (a __syncthreads in conditional code only where the condition is
// the same across the block), opt-in: BLOCKSCOPE_SIM_CHECKS=all,strictsync.
TEST(Synccheck, StrictsyncReportsABarrierTheOthersExitedFrom) {
  Managed<int> in(128, 1), out(128, -1);
  for (const char* schedule : {"inorder", "reverse", "random:4"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule, "all,strictsync");
    branch_barrier_kernel<<<1, 64>>>(out.data());
    const std::string message = finish(cudaErrorLaunchFailure);
    EXPECT_TRUE(has(message, "kernel branch_barrier_kernel, block (0,0,0)")) << message;
    EXPECT_TRUE(has(message, "completed by threads 0-15 while threads 16-63 have exited without reaching it")) << message;
    EXPECT_TRUE(has(message, "checks_test.cu:")) << message;
    early_exit_kernel<<<1, 128>>>(in.data(), out.data(), 128);  // nobody exits early: fine
    EXPECT_EQ(finish(), "");
  }
}

// A shuffle reading a lane that has exited: undefined on a GPU, reported by synccheck.
__global__ void exited_lane_shuffle_kernel(const float* in, float* out, int n, unsigned mask) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;  // lanes n…31 exit
  float v = in[i];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(mask, v, offset);
  if (i == 0) *out = v;
}

TEST(Synccheck, AShuffleReadingAnExitedLaneIsReported) {
  Managed<float> in(32, 1.0f), out(1, 0.0f);
  for (const char* schedule : {"inorder", "reverse", "random:6"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    exited_lane_shuffle_kernel<<<1, 32>>>(in.data(), out.data(), 20, 0xffffffffu);
    const std::string message = finish(cudaErrorLaunchFailure);
    EXPECT_TRUE(has(message, "kernel exited_lane_shuffle_kernel, block (0,0,0), thread (")) << message;
    EXPECT_TRUE(has(message, "__shfl_down_sync at ")) << message;
    EXPECT_TRUE(has(message, "checks_test.cu:")) << message;
    EXPECT_TRUE(has(message, "which has exited) although the mask 0xffffffff names it")) << message;
    exited_lane_shuffle_kernel<<<1, 32>>>(in.data(), out.data(), 32, 0xffffffffu);  // nobody exits
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(out[0], 32.0f);
  }
  // Lanes that do not exist (a block ending in a partial warp) read as 0xFF bytes, unreported:
  // cooperative groups' tiles there name them, and programs discard what such tiles compute.
  exited_lane_shuffle_kernel<<<1, 20>>>(in.data(), out.data(), 20, 0xffffffffu);
  EXPECT_EQ(finish(), "");
  Setting off("inorder", "race,memcheck,initcheck,streams");
  exited_lane_shuffle_kernel<<<1, 32>>>(in.data(), out.data(), 20, 0xffffffffu);
  EXPECT_EQ(finish(), "");
}

// ---- Cross-stream races ---------------------------------------------------------------------------------
__global__ void produce_kernel(int* data, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = i * 7;
}

__global__ void consume_kernel(const int* data, int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = data[i] + 1;
}

struct Streams {
  cudaStream_t a = nullptr, b = nullptr;
  explicit Streams(unsigned flags = cudaStreamDefault) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&a, flags), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&b, flags), cudaSuccess);
  }
  ~Streams() {
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
  }
};

TEST(StreamsCheck, AKernelReadingWhatAnotherStreamWritesUnorderedIsReported) {
  const int n = 1024;
  int *data = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&data, n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, n * sizeof(int)), cudaSuccess);
  Streams s;
  produce_kernel<<<4, 256, 0, s.a>>>(data, n);
  consume_kernel<<<4, 256, 0, s.b>>>(data, out, n);
  const std::string message = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(message, "cross-stream race (read after write): `consume_kernel` on stream ")) << message;
  EXPECT_TRUE(has(message, "of which `produce_kernel` on stream ")) << message;
  EXPECT_TRUE(has(message, "produce_kernel` on stream ")) << message;
  EXPECT_TRUE(has(message, "(first by block ")) << message;
  EXPECT_GE(occurrences(message, "checks_test.cu:"), 2u) << message;  // both kernels' accesses
  // Ordered by an event: fine.
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  produce_kernel<<<4, 256, 0, s.a>>>(data, n);
  ASSERT_EQ(cudaEventRecord(done, s.a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s.b, done, 0), cudaSuccess);
  consume_kernel<<<4, 256, 0, s.b>>>(data, out, n);
  EXPECT_EQ(finish(), "");
  // Ordered by the host waiting for the producer's stream: fine.
  produce_kernel<<<4, 256, 0, s.a>>>(data, n);
  ASSERT_EQ(cudaStreamSynchronize(s.a), cudaSuccess);
  consume_kernel<<<4, 256, 0, s.b>>>(data, out, n);
  EXPECT_EQ(finish(), "");
  // A copy on the other stream that overwrites what a kernel still reads: write after read.
  std::vector<int> host(n, 1);
  consume_kernel<<<4, 256, 0, s.a>>>(data, out, n);
  ASSERT_EQ(cudaMemcpyAsync(data, host.data(), n * sizeof(int), cudaMemcpyHostToDevice, s.b), cudaSuccess);
  const std::string war = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(war, "cross-stream race (write after read): `Memcpy HtoD` on stream ")) << war;
  EXPECT_TRUE(has(war, "of which `consume_kernel` on stream ")) << war;
  // Two streams writing disjoint halves: fine.
  produce_kernel<<<2, 256, 0, s.a>>>(data, n / 2);
  produce_kernel<<<2, 256, 0, s.b>>>(data + n / 2, n / 2);
  EXPECT_EQ(finish(), "");
  {
    Setting off("inorder", "race,memcheck,initcheck,synccheck");
    produce_kernel<<<4, 256, 0, s.a>>>(data, n);
    consume_kernel<<<4, 256, 0, s.b>>>(data, out, n);
    EXPECT_EQ(finish(), "");
  }
  cudaEventDestroy(done);
  cudaFree(data);
  cudaFree(out);
}

// The legacy default stream synchronises with blocking streams (both ways), not with
// non-blocking ones.
TEST(StreamsCheck, TheLegacyStreamOrdersBlockingStreamsOnly) {
  const int n = 256;
  int *data = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&data, n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, n * sizeof(int)), cudaSuccess);
  {
    Streams blocking;
    produce_kernel<<<1, 256, 0, blocking.a>>>(data, n);
    consume_kernel<<<1, 256>>>(data, out, n);  // legacy stream: waits for blocking.a
    produce_kernel<<<1, 256, 0, blocking.b>>>(out, n);  // waits for the legacy stream's consume
    EXPECT_EQ(finish(), "");
  }
  {
    Streams nonblocking(cudaStreamNonBlocking);
    produce_kernel<<<1, 256, 0, nonblocking.a>>>(data, n);
    consume_kernel<<<1, 256>>>(data, out, n);
    EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "`consume_kernel` on the legacy default stream of device 0 reads"));
  }
  cudaFree(data);
  cudaFree(out);
}

// ---- Races between blocks of one launch -----------------------------------------------------------------
// Blocks of one launch are ordered by nothing but atomics, fences, volatile flags and grid
// barriers: a plain read-modify-write of one global value by several blocks is a race (lost
// updates on a GPU, none here in order), the atomic version is not.
__global__ void block_total_kernel(const int* in, int* total, bool atomic) {
  if (threadIdx.x != 0) return;
  if (atomic) {
    atomicAdd(total, in[blockIdx.x]);
  } else {
    *total += in[blockIdx.x];
  }
}

__global__ void halo_kernel(int* data) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  data[i] = static_cast<int>(i);
  if (threadIdx.x == blockDim.x - 1 && blockIdx.x + 1 < gridDim.x) data[i] += data[i + 1];  // the next block's
}

// The threadfence reduction's pattern: partial sums, a fence, a ticket; the last block reads all.
__global__ void last_block_kernel(const int* in, int* partial, unsigned* ticket, int* total) {
  if (threadIdx.x != 0) return;
  partial[blockIdx.x] = in[blockIdx.x] * 2;
  __threadfence();
  if (atomicInc(ticket, gridDim.x) == gridDim.x - 1) {
    int sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
    *total = sum;
  }
}

TEST(RaceCheck, GlobalMemoryBetweenBlocksOfALaunch) {
  Managed<int> in(8, 0), total(1, 0), data(256, 0), partial(8, 0);
  Managed<unsigned> ticket(1, 0u);
  for (int b = 0; b < 8; ++b) in[b] = b + 1;
  for (const char* schedule : {"inorder", "reverse", "random:5"}) {
    SCOPED_TRACE(schedule);
    Setting setting(schedule);
    *total = 0;
    block_total_kernel<<<8, 32>>>(in.data(), total.data(), false);
    const std::string message = finish(cudaErrorLaunchFailure);
    EXPECT_TRUE(has(message, "global-memory race between blocks (")) << message;
    EXPECT_TRUE(has(message, "kernel block_total_kernel, block (")) << message;
    EXPECT_TRUE(has(message, " thread (0,0,0)")) << message;
    EXPECT_GE(occurrences(message, "checks_test.cu:"), 2u) << message;  // both blocks' accesses
    *total = 0;
    block_total_kernel<<<8, 32>>>(in.data(), total.data(), true);
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*total, 36);
    halo_kernel<<<4, 64>>>(data.data());
    EXPECT_TRUE(has(finish(cudaErrorLaunchFailure), "global-memory race between blocks (")) << schedule;
    *ticket = 0;
    last_block_kernel<<<8, 32>>>(in.data(), partial.data(), ticket.data(), total.data());
    EXPECT_EQ(finish(), "");
    EXPECT_EQ(*total, 72);
  }
}

// A launch touches more global memory than the race check tracks at once (4 MiB): the shadow's
// pages are handed back and reused for other addresses while the launch, and the blocks' epochs,
// go on. The grid's first thread writes all of `a`; its last then reads all of `b`, which nothing
// writes: a reused page still holding `a`'s cells would say the first thread (in one block) or
// block (in two) wrote it. `plant`: then every thread writes its element of `c` and reads its
// neighbour's in the block with no barrier, a race to be seen after the reuse.
__global__ void sweep_kernel(int* a, const int* b, int* c, int n, int salt, int* sums, bool plant) {
  const unsigned t = threadIdx.x, first = blockIdx.x * blockDim.x;
  int s = 0;
  if (first + t == 0) {
    for (int i = 0; i < n; ++i) a[i] = i + salt;  // new values: a store of the old ones is no access
  } else if (first + t == gridDim.x * blockDim.x - 1) {
    for (int i = 0; i < n; ++i) s += b[i];
  }
  if (plant) {
    c[first + t] = salt;
    s += c[first + (t + 1) % blockDim.x];
  }
  sums[first + t] = s;  // no atomic: it would order the blocks
}

TEST(RaceCheck, ShadowPagesReusedForOtherAddressesHoldNoStaleRecords) {
  constexpr int kN = 5 << 18;  // 5 MiB of ints per array: more than is tracked
  Managed<int> a(kN, 0), b(kN, 1), c(64, 0), sums(64, 0);
  int salt = 0;
  for (const char* schedule : {"inorder", "random:3"}) {
    for (const unsigned blocks : {1u, 2u}) {
      SCOPED_TRACE(std::string(schedule) + ", blocks " + std::to_string(blocks));
      Setting setting(schedule);
      sweep_kernel<<<blocks, 64 / blocks>>>(a.data(), b.data(), c.data(), kN, ++salt, sums.data(), false);
      EXPECT_EQ(finish(), "");
      EXPECT_EQ(sums[63], kN);
      sweep_kernel<<<blocks, 64 / blocks>>>(a.data(), b.data(), c.data(), kN, ++salt, sums.data(), true);
      const std::string message = finish(cudaErrorLaunchFailure);
      EXPECT_TRUE(has(message, "global-memory race (")) << message;
      EXPECT_TRUE(has(message, "allocation of 256 bytes")) << message;
    }
  }
}

}  // namespace
