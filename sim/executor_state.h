// Internal to the simulated GPU's executor (executor*.cpp, fiber_stacks.cpp, settings.cpp), its
// memory checks (checks.cpp, race_check.cpp, access_hooks.cpp) and its PTX emulation (ptx.cpp):
// the state of a running grid, its resident blocks and threads.
// Not for other users: kernels see device.h, hosts sim.h.
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/counters.h"
#include "sim/device.h"
#include "sim/sim.h"
#include "sim/stream_order.h"

namespace blockscope::sim::exec {

namespace fc = boost::context::detail;
constexpr unsigned kWarpSize = 32;

// ---- Threads ----------------------------------------------------------------------------------
enum class Status : unsigned char { ready, barrier, grid_barrier, warp, activemask, exited };

struct Stack {
  char* base = nullptr;  // lowest usable byte; the guard page is just below
  size_t size = 0;
};

// A cp.async issued by a thread: the source was read at issue; the 16 bytes land in shared memory
// at the cp.async.wait_group that covers it (ptx.cpp).
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];  // read from global memory at the issue (zeros past src-size)
  const void* pc;           // where it was issued, for reports
};

struct BlockRun;
struct SimThread {
  ThreadState state;
  unsigned linear = 0;  // index in the block
  BlockRun* block = nullptr;
  fc::fcontext_t context = nullptr;  // where to resume it; null before it starts and after it exits
  Stack stack;
  Status status = Status::ready;
  bool started = false;
  bool lost = false;  // overflowed its stack or faulted in a hook: never resumed again
  bool checks_on = false;  // its accesses are checked (from checks_resume(): once it runs kernel code)
  int barrier_result = 0;
  void* fake_stack = nullptr;  // ASan's fake stack while switched out
  // The race check looks at a store once it has happened (the instrumentation reports it just
  // before): a store that leaves memory as it was is no hazard (racecheck reports same-value
  // writes as benign too). Usually the store has happened by the thread's next access; but the
  // instrumentation may report a store before the load that feeds it (GCC does for a copy of a
  // 2-byte struct, `__half h = a[i]`), so one that changed nothing by then is looked at once
  // more, at the access after (unseen_write), and only then taken for a silent store.
  struct PendingWrite {
    bool active = false;
    uintptr_t address = 0;
    size_t bytes = 0;
    unsigned char old[16];
    const void* pc = nullptr;
    bool sync = false;  // a volatile store: a synchronisation, not checked between blocks
  } pending_write, unseen_write;
  bool sync_access = false;  // in a volatile access (on_volatile)
  // Where its last accesses went (the checks' fast paths): a shared region [begin, end) as arena
  // offsets, a global allocation, a page of the global shadow.
  size_t shared_begin = 0, shared_end = 0;
  uintptr_t global_begin = 0, global_end = 0;
  WrittenBytes* global_written = nullptr;  // initcheck's shadow of that allocation (null: none)
  uintptr_t log_base = 0;                   // streams check: the allocation of log_entry
  detail::OpAccesses* log_entry = nullptr;
  uintptr_t shadow_key = UINTPTR_MAX;
  struct ShadowPage* shadow_page = nullptr;
  uint32_t shadow_generation = 0;
  std::vector<PendingCopy> open_copies;                // cp.async issued, not committed
  std::deque<std::vector<PendingCopy>> copy_groups;   // committed, oldest first
  AccessOccurrences occurrences;  // counters on: how often it made each access (counters.h)
};

// ---- Warps and barriers -----------------------------------------------------------------------
struct PendingCollective {
  const char* what = "";
  unsigned mask = 0, arrived = 0;
  size_t in_bytes = 0, out_bytes = 0;
  bool all_lanes = false;
  const void* in[kWarpSize] = {};
  void* out[kWarpSize] = {};
  const CombineStep* combine = nullptr;  // a waiting lane's (alive in its frame while it waits)
};

constexpr unsigned kSyncHistory = 64;
struct Warp {
  unsigned lanes = 0;          // lanes that exist
  unsigned exited = 0;         // lanes that have exited, and lanes that do not exist
  unsigned runnable = 0;       // lanes neither blocked nor exited
  unsigned at_activemask = 0;  // lanes waiting in __activemask
  std::vector<PendingCollective> pending;  // disjoint masks: divergent halves may sync apart
  // __syncwarp history for the race check: completed __syncwarp number g had mask
  // sync_masks[g % kSyncHistory]; sync_gen is the number of the latest.
  uint32_t sync_gen = 0;
  unsigned sync_masks[kSyncHistory] = {};
};

struct Barrier {
  const char* what = "";
  const char* file = nullptr;
  int line = 0;
  unsigned arrived = 0;
  int count = 0;  // arrivals with a non-zero predicate
  std::vector<unsigned> waiters;
};

// ---- The race check's shadow ------------------------------------------------------------------
// One cell per byte of shared memory (and of tracked global memory): who last wrote it and who
// read it since, in the block's current barrier epoch. Cells of an older epoch are empty.
struct RaceCell {
  uint32_t epoch = 0;
  uint16_t writer = 0;      // linear thread index + 1; 0: none this epoch
  uint16_t readers_warp = 0;  // warp of the readers, kManyWarps when several warps read
  uint32_t reader_lanes = 0;  // lanes of readers_warp that read (non-zero when anyone read)
  uint16_t writer_gen = 0;  // the writer's warp's __syncwarp number at the write
  uint16_t reader_gen = 0;  // the readers' warp's __syncwarp number at the latest read
};
constexpr uint16_t kManyWarps = 0xFFFF;
// Where each cell's last write and read happened (shared memory only), for messages.
struct RacePcs {
  const void* write = nullptr;
  const void* read = nullptr;
};

// ---- Blocks -----------------------------------------------------------------------------------
struct SharedVariable {
  const SharedSite* site;
  size_t offset;
};

struct BlockRun {
  struct GridRun* grid = nullptr;
  unsigned slot = 0;
  bool active = false;
  uint64_t linear_block = 0;
  uint3 block_idx{};
  std::vector<SimThread> threads;
  std::vector<Warp> warps;
  Barrier barrier;
  unsigned exited = 0;
  uint32_t epoch = 0;  // race-check epoch: renewed at every block start and __syncthreads
  uint32_t global_epoch = 0;  // the same for global memory, renewed also when its shadow is dropped
  // Shared memory: [redzone][dynamic][redzone][variable][redzone][variable]…, poisoned per block.
  unsigned char* smem = nullptr;
  size_t smem_capacity = 0;
  size_t dynamic_offset = 0;
  size_t cursor = 0;       // next free byte for a variable
  size_t high_water = 0;   // bytes to poison at the next block start
  size_t static_bytes = 0;
  std::vector<SharedVariable> variables;  // by offset
  std::vector<RaceCell> shadow;           // one per byte of smem (race check on)
  std::vector<RacePcs> shadow_pcs;
  WarpAccesses warp_accesses;  // counters on: its warps' memory instructions being gathered
};

// The race check between blocks of one launch, per byte of global memory: the last block that
// wrote it and the last other block that read it, when (the grid's sync tick) and where.
struct BlockCell {
  uint32_t stamp = 0;   // the launch it speaks of (GridRun::block_stamp); another launch's is empty
  uint32_t writer = 0;  // linear block index + 1; 0: none
  uint32_t reader = 0;
  uint32_t write_tick = 0, read_tick = 0;
  uint16_t writer_thread = 0, reader_thread = 0;
  const void* write_pc = nullptr;
  const void* read_pc = nullptr;
};

// A tracked page of global memory (race check): cells for its 4096 bytes. Pages are pooled
// across grids and never cleared once made: a cell of an older epoch, or of an older launch's
// stamp, is empty (race_check.cpp).
constexpr size_t kShadowPageBytes = 4096;
struct ShadowPage {
  RaceCell cells[kShadowPageBytes];
  BlockCell blocks[kShadowPageBytes];  // read when the race check between blocks is on
};

struct AllocationRange {
  uintptr_t base, end;
  int device;
  AllocationInfo::Kind kind;
  WrittenBytes* written;  // initcheck's shadow, or null
};

// ---- The grid ---------------------------------------------------------------------------------
struct GridRun {
  const GridLaunch* launch = nullptr;
  const std::function<void()>* body = nullptr;
  Schedule schedule;
  Checks checks;
  bool hooks = false;    // instrumented accesses are looked at (a check is on, or random preemption)
  bool preempt = false;  // random schedule: switch threads at some accesses
  uint64_t rng = 0;
  uint64_t grid_number = 0;
  int device = 0;
  unsigned threads_per_block = 0;
  uint64_t blocks = 0, next_block = 0, block_stride = 1, block_offset = 0;
  std::vector<std::unique_ptr<BlockRun>> slots;
  std::deque<SimThread*> ready;
  fc::fcontext_t scheduler = nullptr;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  SimThread* running = nullptr;
  bool aborting = false;
  std::string error;  // the first fault's message
  cudaError_t error_code = cudaErrorLaunchFailure;
  uint64_t polls_without_progress = 0;
  uint64_t progress_ticks = 0;
  uint64_t spin_budget = 0;
  // Grid barrier (cooperative launches).
  unsigned grid_arrived = 0;
  std::vector<SimThread*> grid_waiters;
  // Memory the checks accept, taken at the grid's start.
  std::vector<AllocationRange> allocations;  // by base
  std::unordered_map<uintptr_t, std::unique_ptr<ShadowPage>> shadow_pages;
  uint32_t shadow_generation = 0;  // bumped when pages are dropped
  GridCountersPtr counters;        // null unless counting (BLOCKSCOPE_SIM_COUNTERS)
  detail::OpLog* op_log = nullptr;  // streams check: where its global accesses are recorded
  struct LogSlot {  // op_log's entries of the allocations last logged (checks.cpp: log_entry_of)
    uintptr_t base = 0;
    detail::OpAccesses* entry = nullptr;
  };
  static constexpr unsigned kLogSlots = 4;
  LogSlot log_slots[kLogSlots];
  unsigned log_next = 0;
  // The race check between blocks: a tick per synchronising operation (atomic, fence, volatile
  // access, grid barrier) and each block's latest (by linear block index; empty: check off).
  uint32_t sync_tick = 0;
  std::vector<uint32_t> block_synced;
  uint32_t block_stamp = 0;  // this launch's BlockCell stamp (never 0)

  uint64_t next_random() {
    rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// The grid and thread the calling host thread is running (null outside a kernel).
GridRun* current_grid();
SimThread* current_sim_thread();
// The calling host thread's built-in variables (threadIdx … gridDim) as one range of addresses:
// kernel code reads them as memory, which the access hooks pass over.
std::pair<uintptr_t, size_t> builtin_variables();

// ---- Executor services for the checks and ptx.cpp ----------------------------------------------
// Throws the fault (a NamedFault naming kernel, block, thread and the schedule) with `code`.
[[noreturn]] void fault_with_code(const std::string& message, cudaError_t code);
// "kernel K, block (x,y,z)" and "thread (x,y,z) (linear L, warp W lane N)".
std::string where(const BlockRun& block);
std::string thread_name(const SimThread& thread);
std::string thread_name(const BlockRun& block, unsigned linear);
// Ends the grid with `message` (already naming kernel, block and thread) and abandons the calling
// thread without unwinding it: for faults found where nothing may be thrown (instrumented calls).
[[noreturn]] void abandon_thread(std::string&& message, cudaError_t code);
// Progress and polls (spin detection), and a possible switch to another thread. Neither throws.
void note_progress(GridRun& grid);
void poll(GridRun& grid, SimThread& me);
void preempt(GridRun& grid, SimThread& me);  // with a random schedule, now and then
inline void maybe_preempt(GridRun& grid, SimThread& me) {
  if (grid.preempt) preempt(grid, me);
}

// ---- The checks' services for the executor and ptx.cpp -----------------------------------------
// Starts/ends the hooks for a thread being resumed / switched out.
void hooks_enter(GridRun& grid, SimThread& thread);
void hooks_leave();
// Checks one access by `thread` (memcheck, race) as the instrumented code would report it.
// `may_switch`: a random schedule may switch threads after it (not from inside a collective).
// The streams check: records a global access inside the thread's current allocation
// (thread.global_begin…global_end) into the grid's op log.
void stream_log(GridRun& grid, SimThread& thread, uintptr_t address, size_t bytes, bool write, const void* pc);
// A synchronising operation by `thread` (an atomic, a fence, a volatile access): for the race check
// between blocks, what its block did before is ordered before what another block does after its own.
void note_sync(GridRun& grid, SimThread& thread);
// After a grid barrier everything before it is ordered before everything after.
void note_grid_barrier(GridRun& grid);
void check_access(SimThread& thread, const void* address, size_t bytes, bool write, bool aligned,
                  const void* pc, bool may_switch = true);
// cp.async's shared destination as written at its issue: the copy may land at any moment until the
// thread's wait_group (which writes it again, through check_access). Bytes equal to those already
// there are benign, as for a store.
void check_async_write(SimThread& thread, const void* destination, const void* incoming, size_t bytes,
                       const void* pc);
// Race-checks the thread's last stores, which have happened by now (every executor entry point
// calls this first; the next access calls settle_write_at_access, race_check.cpp).
void settle_write(SimThread& thread);
// A new epoch for the block's race check (block start, __syncthreads).
void new_epoch(BlockRun& block);
// Where `address` is, for messages: "shared offset 0x40 (`tile` declared at f.cu:12, +8)".
std::string describe_address(const BlockRun& block, const void* address);
// "f.cu:42" for a code address, or "" (addr2line on the running binary, at fault time only).
std::string source_line(const void* pc);
// Grid start/end: the allocation snapshot, the shadow pages.
void checks_begin_grid(GridRun& grid);
void checks_end_grid(GridRun& grid);

// ---- settings.cpp: the run's settings, from the environment at first use ----------------------
Schedule& schedule_setting();  // BLOCKSCOPE_SIM_SCHEDULE (set_schedule replaces it)
Checks& checks_setting();      // BLOCKSCOPE_SIM_CHECKS (set_checks replaces it)

}  // namespace blockscope::sim::exec
