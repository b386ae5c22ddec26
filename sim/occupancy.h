// Theoretical occupancy: how many blocks of a launch fit on one SM, and what limits them — the
// CUDA occupancy calculator's rules, with Nsight Compute's names for the limits. Header-only and
// free of CUDA types, so the simulated GPU (cudaOccupancy*, its counters) and the GPU performance
// model above it (profiler/gpu_model) share one implementation.
//
// The rules (CUDA C++ Programming Guide, "Compute Capabilities" table, and the occupancy
// calculator for sm_80/sm_90):
//   warps      a block takes ceil(threads / 32) warps; an SM holds max_warps of them
//   blocks     at most max_blocks resident blocks per SM
//   registers  allocated per warp, registers × 32 rounded up to reg_unit (256), in each of the
//              SM's 4 sub-partitions (registers_per_sm / 4 each, so warps fit in groups of 4),
//              and a block whose warps, rounded up to 4, need more than registers_per_block
//              does not launch. Unknown registers (< 0): this limit is not applied
//   shared_mem each block takes its static + dynamic shared memory plus reserved_smem_per_block
//              (1 KiB the driver keeps on sm_80 and later), rounded up to smem_unit (128 bytes);
//              an SM has smem_per_sm (the largest carveout: the runtime picks the carveout that
//              fits, and the theoretical figure assumes the largest)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace blockscope::sim {

struct SmLimits {
  int max_threads_per_block;
  int max_warps;        // resident warps per SM
  int max_blocks;       // resident blocks per SM
  int registers_per_sm;
  int reg_unit;         // registers allocated per warp in units of this many
  int registers_per_block;
  int sub_partitions;   // SM sub-partitions (warp schedulers), each with its share of registers
  int max_registers_per_thread;
  int64_t smem_per_sm;  // bytes, the largest carveout
  int64_t max_smem_per_block;  // bytes, with the opt-in attribute
  int64_t reserved_smem_per_block;
  int64_t smem_unit;
};

// The figures: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"
// (8.0 and 9.0: 1024 threads per block, 64 warps and 32 blocks per SM, 64 Ki 32-bit registers per
// SM and per block, 255 per thread, 164/228 KiB shared memory per SM and 163/227 KiB per block
// opt-in, 1 KiB reserved per block); the occupancy calculator (cuda_occupancy.h): registers per
// warp in units of 256, 4 sub-partitions, shared memory in units of 128 bytes.
// sm_90 (H100, H200): 64 warps, 32 blocks, 64 Ki registers, 228 KiB shared per SM, 227 KiB per block.
constexpr SmLimits kSm90Limits{1024, 64, 32, 65536, 256, 65536, 4, 255, 228 * 1024, 227 * 1024, 1024, 128};
// sm_80 (A100): 64 warps, 32 blocks, 64 Ki registers, 164 KiB shared per SM, 163 KiB per block.
constexpr SmLimits kSm80Limits{1024, 64, 32, 65536, 256, 65536, 4, 255, 164 * 1024, 163 * 1024, 1024, 128};
// The simulated device is an H200: the most shared memory a block may opt in to.
constexpr size_t kSharedPerBlockOptin = static_cast<size_t>(kSm90Limits.max_smem_per_block);

struct Occupancy {
  int warps_per_block = 0;
  // Blocks per SM each resource allows (Nsight Compute's launch__occupancy_limit_*; shared memory's
  // may exceed max_blocks); the register limit not applied (unknown registers) is max_blocks.
  int limit_warps = 0, limit_blocks = 0, limit_registers = 0, limit_shared_mem = 0;
  bool registers_known = false;
  int blocks_per_sm = 0;      // the least of the limits; 0: the block does not fit at all
  int active_warps = 0;       // blocks_per_sm × warps_per_block
  double occupancy = 0;       // active_warps / max_warps, 0..1 (sm__maximum_warps_per_active_cycle_pct / 100)
  const char* limiter = "";   // "warps", "blocks", "registers" or "shared_mem": the one that binds first
};

inline Occupancy theoretical_occupancy(const SmLimits& sm, int threads_per_block, int registers_per_thread,
                                       int64_t smem_per_block) {
  Occupancy o;
  if (threads_per_block <= 0 || threads_per_block > sm.max_threads_per_block) return o;
  o.warps_per_block = (threads_per_block + 31) / 32;
  o.limit_warps = sm.max_warps / o.warps_per_block;
  o.limit_blocks = sm.max_blocks;
  o.registers_known = registers_per_thread > 0;
  o.limit_registers = sm.max_blocks;
  if (o.registers_known) {
    const int per_warp = (registers_per_thread * 32 + sm.reg_unit - 1) / sm.reg_unit * sm.reg_unit;
    const int warps_rounded = (o.warps_per_block + sm.sub_partitions - 1) / sm.sub_partitions * sm.sub_partitions;
    if (registers_per_thread > sm.max_registers_per_thread || per_warp * warps_rounded > sm.registers_per_block) {
      o.limit_registers = 0;
    } else {
      const int warps = sm.registers_per_sm / sm.sub_partitions / per_warp * sm.sub_partitions;
      o.limit_registers = warps / o.warps_per_block;
    }
  }
  if (smem_per_block < 0 || smem_per_block > sm.max_smem_per_block) {
    o.limit_shared_mem = 0;
  } else {
    const int64_t taken = (smem_per_block + sm.reserved_smem_per_block + sm.smem_unit - 1) / sm.smem_unit * sm.smem_unit;
    o.limit_shared_mem = static_cast<int>(sm.smem_per_sm / taken);
  }
  o.blocks_per_sm = std::min({o.limit_warps, o.limit_blocks, o.limit_registers, o.limit_shared_mem});
  // The limiter: the first limit equal to the least, in the order registers, shared_mem, warps,
  // blocks (a tie names the resource a kernel author can change first).
  o.limiter = o.registers_known && o.limit_registers == o.blocks_per_sm ? "registers"
              : o.limit_shared_mem == o.blocks_per_sm                  ? "shared_mem"
              : o.limit_warps == o.blocks_per_sm                       ? "warps"
                                                                       : "blocks";
  o.active_warps = o.blocks_per_sm * o.warps_per_block;
  o.occupancy = static_cast<double>(o.active_warps) / sm.max_warps;
  return o;
}

// Full and partial waves of `blocks` blocks over `sms` SMs holding `blocks_per_sm` each
// (Nsight Compute's launch__waves_per_multiprocessor: blocks / (blocks_per_sm × SMs)).
inline double waves_per_sm(uint64_t blocks, int blocks_per_sm, int sms) {
  if (blocks_per_sm <= 0 || sms <= 0) return 0;
  return static_cast<double>(blocks) / (static_cast<double>(blocks_per_sm) * sms);
}

}  // namespace blockscope::sim
