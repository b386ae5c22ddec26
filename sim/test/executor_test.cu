// Tests of the sim's kernel executor and prelude (sim/executor.cpp, warp_intrinsics.cpp,
// kernel_prelude.h): kernels written as in any .cu, launched with <<<>>> and run by
// cudaDeviceSynchronize. Expected values come from the CUDA programming guide's definitions,
// computed here independently of the sim.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/device.h"
#include "sim/sim.h"
#include "sim/test/managed.h"

namespace sim = blockscope::sim;
using blockscope::sim::test::Managed;

namespace {

// Launches on the legacy stream and runs it; returns the sync's error.
template <typename... Params, typename... Args>
cudaError_t run(const char* /*name*/, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args... args) {
  kernel<<<grid, block, smem>>>(args...);
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) return launch;
  return cudaDeviceSynchronize();
}

// Runs a kernel that must fault; returns the fault's message.
template <typename... Params, typename... Args>
std::string fault_of(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) {
  const cudaError_t error = run(name, kernel, grid, block, 0, args...);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // asynchronous errors reach the last error
  return cudaGetErrorString(error);
}

// ---- Barriers and shared memory ---------------------------------------------------------------
__global__ void block_sum_kernel(const int* in, int* out) {
  __shared__ int partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST(Executor, BlockReductionThroughSharedMemory) {
  const int blocks = 5, threads = 256;
  Managed<int> in(blocks * threads), out(blocks, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 97) - 40;
  ASSERT_EQ(run("block_sum_kernel", block_sum_kernel, blocks, threads, 0, in.data(), out.data()), cudaSuccess);
  for (int b = 0; b < blocks; ++b) {
    int expected = 0;
    for (int t = 0; t < threads; ++t) expected += in[b * threads + t];
    EXPECT_EQ(out[b], expected) << "block " << b;
  }
}

__global__ void barrier_reduce_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  out[0] = __syncthreads_count(t % 3 == 0);
  out[1] = __syncthreads_and(t < 1000);
  out[2] = __syncthreads_and(t != 17);
  out[3] = __syncthreads_or(t == 99);
  out[4] = __syncthreads_or(t > 5000);
}

TEST(Executor, SyncthreadsCountAndOr) {
  Managed<int> out(5, -1);
  ASSERT_EQ(run("barrier_reduce_kernel", barrier_reduce_kernel, 1, 100, 0, out.data()), cudaSuccess);
  EXPECT_EQ(out.vector(), (std::vector<int>{34, 1, 0, 1, 0}));
}

__global__ void dynamic_smem_kernel(size_t bytes, int* poisoned, size_t* seen_bytes) {
  auto* smem = static_cast<unsigned char*>(sim::dynamic_shared_memory());
  if (threadIdx.x == 0) {
    int all = 1;
    for (size_t i = 0; i < bytes; ++i) all &= smem[i] == 0xFF;
    poisoned[blockIdx.x] = all;
    seen_bytes[blockIdx.x] = sim::dynamic_shared_bytes();
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) smem[i] = 0;  // the next block must see 0xFF again
}

TEST(Executor, DynamicSharedMemoryIsPoisonedPerBlockWithExactSize) {
  const size_t bytes = 1000;
  Managed<int> poisoned(3, -1);
  Managed<size_t> seen(3, 0);
  ASSERT_EQ(run("dynamic_smem_kernel", dynamic_smem_kernel, 3, 64, bytes, bytes, poisoned.data(), seen.data()),
            cudaSuccess);
  EXPECT_EQ(poisoned.vector(), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(seen.vector(), (std::vector<size_t>{bytes, bytes, bytes}));
}

// ---- Warp collectives ---------------------------------------------------------------------------
template <typename T>
T value_of(int lane);
template <>
int value_of<int>(int lane) { return lane * 10 + 1; }
template <>
float value_of<float>(int lane) { return lane * 0.5f - 3.0f; }
template <>
double value_of<double>(int lane) { return lane * 1e10 + 0.25; }
template <>
long long value_of<long long>(int lane) { return (1ll << 40) * lane - 7; }
template <>
__half value_of<__half>(int lane) { return __float2half(static_cast<float>(lane) - 8.0f); }
template <>
__nv_bfloat16 value_of<__nv_bfloat16>(int lane) { return __float2bfloat16(static_cast<float>(lane * 2)); }
template <>
__half2 value_of<__half2>(int lane) { return __floats2half2_rn(static_cast<float>(lane), static_cast<float>(-lane)); }

template <typename T>
bool same_bits(const T& a, const T& b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// out[4 * lane + v]: idx(src 3), up(2), down(2), xor(5) at the given width.
template <typename T>
__global__ void shuffle_kernel(int width, T* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const T v = value_of<T>(lane);
  out[4 * lane + 0] = __shfl_sync(0xffffffffu, v, 3, width);
  out[4 * lane + 1] = __shfl_up_sync(0xffffffffu, v, 2, width);
  out[4 * lane + 2] = __shfl_down_sync(0xffffffffu, v, 2, width);
  out[4 * lane + 3] = __shfl_xor_sync(0xffffffffu, v, 5, width);
}

// The documented source lanes (CUDA programming guide, warp shuffle functions).
int expected_source(int variant, int lane, int width) {
  const int segment_start = lane / width * width;
  switch (variant) {
    case 0: return segment_start + 3 % width;
    case 1: return lane - segment_start >= 2 ? lane - 2 : lane;
    case 2: return lane - segment_start + 2 < width ? lane + 2 : lane;
    default: return (lane ^ 5) < segment_start + width ? lane ^ 5 : lane;  // earlier segments readable
  }
}

template <typename T>
void check_shuffles() {
  for (int width : {32, 16, 8, 4, 2, 1}) {
    Managed<T> out(4 * 32);
    ASSERT_EQ(run("shuffle_kernel", shuffle_kernel<T>, 1, 32, 0, width, out.data()), cudaSuccess);
    for (int lane = 0; lane < 32; ++lane) {
      for (int variant = 0; variant < 4; ++variant) {
        const T expected = value_of<T>(expected_source(variant, lane, width));
        EXPECT_TRUE(same_bits(out[4 * lane + variant], expected))
            << "type size " << sizeof(T) << " width " << width << " lane " << lane << " variant " << variant;
      }
    }
  }
}

TEST(Executor, ShufflesWithWidthInt) { check_shuffles<int>(); }
TEST(Executor, ShufflesWithWidthFloat) { check_shuffles<float>(); }
TEST(Executor, ShufflesWithWidthDouble) { check_shuffles<double>(); }
TEST(Executor, ShufflesWithWidthLongLong) { check_shuffles<long long>(); }
TEST(Executor, ShufflesWithWidthHalf) { check_shuffles<__half>(); }
TEST(Executor, ShufflesWithWidthBfloat16) { check_shuffles<__nv_bfloat16>(); }
TEST(Executor, ShufflesWithWidthHalf2) { check_shuffles<__half2>(); }

__global__ void warp_sum_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

TEST(Executor, ButterflyReductionGivesEveryLaneTheSum) {
  Managed<float> out(64, -1.0f);
  ASSERT_EQ(run("warp_sum_kernel", warp_sum_kernel, 1, 64, 0, out.data()), cudaSuccess);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], t < 32 ? 496.0f : 1520.0f) << t;  // 0+..+31, 32+..+63
}

__global__ void vote_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  out[0 + lane] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  out[32 + lane] = __any_sync(0xffffffffu, lane == 31);
  out[64 + lane] = __any_sync(0xffffffffu, lane > 40);
  out[96 + lane] = __all_sync(0xffffffffu, lane < 32);
  out[128 + lane] = __all_sync(0xffffffffu, lane != 4);
  // Two halves vote separately, with disjoint masks.
  out[160 + lane] = lane < 16 ? __ballot_sync(0x0000ffffu, lane & 1) : __ballot_sync(0xffff0000u, lane & 1);
}

TEST(Executor, BallotAnyAll) {
  Managed<unsigned> out(192, 7);
  ASSERT_EQ(run("vote_kernel", vote_kernel, 1, 32, 0, out.data()), cudaSuccess);
  unsigned every_third = 0;
  for (int l = 0; l < 32; l += 3) every_third |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(out[l], every_third);
    EXPECT_EQ(out[32 + l], 1u);
    EXPECT_EQ(out[64 + l], 0u);
    EXPECT_EQ(out[96 + l], 1u);
    EXPECT_EQ(out[128 + l], 0u);
    EXPECT_EQ(out[160 + l], l < 16 ? 0x0000aaaau : 0xaaaa0000u);
  }
}

__global__ void syncwarp_halves_kernel(int* data, int* out) {
  const unsigned lane = threadIdx.x;
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  data[lane] = static_cast<int>(lane);
  __syncwarp(half);
  out[lane] = data[lane ^ 1];  // a neighbour in the same half
}

TEST(Executor, SyncwarpWithDivergentHalves) {
  Managed<int> data(32, -1), out(32, -1);
  ASSERT_EQ(run("syncwarp_halves_kernel", syncwarp_halves_kernel, 1, 32, 0, data.data(), out.data()), cudaSuccess);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(out[l], l ^ 1);
}

// ---- Shapes ------------------------------------------------------------------------------------
struct Seen {
  unsigned tx, ty, tz, bx, by, bz, bdx, bdy, bdz, gdx, gdy, gdz;
  unsigned lane;
};

__global__ void shape_kernel(Seen* out) {
  const unsigned block_linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread_linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  // Lane from a ballot: the warp is 32 consecutive linear thread ids.
  const unsigned lanes = __activemask();
  const unsigned below = __ballot_sync(lanes, 1) & ((1u << (thread_linear % 32)) - 1);
  out[block_linear * threads + thread_linear] =
      Seen{threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z, blockDim.x, blockDim.y,
           blockDim.z, gridDim.x, gridDim.y, gridDim.z, static_cast<unsigned>(__popc(below))};
}

TEST(Executor, ThreeDimensionalBlocksAndGrids) {
  const dim3 grid(2, 3, 2), block(4, 3, 5);  // 60 threads: a full warp and a partial one of 28
  const unsigned threads = 60, blocks = 12;
  Managed<Seen> out(threads * blocks);
  ASSERT_EQ(run("shape_kernel", shape_kernel, grid, block, 0, out.data()), cudaSuccess);
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < threads; ++t) {
      const Seen& s = out[b * threads + t];
      EXPECT_EQ(s.tx, t % 4);
      EXPECT_EQ(s.ty, t / 4 % 3);
      EXPECT_EQ(s.tz, t / 12);
      EXPECT_EQ(s.bx, b % 2);
      EXPECT_EQ(s.by, b / 2 % 3);
      EXPECT_EQ(s.bz, b / 6);
      EXPECT_EQ(s.bdx * 100 + s.bdy * 10 + s.bdz, 435u);
      EXPECT_EQ(s.gdx * 100 + s.gdy * 10 + s.gdz, 232u);
      EXPECT_EQ(s.lane, t % 32);
    }
  }
}

__global__ void partial_warp_kernel(unsigned* out) {
  const unsigned t = threadIdx.x;
  out[t] = __activemask();
  if (t >= 32) out[40 + t] = __shfl_sync(0x000000ffu, t * 2, 7);  // lane 7 of warp 1 is thread 39
}

TEST(Executor, PartialWarpHasOnlyItsLanes) {
  Managed<unsigned> out(80, 0);
  ASSERT_EQ(run("partial_warp_kernel", partial_warp_kernel, 1, 40, 0, out.data()), cudaSuccess);
  for (unsigned t = 0; t < 40; ++t) EXPECT_EQ(out[t], t < 32 ? 0xffffffffu : 0xffu) << t;
  for (unsigned t = 32; t < 40; ++t) EXPECT_EQ(out[40 + t], 78u);
}

__global__ void full_mask_in_partial_warp_kernel(unsigned* out) {
  out[threadIdx.x] = __shfl_sync(0xffffffffu, threadIdx.x * 3u, 2);
}

// PTX shfl.sync waits only for non-exited threads of the mask; lanes a partial warp does not have
// are no different (a 32-wide tile in a 40-thread block's second warp).
TEST(Executor, FullMaskInPartialWarpWaitsOnlyForLanesThatExist) {
  Managed<unsigned> out(40, 0);
  ASSERT_EQ(run("full_mask_in_partial_warp_kernel", full_mask_in_partial_warp_kernel, 1, 40, 0, out.data()), cudaSuccess);
  for (unsigned t = 0; t < 40; ++t) EXPECT_EQ(out[t], t < 32 ? 6u : 34u * 3u) << t;
}

// ---- Atomics and spinning ------------------------------------------------------------------------
__global__ void atomics_simple_kernel(int* counter, unsigned* maximum, float* total, int* cas_sum, unsigned* wrapped) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(counter, 2);
  atomicMax(maximum, static_cast<unsigned>((t * 37) % 1000));
  atomicAdd(total, 0.5f);
  __syncthreads();
  int old = *cas_sum, assumed;
  do {
    assumed = old;
    old = atomicCAS(cas_sum, assumed, assumed + t);
  } while (old != assumed);
  atomicInc(wrapped, 9u);
}

TEST(Executor, Atomics) {
  Managed<int> counter(1, 0), cas_sum(1, 0);
  Managed<unsigned> maximum(1, 0), wrapped(1, 0);
  Managed<float> total(1, 0.0f);
  ASSERT_EQ(run("atomics_simple_kernel", atomics_simple_kernel, 4, 128, 0, counter.data(), maximum.data(), total.data(),
                cas_sum.data(), wrapped.data()),
            cudaSuccess);
  EXPECT_EQ(*counter, 1024);
  EXPECT_EQ(*maximum, 999u);  // t = 27 gives 999
  EXPECT_EQ(*total, 256.0f);
  EXPECT_EQ(*cas_sum, 511 * 512 / 2);
  EXPECT_EQ(*wrapped, 512u % 10u);  // atomicInc wraps to 0 after 9
}

// A flag set by another thread of the block, polled with atomics (a plain or volatile read of
// it would race with the write).
__global__ void spin_kernel(int* out) {
  __shared__ int flag;
  if (threadIdx.x == 0) {
    flag = 0;
    out[0] = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    while (atomicAdd(&flag, 0) == 0) __nanosleep(100);  // thread 31 sets it later
    out[0] = atomicAdd(&flag, 0);
  }
  if (threadIdx.x == 31) atomicExch(&flag, 42);
}

TEST(Executor, PollsLetASpinWaitProgress) {
  Managed<int> out(1, -1);
  ASSERT_EQ(run("spin_kernel", spin_kernel, 1, 32, 0, out.data()), cudaSuccess);
  EXPECT_EQ(*out, 42);
}

// ---- Launch limits -------------------------------------------------------------------------------
__global__ void count_kernel(int* counter) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) atomicAdd(counter, 1);
}

TEST(Executor, LaunchLimitsAreTheRuntimes) {
  Managed<int> counter(1, 0);
  EXPECT_EQ(run("count_kernel", count_kernel, 1, 1025, 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run("count_kernel", count_kernel, 1, dim3(1, 1, 65), 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run("count_kernel", count_kernel, 1, dim3(64, 4, 5), 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run("count_kernel", count_kernel, dim3(1, 65536), 32, 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run("count_kernel", count_kernel, dim3(1, 1, 65536), 32, 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run("count_kernel", count_kernel, 0, 32, 0, counter.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(*counter, 0);  // nothing was queued
  EXPECT_EQ(run("count_kernel", count_kernel, dim3(2, 65535, 1), dim3(8, 4, 1), 0, counter.data()), cudaSuccess);
  EXPECT_EQ(*counter, 2 * 65535);
}

__global__ void big_smem_kernel(size_t* seen) {
  if (threadIdx.x == 0) *seen = sim::dynamic_shared_bytes();
}

TEST(Executor, DynamicSharedMemoryOver48KiBNeedsTheAttribute) {
  Managed<size_t> seen(1, 0);
  const size_t bytes = 64 << 10;
  EXPECT_EQ(run("big_smem_kernel", big_smem_kernel, 1, 32, bytes, seen.data()), cudaErrorInvalidValue);
  EXPECT_EQ(*seen, 0u);
  ASSERT_EQ(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
            cudaSuccess);
  EXPECT_EQ(run("big_smem_kernel", big_smem_kernel, 1, 32, bytes, seen.data()), cudaSuccess);
  EXPECT_EQ(*seen, bytes);
  EXPECT_EQ(run("big_smem_kernel", big_smem_kernel, 1, 32, bytes + 1, seen.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (227 << 10) + 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(sim::last_kernel_name(), "big_smem_kernel");
}

// ---- Faults ---------------------------------------------------------------------------------------
// Which thread meets a fault first depends on the schedule: these tests name it, so they run in
// order (the schedules themselves are tested in checks_test.cu).
class ExecutorFaults : public ::testing::Test {
 protected:
  void SetUp() override { sim::set_schedule(sim::Schedule{}); }
};

__global__ void early_exit_kernel(int* out) {
  if (blockIdx.x == 3 && threadIdx.x >= 16) return;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

// PTX `exit`: "if the exiting threads are holding up the barrier, the barrier is released".
TEST(Executor, ExitedThreadsDoNotHoldUpABarrier) {
  Managed<int> out(4, 0);
  ASSERT_EQ(run("early_exit_kernel", early_exit_kernel, 4, 32, 0, out.data()), cudaSuccess);
  EXPECT_EQ(out.vector(), (std::vector<int>{1, 1, 1, 1}));
}

__global__ void barrier_never_met_kernel(int* out) {
  if (threadIdx.x == 31) {
    while (atomicAdd(out, 0) == 0) {  // waits for the others, who wait at the barrier
    }
  }
  __syncthreads();
}

TEST(Executor, ABarrierThatCanNeverBeMetIsAFault) {
  Managed<int> out(1, 0);
  const std::string message = fault_of("barrier_never_met_kernel", barrier_never_met_kernel, 1, 32, out.data());
  EXPECT_NE(message.find("no progress after"), std::string::npos) << message;
  EXPECT_NE(message.find("thread (31,0,0)"), std::string::npos) << message;
}

__global__ void two_barriers_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

TEST_F(ExecutorFaults, ThreadsAtDifferentBarriersAreAFault) {
  const std::string message = fault_of("two_barriers_kernel", two_barriers_kernel, 1, 32);
  EXPECT_NE(message.find("kernel two_barriers_kernel, block (0,0,0), thread (16,0,0)"), std::string::npos) << message;
  EXPECT_NE(message.find("divergent barrier"), std::string::npos) << message;
  EXPECT_NE(message.find("while threads 0-15 wait at __syncthreads at "), std::string::npos) << message;
}

__global__ void mask_disagreement_kernel(int* out) {
  const unsigned lane = threadIdx.x;
  const unsigned mask = lane == 1 ? 0x3u : 0xffffffffu;
  out[lane] = __shfl_xor_sync(mask, static_cast<int>(lane), 1);
}

TEST_F(ExecutorFaults, ShuffleMasksThatDisagreeAreAFault) {
  Managed<int> out(32);
  const std::string message = fault_of("mask_disagreement_kernel", mask_disagreement_kernel, 1, 32, out.data());
  EXPECT_NE(message.find("kernel mask_disagreement_kernel, block (0,0,0), thread (1,0,0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("__shfl_xor_sync with mask 0x00000003 while lane 0 of warp 0 wait at __shfl_xor_sync with "
                         "mask 0xffffffff"),
            std::string::npos)
      << message;
}

__global__ void exited_mask_lane_kernel(int* out) {
  const unsigned lane = threadIdx.x % 32;
  if (threadIdx.x == 64 + 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(lane), 16);
}

// An exited lane of the mask does not hold the shuffle up; reading its value is undefined on a
// GPU and gives 0xFF bytes here (a synccheck fault with the default checks: checks_test.cu).
TEST(Executor, ShuffleDoesNotWaitForAnExitedMaskLane) {
  sim::Checks checks;
  checks.synccheck = false;
  sim::set_checks(checks);
  Managed<int> out(96, 7);
  const cudaError_t status = run("exited_mask_lane_kernel", exited_mask_lane_kernel, 1, 96, 0, out.data());
  sim::set_checks(sim::Checks{});
  ASSERT_EQ(status, cudaSuccess);
  for (int t = 0; t < 96; ++t) {
    if (t == 64 + 5) continue;
    EXPECT_EQ(out[t], t == 64 + 21 ? -1 : (t % 32) ^ 16) << t;
  }
}

__global__ void self_excluded_kernel(int* out) { out[threadIdx.x] = __shfl_sync(0xfffffffeu, 1, 0); }

TEST_F(ExecutorFaults, MaskWithoutTheCallingLaneIsAFault) {
  Managed<int> out(32);
  const std::string message = fault_of("self_excluded_kernel", self_excluded_kernel, 1, 32, out.data());
  EXPECT_NE(message.find("thread (0,0,0)"), std::string::npos) << message;
  EXPECT_NE(message.find("does not include the calling lane 0"), std::string::npos) << message;
}

__global__ void mixed_variants_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = lane < 16 ? __shfl_up_sync(0xffffffffu, lane, 1) : __shfl_down_sync(0xffffffffu, lane, 1);
}

TEST_F(ExecutorFaults, DifferentCollectivesUnderOneMaskAreAFault) {
  Managed<int> out(32);
  const std::string message = fault_of("mixed_variants_kernel", mixed_variants_kernel, 1, 32, out.data());
  EXPECT_NE(message.find("thread (16,0,0)"), std::string::npos) << message;
  EXPECT_NE(message.find("__shfl_down_sync with mask 0xffffffff while lanes 0-15 of warp 0 wait at __shfl_up_sync"),
            std::string::npos)
      << message;
}

struct Counted {
  int* destroyed;
  ~Counted() { atomicAdd(destroyed, 1); }
};

__global__ void throwing_kernel(int* destroyed) {
  Counted local{destroyed};
  if (blockIdx.x == 1 && threadIdx.x == 7) throw std::runtime_error("boom");
  __syncthreads();
}

TEST_F(ExecutorFaults, ExceptionInAThreadEndsTheGridAndUnwindsTheOthers) {
  Managed<int> destroyed(1, 0);
  const std::string message = fault_of("throwing_kernel", throwing_kernel, 3, 32, destroyed.data());
  EXPECT_NE(message.find("kernel throwing_kernel, block (1,0,0), thread (7,0,0) (linear 7, warp 0 lane 7): uncaught "
                         "exception: boom"),
            std::string::npos)
      << message;
  // Block 0: 32 threads; block 1: threads 0-7 at least (0-6 wait at the barrier when 7 throws; the
  // atomic in 7's destructor may let later ones start) and unwound; block 2 never ran.
  EXPECT_GE(*destroyed, 32 + 8);
  EXPECT_LE(*destroyed, 32 + 32);
}

__global__ void trap_kernel() {
  if (threadIdx.y == 1 && blockIdx.y == 2) __trap();
}

TEST_F(ExecutorFaults, TrapNamesKernelBlockAndThread) {
  const std::string message = fault_of("trap_kernel", trap_kernel, dim3(1, 3), dim3(2, 2));
  EXPECT_NE(message.find("kernel trap_kernel, block (0,2,0), thread (0,1,0) (linear 2, warp 0 lane 2): __trap() called"),
            std::string::npos)
      << message;
}

TEST(Executor, BuiltinsOutsideAKernelAreAFault) {
  EXPECT_THROW(sim::current_thread(), sim::Fault);
  EXPECT_THROW(sim::sync_block(), sim::Fault);
}

// The built-ins are variables, as nvcc's: a local of the same name shadows one (llm.c names its
// launch configuration `gridDim`), in host code and in a kernel.
__global__ void shadowed_builtins_kernel(unsigned* out) {
  const unsigned blockDim = 7;  // a local: blockDim.x is not reachable by that name here
  out[blockIdx.x * ::blockDim.x + threadIdx.x] = blockDim * 1000 + gridDim.x * 100 + threadIdx.x;
}

TEST(Executor, LocalsMayShadowTheBuiltInVariables) {
  const dim3 gridDim(3), blockDim(40);  // as host code may name them
  Managed<unsigned> out(120, 0);
  shadowed_builtins_kernel<<<gridDim, blockDim>>>(out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (unsigned i = 0; i < 120; ++i) EXPECT_EQ(out[i], 7000 + 300 + i % 40) << i;
}

__global__ void called_on_the_host_kernel(int* out) { out[threadIdx.x] = 1; }

// A kernel called as a host function (C++ allows it of a pointer; llm.c's permute benchmark does)
// does not run its body with meaningless built-ins: it is a fault naming the kernel.
TEST(Executor, AKernelCalledAsAHostFunctionIsAFault) {
  int out[4] = {0, 0, 0, 0};
  void (*kernel)(int*) = called_on_the_host_kernel;
  try {
    kernel(out);
    ADD_FAILURE() << "no fault";
  } catch (const sim::Fault& fault) {
    EXPECT_NE(std::string(fault.what()).find("__global__ function called_on_the_host_kernel called as a host function"),
              std::string::npos)
        << fault.what();
  }
  EXPECT_EQ(out[0], 0);
}

#if defined(__SANITIZE_ADDRESS__)
__global__ void smem_overrun_kernel(size_t bytes) {
  auto* smem = static_cast<volatile unsigned char*>(sim::dynamic_shared_memory());
  if (threadIdx.x == 0) smem[bytes] = 1;  // one past the launch's dynamic shared memory
}

// Without the access checks (ASan builds), the redzone after the dynamic shared memory is
// poisoned for AddressSanitizer.
TEST(ExecutorDeathTest, AsanSeesADynamicSharedMemoryOverrun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run("smem_overrun_kernel", smem_overrun_kernel, 1, 32, 100, size_t{100}), "use-after-poison");
}
#endif

// ---- Cost ----------------------------------------------------------------------------------------
__global__ void empty_kernel(int* out) {
  if (threadIdx.x == 100000) out[0] = 1;
}

__global__ void barriers_kernel(int rounds) {
  for (int i = 0; i < rounds; ++i) __syncthreads();
}

__global__ void shuffles_kernel(int rounds, float* out) {
  float v = 1.0f;
  for (int i = 0; i < rounds; ++i) v = __shfl_xor_sync(0xffffffffu, v, 1);
  if (v != 1.0f) out[0] = v;
}

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prints what the CI pays; asserts only a generous bound (shared 2-core machines are noisy).
TEST(Executor, CostPerThreadBarrierAndShuffle) {
  Managed<int> sink(1, 0);
  const int blocks = 2048, threads = 256, rounds = 20;
  const double plain = seconds_of([&] { run("empty_kernel", empty_kernel, blocks, threads, 0, sink.data()); });
  const double barriers = seconds_of([&] { run("barriers_kernel", barriers_kernel, blocks / 8, threads, 0, rounds); });
  Managed<float> out(1, 0.0f);
  const double shuffles =
      seconds_of([&] { run("shuffles_kernel", shuffles_kernel, blocks / 8, threads, 0, rounds, out.data()); });
  const double per_thread = plain / (blocks * threads);
  const double per_barrier = (barriers / (blocks / 8 * threads) - per_thread) / rounds;
  const double per_shuffle = (shuffles / (blocks / 8 * threads) - per_thread) / rounds;
  std::printf("[ cost ] per thread %.0f ns, per __syncthreads per thread %.0f ns, per shuffle per lane %.0f ns\n",
              per_thread * 1e9, per_barrier * 1e9, per_shuffle * 1e9);
  EXPECT_LT(per_thread, 5e-6);
  EXPECT_LT(per_barrier, 5e-6);
  EXPECT_LT(per_shuffle, 5e-6);
}

}  // namespace
