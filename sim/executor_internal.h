// Internal to the kernel executor's own files, what they share of one another: executor.cpp (a
// grid's run: its blocks in the schedule's order, every thread a fiber, the switches between
// them, polls), executor_sync.cpp (__syncthreads, the grid barrier, the warp collectives and
// __activemask: what blocks a thread until others arrive), executor_shared.cpp (a block's shared
// memory) and executor_guards.cpp (the stack-overflow handler and the watchdog). The checks and
// the PTX emulation see executor_state.h only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "sim/executor_state.h"

namespace blockscope::sim::exec {

// ---- executor.cpp: the grid and its fibers ---------------------------------------------------
// Thrown into blocked threads to unwind their stacks when the grid ends at a fault. Not a
// std::exception, so a kernel's catch (const std::exception&) does not stop it.
struct AbortGrid {};

// The grid and thread this host thread runs (null outside a kernel).
extern thread_local GridRun* t_grid;
extern thread_local SimThread* t_thread;
// What a fiber hands the scheduler when it ends: it finished, or it is given up, never unwound.
inline void* const kFinished = reinterpret_cast<void*>(uintptr_t{1});
inline void* const kLost = reinterpret_cast<void*>(uintptr_t{2});

// The kernel's name for messages; the grid's first fault, which ends the grid.
std::string kernel_label(const GridLaunch& launch);
void set_error(GridRun& grid, std::string message, cudaError_t code);

// The queue of runnable threads.
inline void make_ready(GridRun& grid, SimThread& t) { grid.ready.push_back(&t); }

// Makes `ids` of `block` runnable in the schedule's order (reverse: highest first).
template <typename Ids>
void release_in_order(GridRun& grid, BlockRun& block, const Ids& ids) {
  if (grid.schedule.order == Order::reverse) {
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) make_ready(grid, block.threads[*it]);
  } else {
    for (unsigned id : ids) make_ready(grid, block.threads[id]);
  }
}

// Called on the blocked thread's fiber: back to the scheduler until released. When the grid is
// torn down meanwhile, the thread unwinds (AbortGrid) — or, where it was switched out from an
// instrumented access that cannot throw (may_throw false), is abandoned.
void suspend(GridRun& grid, SimThread& me, bool may_throw = true);
// The running grid, for the executor entry point `what` (a fault outside a kernel); the thread's
// last store has happened.
GridRun& require_grid(const char* what);

// ---- executor_sync.cpp: barriers and warp collectives -----------------------------------------
// A thread exits: waiting collectives stop waiting for it, and a barrier it held up is released
// (PTX `exit`: "if the exiting threads are holding up the barrier, the barrier is released").
void lane_exits(BlockRun& run, SimThread& me);
// Why the grid cannot go on: who waits where, who has exited.
std::string deadlock_message(const GridRun& grid);

// ---- executor_shared.cpp: shared memory -------------------------------------------------------
// A slot's shared memory (and race-check shadow) from the pool, for the grid; back to the pool.
void prepare_shared_memory(GridRun& grid, BlockRun& run);
void release_shared_memory(BlockRun& run);
// A block starts in the slot: what the previous block used back to 0xFF, variables placed anew.
void reset_shared_memory(GridRun& grid, BlockRun& run);

// ---- executor_guards.cpp: the stack-overflow handler and the watchdog -------------------------
// Progress the watchdog sees (bumped at every block start, barrier, collective and thread exit).
extern std::atomic<uint64_t> g_progress;
extern std::atomic<const GridLaunch*> g_watched;  // the kernel running, for the watchdog's message
// Once per host thread that runs grids: an alternate signal stack (the fiber's own is exhausted
// when the guard page is hit), and once per process the handler. Not under ASan, which reports
// stack overflows itself and keeps its own fiber bookkeeping.
void install_overflow_handler();
// A grid that stops making progress ends the process with a message (BLOCKSCOPE_SIM_WATCHDOG_S).
void start_watchdog();

}  // namespace blockscope::sim::exec
