// The simulated GPU's counters (sim/counters.cpp) on micro-kernels whose counts are worked out by
// hand here from the rules Nsight Compute's metrics follow: 32-byte sectors of global memory, 32
// banks of 4 bytes in shared memory served in wavefronts (all 32 lanes for accesses up to 4 bytes,
// half-warps for 8, quarter-warps for 16), ldmatrix one 128-byte phase per 8x8 matrix, and the
// occupancy calculator's limits for an sm_90 SM. Every launch is one block of one warp unless
// a test says otherwise, and every buffer starts 256-byte aligned (checked).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_occupancy.h>

#include "ops/common/cuda/tensor_core.cuh"
#include "sim/device.h"
#include "sim/occupancy.h"
#include "sim/sim.h"
#include "sim/test/managed.h"

namespace sim = blockscope::sim;
namespace tc = blockscope::ops::cuda::tensor_core;
using blockscope::sim::test::Managed;

namespace {

using Metrics = std::map<std::string, double>;

// Counts one launch: runs it with counting on and returns its metrics by name.
template <typename... Params, typename... Args>
Metrics count(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args... args) {
  sim::set_counters_enabled(true);
  sim::take_kernel_counters();  // forget earlier launches
  kernel<<<grid, block, smem>>>(args...);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  sim::set_counters_enabled(false);
  const std::vector<sim::KernelCounters> launches = sim::take_kernel_counters();
  EXPECT_EQ(launches.size(), 1u);
  Metrics m;
  if (launches.empty()) return m;
  for (const auto& [name, value] : launches.back().metrics) m[name] = value;
  m["limiter:" + launches.back().occupancy_limiter] = 1;
  return m;
}

const char* const kLdRequests = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
const char* const kLdSectors = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
const char* const kLdEfficiency = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct";
const char* const kStRequests = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
const char* const kStSectors = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
const char* const kShLdInst = "smsp__inst_executed_op_shared_ld.sum";
const char* const kShLdWavefronts = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum";
const char* const kShLdConflicts = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum";
const char* const kShStWavefronts = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum";
const char* const kShStConflicts = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";

// Every buffer: 256-byte aligned (the sector arithmetic below assumes it), filled.
template <typename... T>
void prepare(Managed<T>&... buffers) {
  const auto one = [](auto& buffer) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 256, 0u);
    for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::remove_reference_t<decltype(buffer[0])>>(i % 7);
  };
  (one(buffers), ...);
}

// ---- Global memory -------------------------------------------------------------------------------
__global__ void copy_strided(const float* in, float* out, int stride, int offset) {
  const int i = static_cast<int>(threadIdx.x);
  out[i] = in[i * stride + offset];
}

TEST(Counters, CoalescedLoadAndStore) {
  Managed<float> in(32), out(32);
  prepare(in, out);
  Metrics m = count(copy_strided, 1, 32, 0, in.data(), out.data(), 1, 0);
  // 32 lanes × 4 bytes = 128 contiguous bytes: 4 sectors, every byte used.
  EXPECT_EQ(m[kLdRequests], 1);
  EXPECT_EQ(m[kLdSectors], 4);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 100);
  EXPECT_EQ(m[kStRequests], 1);
  EXPECT_EQ(m[kStSectors], 4);
  EXPECT_EQ(m["sim__memory_lanes_per_inst"], 32);
}

TEST(Counters, StridedLoadsTouchMoreSectors) {
  Managed<float> in(32 * 32), out(32);
  prepare(in, out);
  // Stride 2: lanes cover 256 bytes, half of each sector used: 8 sectors, 50%.
  Metrics m = count(copy_strided, 1, 32, 0, in.data(), out.data(), 2, 0);
  EXPECT_EQ(m[kLdSectors], 8);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 50);
  // Stride 32 floats (128 bytes): a sector per lane, 4 of its 32 bytes used: 32 sectors, 12.5%.
  m = count(copy_strided, 1, 32, 0, in.data(), out.data(), 32, 0);
  EXPECT_EQ(m[kLdRequests], 1);
  EXPECT_EQ(m[kLdSectors], 32);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 12.5);
  EXPECT_EQ(m[kStSectors], 4);  // the store stays coalesced
}

TEST(Counters, OffsetByOneElementStraddlesAFifthSector) {
  Managed<float> in(64), out(32);
  prepare(in, out);
  // Bytes 4..131: sectors 0..4, 128 of 160 bytes used.
  Metrics m = count(copy_strided, 1, 32, 0, in.data(), out.data(), 1, 1);
  EXPECT_EQ(m[kLdSectors], 5);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 80);
}

__global__ void copy_float4(const float4* in, float4* out) { out[threadIdx.x] = in[threadIdx.x]; }

TEST(Counters, SixteenByteVectorsAreOneRequestOfSixteenSectors) {
  Managed<float> in(128), out(128);
  prepare(in, out);
  Metrics m = count(copy_float4, 1, 32, 0, reinterpret_cast<const float4*>(in.data()),
                    reinterpret_cast<float4*>(out.data()));
  EXPECT_EQ(m[kLdRequests], 1);
  EXPECT_EQ(m[kLdSectors], 16);  // 512 bytes
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 100);
  EXPECT_EQ(m[kStSectors], 16);
}

__global__ void broadcast_load(const float* in, float* out) { out[threadIdx.x] = in[5]; }

TEST(Counters, BroadcastIsOneSectorAndItsBytesOnce) {
  Managed<float> in(32), out(32);
  prepare(in, out);
  Metrics m = count(broadcast_load, 1, 32, 0, in.data(), out.data());
  EXPECT_EQ(m[kLdSectors], 1);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 12.5);  // 4 distinct bytes of 32
}

__global__ void even_lanes_load(const float* in, float* out) {
  const unsigned i = threadIdx.x;
  if (i % 2 == 0) out[i] = in[i];
}

TEST(Counters, SparseLanesHalveTheActiveLanes) {
  Managed<float> in(32), out(32);
  prepare(in, out);
  // 16 lanes at bytes 0, 8, …, 120: still 4 sectors, 64 of 128 bytes used.
  Metrics m = count(even_lanes_load, 1, 32, 0, in.data(), out.data());
  EXPECT_EQ(m[kLdRequests], 1);
  EXPECT_EQ(m[kLdSectors], 4);
  EXPECT_DOUBLE_EQ(m[kLdEfficiency], 50);
  EXPECT_EQ(m["sim__memory_lanes_per_inst"], 16);
}

__global__ void divergent_loads(const float* in, float* out) {
  const unsigned i = threadIdx.x;
  float sum = 0;
  if (i < 16) {
    sum = in[i];  // lanes 0-15 load
  } else {
    out[32 + i] = 1;  // lanes 16-31 store: nothing a compiler could merge with the load
  }
  for (unsigned k = 0; k <= i % 2; ++k) sum += in[128 + 32 * k + i];  // odd lanes go round twice
  out[i] = sum;
}

TEST(Counters, DivergentBranchesAndLoopsAreSeparateInstructions) {
  Managed<float> in(256), out(64);
  prepare(in, out);
  Metrics m = count(divergent_loads, 1, 32, 0, in.data(), out.data());
  // Loads: the if's 16 lanes (2 sectors), the loop's first round 32 lanes (4), its second the
  // 16 odd lanes (4 sectors: they are spread over the same 128 bytes).
  EXPECT_EQ(m[kLdRequests], 3);
  EXPECT_EQ(m[kLdSectors], 10);
  // Stores: the else's 16 lanes (bytes 192..255: 2 sectors), the last line's 32 (4).
  EXPECT_EQ(m[kStRequests], 2);
  EXPECT_EQ(m[kStSectors], 6);
  EXPECT_EQ(m["sim__memory_inst_executed"], 5);
  EXPECT_EQ(m["sim__memory_thread_inst_executed"], 16 + 32 + 16 + 16 + 32);
}

__global__ void global_atomics(int* counter) { atomicAdd(&counter[threadIdx.x % 2 * 8], 1); }

TEST(Counters, GlobalAtomicsAreRequestsWithTheirSectors) {
  Managed<int> counter(16);
  prepare(counter);
  Metrics m = count(global_atomics, 1, 32, 0, counter.data());
  EXPECT_EQ(m["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"], 1);
  EXPECT_EQ(m["l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum"], 2);  // bytes 0 and 32
  EXPECT_EQ(m[kLdRequests], 0);
}

// ---- Shared memory ----------------------------------------------------------------------------
// mode 0: row (tile[0][lane]), 1: column (tile[lane][0]), 2: stride 2 (tile[0][2·lane]), 3: broadcast.
template <int kColumns>
__global__ void shared_tile(float* out, int mode) {
  __shared__ float tile[32][kColumns];
  const unsigned i = threadIdx.x;
  // Row by row, the lanes side by side (no per-lane loop a compiler could vectorise).
  for (int r = 0; r < 32; ++r) {
    for (int c = static_cast<int>(i); c < kColumns; c += 32) tile[r][c] = static_cast<float>(r);
  }
  __syncthreads();
  float v = 0;
  switch (mode) {
    case 0: v = tile[0][i]; break;
    case 1: v = tile[i][0]; break;
    case 2: v = tile[0][2 * i]; break;
    default: v = tile[3][7]; break;
  }
  out[i] = v;
}

TEST(Counters, SharedColumnOfAnUnpaddedTileConflictsThirtyOneTimes) {
  Managed<float> out(32);
  prepare(out);
  // tile[lane][0] of float[32][64]: lane l at byte 256·l, bank 0 for every lane, 32 words.
  Metrics m = count(shared_tile<64>, 1, 32, 0, out.data(), 1);
  EXPECT_EQ(m[kShLdInst], 1);
  EXPECT_EQ(m[kShLdWavefronts], 32);
  EXPECT_EQ(m[kShLdConflicts], 31);
}

TEST(Counters, PaddingTheTileRemovesTheConflicts) {
  Managed<float> out(32);
  prepare(out);
  // float[32][33]: lane l at word 33·l, bank l: one wavefront.
  Metrics m = count(shared_tile<33>, 1, 32, 0, out.data(), 1);
  EXPECT_EQ(m[kShLdWavefronts], 1);
  EXPECT_EQ(m[kShLdConflicts], 0);
}

TEST(Counters, SharedRowStrideTwoAndBroadcast) {
  Managed<float> out(32);
  prepare(out);
  Metrics m = count(shared_tile<64>, 1, 32, 0, out.data(), 0);  // row: 32 banks, one word each
  EXPECT_EQ(m[kShLdWavefronts], 1);
  EXPECT_EQ(m[kShLdConflicts], 0);
  m = count(shared_tile<64>, 1, 32, 0, out.data(), 2);  // words 0, 2, …, 62: two per even bank
  EXPECT_EQ(m[kShLdWavefronts], 2);
  EXPECT_EQ(m[kShLdConflicts], 1);
  m = count(shared_tile<64>, 1, 32, 0, out.data(), 3);  // one word for all: a broadcast
  EXPECT_EQ(m[kShLdWavefronts], 1);
  EXPECT_EQ(m[kShLdConflicts], 0);
  // The fill: 32 rows × 2 stores of 32 consecutive words (one per bank): 64 single wavefronts.
  EXPECT_EQ(m["smsp__inst_executed_op_shared_st.sum"], 64);
  EXPECT_EQ(m[kShStWavefronts], 64);
  EXPECT_EQ(m[kShStConflicts], 0);
}

// 8- and 16-byte accesses: lane l reads element stride·l.
template <typename T>
__global__ void shared_wide(float* out, int stride) {
  __shared__ T values[64];
  const unsigned i = threadIdx.x;
  values[i] = T{};
  values[i + 32] = T{};
  __syncthreads();
  const T v = values[stride * i];
  out[i] = reinterpret_cast<const float*>(&v)[0];
}

TEST(Counters, EightByteAccessesAreServedByHalfWarps) {
  Managed<float> out(32);
  prepare(out);
  // float2, consecutive: each half-warp asks for 128 contiguous bytes: 1 wavefront each.
  Metrics m = count(shared_wide<float2>, 1, 32, 0, out.data(), 1);
  EXPECT_EQ(m[kShLdWavefronts], 2);
  EXPECT_EQ(m[kShLdConflicts], 0);
  // Stride 2 (16 bytes apart): lanes l and l+8 of a half-warp share banks 4l%32, 4l%32+1: 2
  // wavefronts per half-warp, 4 in all against the ideal 2 (256 bytes).
  m = count(shared_wide<float2>, 1, 32, 0, out.data(), 2);
  EXPECT_EQ(m[kShLdWavefronts], 4);
  EXPECT_EQ(m[kShLdConflicts], 2);
}

TEST(Counters, SixteenByteAccessesAreServedByQuarterWarps) {
  Managed<float> out(32);
  prepare(out);
  Metrics m = count(shared_wide<float4>, 1, 32, 0, out.data(), 1);  // 4 quarters of 128 bytes
  EXPECT_EQ(m[kShLdWavefronts], 4);
  EXPECT_EQ(m[kShLdConflicts], 0);
  // Stride 2 (32 bytes apart): lanes l and l+4 of a quarter share banks: 2 each, 8 in all.
  m = count(shared_wide<float4>, 1, 32, 0, out.data(), 2);
  EXPECT_EQ(m[kShLdWavefronts], 8);
  EXPECT_EQ(m[kShLdConflicts], 4);
}

__global__ void shared_atomics(int* out) {
  __shared__ int bins[4];
  if (threadIdx.x < 4) bins[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&bins[threadIdx.x % 4], 1);
  __syncthreads();
  if (threadIdx.x < 4) out[threadIdx.x] = bins[threadIdx.x];
}

TEST(Counters, SharedAtomicsAndBarriers) {
  Managed<int> out(4);
  prepare(out);
  Metrics m = count(shared_atomics, 3, 64, 0, out.data());
  // 3 blocks of 2 warps: one shared atomic per warp, two barriers per block.
  EXPECT_EQ(m["smsp__inst_executed_op_shared_atom.sum"], 6);
  EXPECT_EQ(m["sim__block_barriers"], 6);
  EXPECT_EQ(m["sim__warp_barrier_instructions"], 12);
  EXPECT_EQ(out[0], 16);
}

// ---- ldmatrix and mma --------------------------------------------------------------------------
// ldmatrix.x4 over a 32-row tile of 64 halves a row (128 bytes): lane l gives row l's chunk
// `chunk` (16 bytes), XOR-swizzled by the row's index mod 8 when `swizzle` is set.
__global__ void ldmatrix_tile(float* out, int swizzle) {
  __shared__ __align__(128) uint16_t tile[32 * 64];
  const unsigned lane = threadIdx.x;
  for (int c = 0; c < 64; ++c) tile[lane * 64 + c] = static_cast<uint16_t>(c);
  __syncthreads();
  const unsigned chunk = swizzle ? (0u ^ (lane % 8)) : 0u;
  uint32_t r[4];
  tc::ldmatrix_x4(r, &tile[lane * 64 + chunk * 8]);
  out[lane] = static_cast<float>(r[0] & 0xFFFF);
}

TEST(Counters, LdmatrixOfAnUnswizzledTileConflictsEightWays) {
  Managed<float> out(32);
  prepare(out);
  // Each matrix: 8 rows 128 bytes apart, all in banks 0-3: 8 wavefronts; 4 matrices.
  Metrics m = count(ldmatrix_tile, 1, 32, 0, out.data(), 0);
  EXPECT_EQ(m["smsp__inst_executed_op_ldsm.sum"], 1);
  EXPECT_EQ(m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"], 32);
  EXPECT_EQ(m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"], 28);
  // Swizzled: row r's chunk is r mod 8, so the 8 rows of a matrix cover all 32 banks.
  m = count(ldmatrix_tile, 1, 32, 0, out.data(), 1);
  EXPECT_EQ(m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"], 4);
  EXPECT_EQ(m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"], 0);
}

__global__ void two_mmas(float* out) {
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float d[4] = {0, 0, 0, 0};
  tc::mma_m16n8k16_bf16(d, a, b, d);
  tc::mma_m16n8k16_f16(d, a, b, d);
  out[threadIdx.x] = d[0];
}

TEST(Counters, MmasByShapeAndType) {
  Managed<float> out(64);
  prepare(out);
  Metrics m = count(two_mmas, 1, 64, 0, out.data());  // 2 warps × 2 mmas
  EXPECT_EQ(m["smsp__inst_executed_pipe_tensor_op_hmma.sum"], 4);
  EXPECT_EQ(m["sim__mma_m16n8k16_bf16"], 2);
  EXPECT_EQ(m["sim__mma_m16n8k16_f16"], 2);
  EXPECT_EQ(m["sim__tensor_flops"], 4 * 2 * 16 * 8 * 16);
}

__global__ void async_copy(const float4* in, float* out) {
  __shared__ __align__(16) float4 staged[32];
  tc::cp_async_16(&staged[threadIdx.x], &in[threadIdx.x]);
  tc::cp_async_wait_all();
  __syncthreads();
  out[threadIdx.x] = staged[31 - threadIdx.x].x;
}

TEST(Counters, CpAsyncCountsItsGlobalAndSharedSides) {
  Managed<float> in(128), out(32);
  prepare(in, out);
  Metrics m = count(async_copy, 1, 32, 0, reinterpret_cast<const float4*>(in.data()), out.data());
  EXPECT_EQ(m["l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"], 1);
  EXPECT_EQ(m["l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"], 16);
  EXPECT_EQ(m["sim__ldgsts_shared_wavefronts"], 4);
  EXPECT_EQ(m["sim__ldgsts_shared_bank_conflicts"], 0);
}

// ---- Launch statistics and occupancy -------------------------------------------------------------
__global__ void dynamic_smem_kernel(float* out) {
  extern __shared__ float dynamic[];
  dynamic[threadIdx.x] = 1;
  if (blockIdx.x == 0) out[threadIdx.x] = dynamic[threadIdx.x];
}

TEST(Counters, LaunchStatisticsAndOccupancyLimiters) {
  Managed<float> out(1024);
  prepare(out);
  // 256 threads (8 warps), 40 KiB dynamic: (40960 + 1024) per block → 233472 / 41984 = 5 blocks
  // (shared_mem), 40 warps of 64 = 62.5%; 1000 blocks over 5 × 132 → 1.515 waves. This file is
  // built without ptxas's figures: registers unknown, no register limit.
  Metrics m = count(dynamic_smem_kernel, 1000, 256, 40 << 10, out.data());
  EXPECT_EQ(m["launch__grid_size"], 1000);
  EXPECT_EQ(m["launch__block_size"], 256);
  EXPECT_EQ(m["launch__thread_count"], 256000);
  EXPECT_EQ(m.count("launch__registers_per_thread"), 0u);
  EXPECT_EQ(m["launch__shared_mem_per_block_dynamic"], 40960);
  EXPECT_EQ(m["launch__occupancy_limit_shared_mem"], 5);
  EXPECT_EQ(m["launch__occupancy_limit_warps"], 8);
  EXPECT_EQ(m["launch__occupancy_limit_blocks"], 32);
  EXPECT_EQ(m["limiter:shared_mem"], 1);
  EXPECT_EQ(m["sm__maximum_warps_per_active_cycle_pct"], 62.5);
  EXPECT_NEAR(m["launch__waves_per_multiprocessor"], 1000.0 / (5 * 132), 1e-12);
  // 1024 threads and 4 KiB: 2 blocks by warps (shared memory would allow 45), 100%.
  m = count(dynamic_smem_kernel, 1, 1024, 4 << 10, out.data());
  EXPECT_EQ(m["launch__occupancy_limit_warps"], 2);
  EXPECT_EQ(m["limiter:warps"], 1);
  EXPECT_EQ(m["sm__maximum_warps_per_active_cycle_pct"], 100);
}

TEST(Counters, OccupancyRulesByHand) {
  // FlashAttention-2 as the series reads it off the trace: 255 registers × 128 threads. Per warp
  // 255·32 = 8160 → 8192 registers (units of 256): 65536 / 8192 = 8 warps = 2 blocks, 12.5%.
  sim::Occupancy o = sim::theoretical_occupancy(sim::kSm90Limits, 128, 255, 0);
  EXPECT_EQ(o.limit_registers, 2);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_STREQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.occupancy, 0.125);
  // 256 threads × 64 registers: 2048 a warp, 32 warps, 4 blocks of 8 warps: 50%.
  o = sim::theoretical_occupancy(sim::kSm90Limits, 256, 64, 0);
  EXPECT_EQ(o.limit_registers, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  // 33 registers round up to 40 a thread's share of 256 per warp (33·32 = 1056 → 1280): 51 warps,
  // 6 blocks of 8 (48 warps, 75%).
  o = sim::theoretical_occupancy(sim::kSm90Limits, 256, 33, 0);
  EXPECT_EQ(o.limit_registers, 6);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.75);
  // 64 threads, 100 KiB of shared memory: A100 (164 KiB an SM) fits 1, H100 (228 KiB) fits 2.
  EXPECT_EQ(sim::theoretical_occupancy(sim::kSm80Limits, 64, 32, 100 << 10).limit_shared_mem, 1);
  EXPECT_EQ(sim::theoretical_occupancy(sim::kSm90Limits, 64, 32, 100 << 10).limit_shared_mem, 2);
  // 32 threads, tiny: 32 blocks an SM at most (1 warp each): 50%, limited by blocks.
  o = sim::theoretical_occupancy(sim::kSm90Limits, 32, 16, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_STREQ(o.limiter, "blocks");
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  // More shared memory than a block may have: nothing fits.
  EXPECT_EQ(sim::theoretical_occupancy(sim::kSm90Limits, 128, 32, 228 << 10).blocks_per_sm, 0);
  EXPECT_DOUBLE_EQ(sim::waves_per_sm(264, 2, 132), 1.0);
}

// An independent oracle: the CUDA toolkit's own occupancy calculator (cuda_occupancy.h, what
// cudaOccupancyMaxActiveBlocksPerMultiprocessor implements), with the largest shared-memory
// carveout, over a sweep of block sizes, register counts and shared memory.
TEST(Counters, OccupancyAgreesWithTheToolkitsCalculator) {
  for (const bool hopper : {true, false}) {
    const sim::SmLimits& limits = hopper ? sim::kSm90Limits : sim::kSm80Limits;
    cudaOccDeviceProp prop;
    prop.computeMajor = hopper ? 9 : 8;
    prop.computeMinor = 0;
    prop.maxThreadsPerBlock = 1024;
    prop.maxThreadsPerMultiprocessor = 2048;
    prop.regsPerBlock = 65536;
    prop.regsPerMultiprocessor = 65536;
    prop.warpSize = 32;
    prop.sharedMemPerBlock = 48 << 10;
    prop.sharedMemPerMultiprocessor = static_cast<size_t>(limits.smem_per_sm);
    prop.numSms = hopper ? 132 : 108;
    prop.sharedMemPerBlockOptin = static_cast<size_t>(limits.max_smem_per_block);
    prop.reservedSharedMemPerBlock = 1024;
    cudaOccDeviceState state;
    state.carveoutConfig = SHAREDMEM_CARVEOUT_MAX_SHARED;
    int compared = 0;
    for (const int threads : {32, 64, 96, 128, 160, 256, 384, 512, 640, 1024}) {
      for (const int registers : {16, 24, 32, 33, 40, 48, 64, 72, 96, 128, 168, 200, 255}) {
        for (const int smem : {0, 1000, 4096, 12345, 40 << 10, 64 << 10, 100 << 10, 150 << 10}) {
          if (smem > limits.max_smem_per_block) continue;
          cudaOccFuncAttributes attributes;
          attributes.maxThreadsPerBlock = 1024;
          attributes.numRegs = registers;
          attributes.sharedSizeBytes = 0;
          attributes.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
          attributes.maxDynamicSharedSizeBytes = static_cast<size_t>(limits.max_smem_per_block);
          attributes.numBlockBarriers = 1;
          cudaOccResult expected;
          ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&expected, &prop, &attributes, &state, threads,
                                                           static_cast<size_t>(smem)),
                    CUDA_OCC_SUCCESS);
          const sim::Occupancy o = sim::theoretical_occupancy(limits, threads, registers, smem);
          EXPECT_EQ(o.blocks_per_sm, expected.activeBlocksPerMultiprocessor)
              << (hopper ? "sm_90" : "sm_80") << ": " << threads << " threads, " << registers << " registers, "
              << smem << " bytes";
          ++compared;
        }
      }
    }
    EXPECT_GT(compared, 900);
  }
}

// ---- Off, and the file -----------------------------------------------------------------------------
TEST(Counters, NothingIsCountedWhenOff) {
  Managed<float> in(32), out(32);
  prepare(in, out);
  sim::set_counters_enabled(false);
  sim::take_kernel_counters();
  copy_strided<<<1, 32>>>(in.data(), out.data(), 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(sim::take_kernel_counters().empty());
}

// Two launches in order; also the child of FileFromTheEnvironment (which sets the variable, so
// counting is on from the start and the file is written at exit).
TEST(Counters, LaunchesAreKeptInOrder) {
  const bool child = std::getenv("BLOCKSCOPE_SIM_COUNTERS") != nullptr;
  if (!child) sim::set_counters_enabled(true);
  sim::take_kernel_counters();
  Managed<float> in(64), out(32);
  prepare(in, out);
  copy_strided<<<1, 32>>>(in.data(), out.data(), 2, 0);
  broadcast_load<<<dim3(2, 1, 1), dim3(32, 1, 1)>>>(in.data(), out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (child) return;
  sim::set_counters_enabled(false);
  const std::vector<sim::KernelCounters> launches = sim::take_kernel_counters();
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].name, "copy_strided");
  EXPECT_EQ(launches[1].name, "broadcast_load");
  EXPECT_EQ(launches[1].grid.x, 2u);
  EXPECT_NE(sim::counters_json(launches).find("\"name\": \"broadcast_load\", \"grid\": [2, 1, 1]"), std::string::npos);
}

std::string run_child(const std::string& file_setting) {
  const pid_t child = fork();
  if (child == 0) {
    setenv("BLOCKSCOPE_SIM_COUNTERS", file_setting.c_str(), 1);
    execl("/proc/self/exe", "counters_test", "--gtest_filter=Counters.LaunchesAreKeptInOrder", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return std::to_string(child);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Counters, FileFromTheEnvironment) {
  char dir[] = "/tmp/counters-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/counters.json";
  run_child(path);
  const std::string text = read_file(path);
  // Two launches, in order, each with its name, shape and metrics.
  const size_t first = text.find("\"name\": \"copy_strided\"");
  const size_t second = text.find("\"name\": \"broadcast_load\"");
  ASSERT_NE(first, std::string::npos) << text;
  ASSERT_NE(second, std::string::npos) << text;
  EXPECT_LT(first, second);
  EXPECT_EQ(text.rfind("{\"kernels\": [", 0), 0u);
  EXPECT_NE(text.find("\"grid\": [2, 1, 1], \"block\": [32, 1, 1]"), std::string::npos);
  EXPECT_NE(text.find("\"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum\": 8"), std::string::npos);
  // "%p" is the writing process's id.
  const std::string pid = run_child(std::string(dir) + "/c.%p.json");
  EXPECT_NE(read_file(std::string(dir) + "/c." + pid + ".json").find("copy_strided"), std::string::npos);
  std::remove(path.c_str());
  std::remove((std::string(dir) + "/c." + pid + ".json").c_str());
  rmdir(dir);
}

}  // namespace
