// Internal to the simulated GPU (executor*.cpp, access_hooks.cpp, ptx.cpp, counters.cpp): the state its
// counters keep while a grid runs. The public side (what is counted, the names, the JSON file)
// is in sim/sim.h and sim/counters.cpp.
//
// Counting is at the source level, per warp: every load and store a thread makes (as the
// instrumented kernel reports it) is one lane of a warp-level instruction. The lanes of an
// instruction are matched by the access's place in the code (its return address) and by how
// many times this lane has been there before — the SIMT model: lanes that took a branch meet
// at its accesses, lanes that left a loop early drop out of its later iterations. An
// instruction is complete, and counted, when its warps can no longer reach it: at a
// __syncthreads (every live lane has passed it), at a grid barrier, at the block's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace blockscope::sim::exec {

struct GridRun;
struct BlockRun;
struct SimThread;

// What a lane's access was, as the instruction that made it.
enum class Access : uint8_t { load, store, atomic, async_copy_source, async_copy_destination };

// One warp-level memory instruction being gathered: the lanes that made it and their addresses.
struct WarpAccess {
  Access access = Access::load;
  bool shared = false;
  uint32_t bytes = 0;  // per lane
  uint32_t lanes = 0;  // mask of the lanes that made it
  uintptr_t address[32] = {};
};

struct WarpAccessKey {
  const void* pc;
  uint32_t occurrence;  // how many times the lane made this access before
  uint16_t warp;
  uint8_t access;
  bool operator==(const WarpAccessKey& o) const {
    return pc == o.pc && occurrence == o.occurrence && warp == o.warp && access == o.access;
  }
};
struct WarpAccessKeyHash {
  size_t operator()(const WarpAccessKey& k) const {
    uint64_t h = reinterpret_cast<uintptr_t>(k.pc) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t{k.occurrence} << 20 | uint64_t{k.warp} << 4 | k.access) * 0xBF58476D1CE4E5B9ull;
    return static_cast<size_t>(h ^ h >> 29);
  }
};
using WarpAccesses = std::unordered_map<WarpAccessKey, WarpAccess, WarpAccessKeyHash>;
// Per thread: how many times it made the access at each place (the occurrence above).
using AccessOccurrences = std::unordered_map<const void*, uint32_t>;

struct GridCounters;  // counters.cpp: the running totals of one launch
struct GridCountersDeleter {
  void operator()(GridCounters* counters) const;
};
using GridCountersPtr = std::unique_ptr<GridCounters, GridCountersDeleter>;

// Grid start: the grid's counters when counting is on (BLOCKSCOPE_SIM_COUNTERS or
// set_counters_enabled), else null.
GridCountersPtr counters_begin_grid(const GridRun& grid);
// One lane's access (`bytes` at `address`, shared or global by where it lies) at `pc`.
void count_access(SimThread& thread, const void* address, size_t bytes, Access access, const void* pc);
// One ldmatrix of `num` 8x8 b16 matrices: rows[l] is lane l's row address (lanes 0..8·num−1).
void count_ldmatrix(GridRun& grid, int num, const void* const* rows);
// One mma.sync.m16n8k16 of the warp (bf16 or f16 inputs).
void count_mma(GridRun& grid, bool bf16);
// Counts and forgets the block's gathered instructions (its lanes have all passed them).
void counters_flush_block(BlockRun& block);
// A __syncthreads completed in `block` (its warps each executed one barrier instruction).
void count_block_barrier(BlockRun& block);
// Grid end (not faulted): adds the launch statistics and keeps the launch's counters.
void counters_end_grid(GridRun& grid);

}  // namespace blockscope::sim::exec
