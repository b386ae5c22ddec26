// Internal to the simulated GPU's access checks, three files of one concern:
//   checks.cpp        memcheck (shared and global memory), initcheck, the streams log, and
//                     check_access, which runs every check on one access
//   race_check.cpp    the race check: within a block (per byte of shared and global memory,
//                     barrier epochs, __syncwarp) and between the blocks of a launch
//   access_hooks.cpp  the instrumentation's entry points (__tsan_*), atomics' and volatile
//                     accesses' reports, and which thread's accesses are looked at
// Here: how a check words a fault from inside an instrumented access, and the race check's
// entry points for check_access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "sim/executor_state.h"

namespace blockscope::sim::exec {

inline std::string hex_address(uintptr_t a) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(a));
  return text;
}

inline std::string bytes_word(size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

inline std::string at_line(const void* pc) {
  const std::string line = source_line(pc);
  return line.empty() ? std::string() : " at " + line;
}

// ---- Faults from a hook: the thread is abandoned, the grid ends ------------------------------------
// `t` is the thread the access belongs to (for ldmatrix rows, the lane that gave the address).
// The message is composed here, in a statement of its own: the abandoned thread's frames are never
// unwound, so no string may still be alive in them (the callers pass a lambda, not a string).
template <class Compose>
[[noreturn]] void hook_fault(const SimThread& t, cudaError_t code, Compose compose) {
  std::string full = where(*t.block) + ", " + thread_name(t) + ": " + compose();
  abandon_thread(std::move(full), code);
}

// ---- The race check (race_check.cpp), for check_access and settle_write ------------------------
// `cells` (and `pcs`, shared memory only: where each byte was last written and read) for the n
// bytes at `address`, cells of another `epoch` being empty (b.epoch, or b.global_epoch for global
// memory); a hazard abandons the thread with the report.
void race_check(const BlockRun& b, const SimThread& t, RaceCell* cells, RacePcs* pcs, size_t n, bool write,
                const void* pc, uintptr_t address, uint32_t epoch);
// The same for global memory, page by page of the grid's shadow, and between blocks.
void global_race_check(GridRun& g, const BlockRun& b, SimThread& t, uintptr_t a, size_t n, bool write,
                       const void* pc);
// At an access: the thread's previous store race-checked if it has happened; if memory is as it
// was, it is looked at again at the access after (SimThread::unseen_write says why).
void settle_write_at_access(SimThread& t);
// A grid's start (after block_synced is set) and end: its stamp for the cells between blocks, and
// its shadow pages handed back to the pool.
void race_check_begin_grid(GridRun& g);
void race_check_end_grid(GridRun& g);

}  // namespace blockscope::sim::exec
