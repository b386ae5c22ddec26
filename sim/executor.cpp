// The kernel executor of the simulated GPU: one grid at a time (a global mutex); its blocks in the
// schedule's order, one resident at a time (several with a random schedule, every one for a
// cooperative launch); every thread of a resident block a fiber. Fibers are cooperative: the
// scheduler resumes a runnable thread, which runs until it blocks (a barrier, a warp collective),
// polls (an atomic, a volatile access, a fence, __nanosleep: it goes to the back of the queue),
// exits, or — random schedule — is preempted at a shared or global access.
//
// The raw fcontext layer of Boost.Context is used instead of boost::context::fiber because
// starting a fiber then costs no allocation and no extra switch, and every switch goes through
// one place where AddressSanitizer is told about it (fiber's own creation switch is not).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/executor_state.h"
#include "sim/fiber_stacks.h"
#include "sim/occupancy.h"

namespace blockscope::sim {
namespace exec {
namespace {

// ---- Configuration ------------------------------------------------------------------------------
constexpr size_t kRedzone = 32;                 // bytes around every shared-memory region
constexpr size_t kStaticSharedLimit = 48 << 10;  // what ptxas accepts of static __shared__
constexpr unsigned kRandomResidentBlocks = 2;
constexpr unsigned kPreemptOneIn = 128;          // random schedule: switch at about 1 access in 128

// ---- Thrown through fibers -------------------------------------------------------------------
// Thrown into blocked threads to unwind their stacks when the grid ends at a fault. Not a
// std::exception, so a kernel's catch (const std::exception&) does not stop it.
struct AbortGrid {};

// A Fault whose message already names kernel, block and thread.
struct NamedFault : Fault {
  using Fault::Fault;
};

std::mutex g_grid_mutex;
StackPool g_stacks;  // guarded by g_grid_mutex
uint64_t g_grid_count = 0;
thread_local GridRun* t_grid = nullptr;
thread_local SimThread* t_thread = nullptr;
void* const kFinished = reinterpret_cast<void*>(uintptr_t{1});
void* const kLost = reinterpret_cast<void*>(uintptr_t{2});

// Progress the watchdog sees (bumped at every block start, barrier, collective and thread exit).
std::atomic<uint64_t> g_progress{0};
std::atomic<const GridLaunch*> g_watched{nullptr};

// ---- Messages --------------------------------------------------------------------------------
std::string dims(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

// "thread 31" / "threads 0-15, 17, 20-31" over sorted ids.
std::string id_list(const char* singular, const char* plural, const std::vector<unsigned>& ids) {
  std::string out = ids.size() == 1 ? singular : plural;
  out += ' ';
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned> lanes_of(unsigned mask) {
  std::vector<unsigned> lanes;
  for (unsigned l = 0; l < kWarpSize; ++l)
    if (mask >> l & 1u) lanes.push_back(l);
  return lanes;
}

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

std::string site(const char* what, const char* file, int line) {
  std::string out = what;
  if (file != nullptr) out += std::string(" at ") + file + ":" + std::to_string(line);
  return out;
}

// The kernel's own name when its address is known (a launch through a pointer spells the
// pointer), else the name the launch spelled.
std::string kernel_label(const GridLaunch& launch) {
  if (launch.function != nullptr) {
    const std::string real = short_function_name(launch.function);
    if (!real.empty()) return real;
  }
  return launch.name;
}

// What reproduces the run: appended to every fault of a schedule other than inorder.
std::string schedule_note(const GridRun& grid) {
  if (grid.schedule.order == Order::inorder) return "";
  const std::string name = schedule_name(grid.schedule);
  return " [schedule " + name + ", grid " + std::to_string(grid.grid_number) + " of the process; BLOCKSCOPE_SIM_SCHEDULE=" +
         name + " replays it]";
}

void set_error(GridRun& grid, std::string message, cudaError_t code) {
  if (grid.error.empty()) {
    grid.error = std::move(message) + schedule_note(grid);
    grid.error_code = code;
  }
  grid.aborting = true;
}

// Why the grid cannot go on: who waits where, who has exited.
std::string deadlock_message(const GridRun& grid) {
  std::vector<std::string> parts;
  for (const auto& slot : grid.slots) {
    const BlockRun& run = *slot;
    if (!run.active) continue;
    std::vector<unsigned> exited, at_barrier, at_grid;
    for (const SimThread& t : run.threads) {
      if (t.status == Status::exited) exited.push_back(t.linear);
      if (t.status == Status::barrier) at_barrier.push_back(t.linear);
      if (t.status == Status::grid_barrier) at_grid.push_back(t.linear);
    }
    if (!at_barrier.empty()) {
      std::string part = site(run.barrier.what, run.barrier.file, run.barrier.line) + " in " + where(run) + ": " +
                         id_list("thread", "threads", at_barrier) + " wait at the barrier";
      if (!exited.empty()) part += ", " + id_list("thread", "threads", exited) + (exited.size() == 1 ? " has" : " have") + " exited";
      parts.push_back(part);
    }
    if (!at_grid.empty()) {
      parts.push_back("this_grid().sync() in " + where(run) + ": " + id_list("thread", "threads", at_grid) +
                      " wait for the other blocks");
    }
    for (size_t w = 0; w < run.warps.size(); ++w) {
      for (const PendingCollective& p : run.warps[w].pending) {
        std::string part = std::string(p.what) + " mask " + hex(p.mask) + " in " + where(run) + ", warp " +
                           std::to_string(w) + ": " + id_list("lane", "lanes", lanes_of(p.arrived)) + " arrived";
        const std::vector<unsigned> elsewhere = lanes_of(p.mask & ~p.arrived & ~run.warps[w].exited);
        if (!elsewhere.empty()) {
          part += ", " + id_list("lane", "lanes", elsewhere) + " wait elsewhere (";
          part += at_barrier.empty() ? "another warp collective" : "__syncthreads or another warp collective";
          part += ")";
        }
        parts.push_back(part);
      }
    }
  }
  std::string message = "deadlock: ";
  for (size_t i = 0; i < parts.size(); ++i) message += (i ? "; " : "") + parts[i];
  if (parts.empty()) message += "kernel " + kernel_label(*grid.launch) + ": threads blocked with nothing to wait for";
  return message;
}

// ---- The queue of runnable threads -----------------------------------------------------------
void make_ready(GridRun& grid, SimThread& t) { grid.ready.push_back(&t); }

// Makes `ids` of `block` runnable in the schedule's order (reverse: highest first).
template <typename Ids>
void release_in_order(GridRun& grid, BlockRun& block, const Ids& ids) {
  if (grid.schedule.order == Order::reverse) {
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) make_ready(grid, block.threads[*it]);
  } else {
    for (unsigned id : ids) make_ready(grid, block.threads[id]);
  }
}

SimThread* pick(GridRun& grid) {
  if (grid.ready.empty()) return nullptr;
  if (grid.schedule.order == Order::random && grid.ready.size() > 1) {
    const size_t i = grid.next_random() % grid.ready.size();
    std::swap(grid.ready[0], grid.ready[i]);
  }
  SimThread* t = grid.ready.front();
  grid.ready.pop_front();
  return t;
}

// A lane stops being runnable (blocks or exits). __activemask waiters are released once no lane
// of their warp can still run: the lanes waiting there together are the active mask.
void lane_blocked(BlockRun& run, unsigned warp_index) {
  Warp& warp = run.warps[warp_index];
  --warp.runnable;
  if (warp.runnable != 0 || warp.at_activemask == 0) return;
  const unsigned base = warp_index * kWarpSize;
  std::vector<unsigned> ids;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((warp.at_activemask >> l & 1u) == 0) continue;
    SimThread& t = run.threads[base + l];
    t.barrier_result = static_cast<int>(warp.at_activemask);
    t.status = Status::ready;
    ids.push_back(base + l);
  }
  release_in_order(*run.grid, run, ids);
  warp.runnable += static_cast<unsigned>(__builtin_popcount(warp.at_activemask));
  warp.at_activemask = 0;
}

void lane_released(BlockRun& run, SimThread& t) {
  t.status = Status::ready;
  ++run.warps[t.state.warp].runnable;
}

// ---- Switching -------------------------------------------------------------------------------
void complete_collective(BlockRun& run, unsigned warp_index, size_t pending_index, const SimThread* caller);
void lane_exits(BlockRun& run, SimThread& me);
void release_block_barrier(BlockRun& run);
void release_grid_barrier(GridRun& grid);

[[noreturn]] void thread_entry(fc::transfer_t from) {
  GridRun* grid = static_cast<GridRun*>(from.data);
  grid->scheduler = from.fctx;
  finish_switch(nullptr, &grid->scheduler_bottom, &grid->scheduler_size);
  SimThread& me = *grid->running;
  BlockRun& run = *me.block;
  try {
    (*grid->body)();
  } catch (const AbortGrid&) {
  } catch (const NamedFault& fault) {
    set_error(*grid, fault.what(), fault.code);
  } catch (const Fault& fault) {
    set_error(*grid, where(run) + ", " + thread_name(me) + ": " + fault.what(), fault.code);
  } catch (const std::exception& error) {
    set_error(*grid, where(run) + ", " + thread_name(me) + ": uncaught exception: " + error.what(), cudaErrorLaunchFailure);
  } catch (...) {
    set_error(*grid, where(run) + ", " + thread_name(me) + ": uncaught exception of unknown type", cudaErrorLaunchFailure);
  }
  if (!grid->aborting) settle_write(me);
  hooks_leave();
  me.status = Status::exited;
  me.open_copies.clear();  // cp.async never waited for: dropped (nothing may rely on them)
  me.copy_groups.clear();
  ++run.exited;
  if (!grid->aborting) {
    try {
      lane_exits(run, me);
    } catch (const NamedFault& fault) {
      set_error(*grid, fault.what(), fault.code);
    }
  }
  note_progress(*grid);
  start_switch(nullptr, grid->scheduler_bottom, grid->scheduler_size);  // this fiber's fake stack dies
  fc::jump_fcontext(grid->scheduler, kFinished);
  std::abort();  // a finished thread is never resumed
}

void resume(GridRun& grid, SimThread& t) {
  if (t.context == nullptr) {
    t.stack = g_stacks.take();
    t.context = fc::make_fcontext(t.stack.base + t.stack.size, t.stack.size, &thread_entry);
    t.started = true;
  }
  grid.running = &t;
  t_thread = &t;
  hooks_enter(grid, t);
  start_switch(&grid.scheduler_fake_stack, t.stack.base, t.stack.size);
  const fc::transfer_t back = fc::jump_fcontext(t.context, &grid);
  finish_switch(grid.scheduler_fake_stack, nullptr, nullptr);
  hooks_leave();
  t_thread = nullptr;
  if (back.data == kFinished || back.data == kLost) {
    g_stacks.give(t.stack);
    t.context = nullptr;
  } else {
    t.context = back.fctx;
  }
}

// Gives the thread up for good: its stack is never unwound (its locals' destructors never run),
// and the scheduler returns the stack to the pool. For faults found where nothing may be thrown.
[[noreturn]] void abandon(GridRun& grid, SimThread& me) {
  hooks_leave();
  me.lost = true;
  start_switch(nullptr, grid.scheduler_bottom, grid.scheduler_size);  // this fiber's fake stack dies
  fc::jump_fcontext(grid.scheduler, kLost);
  std::abort();  // a lost thread is never resumed
}

// Called on the blocked thread's fiber: back to the scheduler until released. When the grid is
// torn down meanwhile, the thread unwinds (AbortGrid) — or, where it was switched out from an
// instrumented access that cannot throw (may_throw false), is abandoned.
void suspend(GridRun& grid, SimThread& me, bool may_throw = true) {
  hooks_leave();
  start_switch(&me.fake_stack, grid.scheduler_bottom, grid.scheduler_size);
  const fc::transfer_t back = fc::jump_fcontext(grid.scheduler, nullptr);
  finish_switch(me.fake_stack, nullptr, nullptr);
  grid.scheduler = back.fctx;
  if (grid.aborting) {
    if (may_throw) throw AbortGrid{};
    abandon(grid, me);
  }
  hooks_enter(grid, me);
}

GridRun& require_grid(const char* what) {
  if (t_grid == nullptr || t_thread == nullptr) {
    throw Fault(std::string(what) + " called outside a kernel running on the simulated GPU");
  }
  if (t_grid->aborting) throw AbortGrid{};
  settle_write(*t_thread);  // the thread's last store has happened
  return *t_grid;
}

// ---- Stack overflow: the guard page's SIGSEGV becomes a fault of the thread ------------------
#ifndef BLOCKSCOPE_SIM_ASAN
struct sigaction g_previous_segv;

void on_segv(int sig, siginfo_t* info, void* context) {
  SimThread* t = t_thread;
  GridRun* grid = t_grid;
  if (t != nullptr && grid != nullptr && t->stack.base != nullptr) {
    const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
    const auto base = reinterpret_cast<uintptr_t>(t->stack.base);
    if (address < base && address + page_bytes() >= base) {
      hooks_leave();
      set_error(*grid,
                where(*t->block) + ", " + thread_name(*t) + ": stack overflow: the thread used more than its " +
                    std::to_string(stack_bytes() >> 10) +
                    " KiB stack (local arrays and call depth; BLOCKSCOPE_SIM_STACK_KIB sets the size; a GPU gives a "
                    "thread up to 512 KiB of local memory)",
                cudaErrorLaunchFailure);
      t->lost = true;
      // Never returns to the faulting code: back to the scheduler, which unwinds the grid.
      fc::jump_fcontext(grid->scheduler, kLost);
    }
  }
  // Not ours: what would have happened without this handler.
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction != nullptr) return g_previous_segv.sa_sigaction(sig, info, context);
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    return g_previous_segv.sa_handler(sig);
  }
  signal(SIGSEGV, SIG_DFL);  // returning re-runs the access, which now kills the process
}
#endif

// Once per host thread that runs grids: an alternate signal stack (the fiber's own is exhausted
// when the guard page is hit), and once per process the handler. Not under ASan, which reports
// stack overflows itself and keeps its own fiber bookkeeping.
void install_overflow_handler() {
#ifndef BLOCKSCOPE_SIM_ASAN
  thread_local bool alt_stack = false;
  if (!alt_stack) {
    const size_t size = std::max<size_t>(SIGSTKSZ, 64 << 10);
    stack_t ss{};
    ss.ss_sp = std::malloc(size);  // lives as long as the host thread (never freed)
    ss.ss_size = size;
    if (ss.ss_sp != nullptr && sigaltstack(&ss, nullptr) == 0) alt_stack = true;
  }
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = &on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, &g_previous_segv) == 0;
  }();
  (void)installed;
#endif
}

// ---- Watchdog: a grid that stops making progress ends the process with a message ------------
// A spin-wait the sim cannot see (a plain load hoisted out of its loop) would otherwise hang.
void start_watchdog() {
  static const bool started = [] {
    const uint64_t seconds = env_u64("BLOCKSCOPE_SIM_WATCHDOG_S", 600);
    if (seconds == 0) return false;
    std::thread([seconds] {
      uint64_t last = g_progress.load();
      auto since = std::chrono::steady_clock::now();
      for (;;) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const uint64_t now = g_progress.load();
        const GridLaunch* watched = g_watched.load();
        if (now != last || watched == nullptr) {
          last = now;
          since = std::chrono::steady_clock::now();
          continue;
        }
        if (std::chrono::steady_clock::now() - since > std::chrono::seconds(seconds)) {
          std::fprintf(stderr,
                       "blockscope sim: kernel %s has made no progress for %llu s (no thread started, exited, met "
                       "a barrier or a collective): a spin-wait the simulator cannot see? (blocks run one or a few "
                       "at a time, so a block cannot wait for one that has not started.) Aborting; "
                       "BLOCKSCOPE_SIM_WATCHDOG_S sets the limit (0: none).\n",
                       watched->name, static_cast<unsigned long long>(seconds));
          std::abort();
        }
      }
    }).detach();
    return true;
  }();
  (void)started;
}

// ---- Blocks --------------------------------------------------------------------------------------
uint3 block_index(const GridRun& grid, uint64_t linear) {
  const dim3 g = grid.launch->grid;
  return uint3{static_cast<unsigned>(linear % g.x), static_cast<unsigned>((linear / g.x) % g.y),
               static_cast<unsigned>(linear / (uint64_t{g.x} * g.y))};
}

// The n-th block to run: by index, reversed, or an affine permutation (a random stride coprime to
// the block count, a random offset) that visits every block once without a table.
uint64_t nth_block(const GridRun& grid, uint64_t n) {
  switch (grid.schedule.order) {
    case Order::inorder: return n;
    case Order::reverse: return grid.blocks - 1 - n;
    case Order::random: break;
  }
  return static_cast<uint64_t>((static_cast<unsigned __int128>(n) * grid.block_stride + grid.block_offset) % grid.blocks);
}

uint64_t gcd(uint64_t a, uint64_t b) {
  while (b != 0) {
    const uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Shared memory and its race-check shadow, pooled across grids: a launch costs no allocation
// and no clearing (shadow cells of older epochs are empty by construction).
struct SlotMemory {
  unsigned char* smem = nullptr;
  size_t capacity = 0;
  std::vector<RaceCell> shadow;
  std::vector<RacePcs> shadow_pcs;

  SlotMemory() = default;
  SlotMemory(SlotMemory&& other) noexcept
      : smem(std::exchange(other.smem, nullptr)), capacity(other.capacity), shadow(std::move(other.shadow)),
        shadow_pcs(std::move(other.shadow_pcs)) {}
  SlotMemory& operator=(SlotMemory&& other) noexcept {
    std::swap(smem, other.smem);
    std::swap(capacity, other.capacity);
    std::swap(shadow, other.shadow);
    std::swap(shadow_pcs, other.shadow_pcs);
    return *this;
  }
  ~SlotMemory() {
    if (smem != nullptr) ::operator delete(smem, std::align_val_t{4096});
  }
};
std::vector<SlotMemory> g_slot_memory;  // guarded by g_grid_mutex

void take_slot_memory(BlockRun& run, bool race) {
  SlotMemory memory;
  for (size_t i = 0; i < g_slot_memory.size(); ++i) {
    if (g_slot_memory[i].capacity >= run.smem_capacity) {
      memory = std::move(g_slot_memory[i]);
      g_slot_memory.erase(g_slot_memory.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (memory.smem == nullptr) {
    memory.capacity = run.smem_capacity;
    memory.smem = static_cast<unsigned char*>(::operator new(memory.capacity, std::align_val_t{4096}));
  }
  if (race && memory.shadow.size() < memory.capacity) {
    memory.shadow.resize(memory.capacity);
    memory.shadow_pcs.resize(memory.capacity);
  }
  run.smem = std::exchange(memory.smem, nullptr);  // the slot owns it until give_slot_memory
  run.smem_capacity = memory.capacity;
  run.shadow = std::move(memory.shadow);
  run.shadow_pcs = std::move(memory.shadow_pcs);
}

void give_slot_memory(BlockRun& run) {
  if (run.smem == nullptr) return;
  asan_unpoison(run.smem, run.smem_capacity);
  SlotMemory memory;
  memory.smem = run.smem;
  memory.capacity = run.smem_capacity;
  memory.shadow = std::move(run.shadow);
  memory.shadow_pcs = std::move(run.shadow_pcs);
  run.smem = nullptr;
  g_slot_memory.push_back(std::move(memory));
}

void prepare_slot(GridRun& grid, BlockRun& run) {
  const dim3 block = grid.launch->block;
  const unsigned n = grid.threads_per_block;
  run.grid = &grid;
  run.threads.resize(n);
  run.warps.resize((n + kWarpSize - 1) / kWarpSize);
  for (unsigned i = 0; i < n; ++i) {
    SimThread& t = run.threads[i];
    t.linear = i;
    t.block = &run;
    t.state.block_dim = block;
    t.state.grid_dim = grid.launch->grid;
    t.state.lane = i % kWarpSize;
    t.state.warp = i / kWarpSize;
    t.state.thread_idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
  }
  // Shared memory: the dynamic region 16-byte aligned and no more (offset 48 of a page-aligned
  // buffer), then room for 48 KiB of variables with their redzones.
  run.dynamic_offset = 48;
  const size_t dynamic_end = run.dynamic_offset + grid.launch->dynamic_smem;
  run.smem_capacity = dynamic_end + kRedzone + kStaticSharedLimit + (16 << 10);
  take_slot_memory(run, grid.checks.race);
  run.high_water = run.smem_capacity;  // poison everything before the first block
}

void release_slot(BlockRun& run) { give_slot_memory(run); }

// Starts the next block of the grid in `run`'s slot, or leaves the slot idle.
void start_next_block(GridRun& grid, BlockRun& run) {
  counters_flush_block(run);  // the previous block's lanes are all done
  if (grid.next_block >= grid.blocks) {
    run.active = false;
    return;
  }
  run.linear_block = nth_block(grid, grid.next_block++);
  run.block_idx = block_index(grid, run.linear_block);
  run.active = true;
  run.exited = 0;
  const unsigned n = grid.threads_per_block;
  for (SimThread& t : run.threads) {
    t.state.block_idx = run.block_idx;
    t.status = Status::ready;
    t.context = nullptr;
    t.started = false;
    t.lost = false;
    t.checks_on = false;
    t.pending_write.active = false;
    t.shared_begin = t.shared_end = 0;
    t.global_begin = t.global_end = 0;
    t.global_written = nullptr;
    t.log_entry = nullptr;
    t.shadow_key = UINTPTR_MAX;
    t.fake_stack = nullptr;
    t.open_copies.clear();
    t.copy_groups.clear();
    t.occurrences.clear();
  }
  for (size_t w = 0; w < run.warps.size(); ++w) {
    Warp& warp = run.warps[w];
    const unsigned lanes = std::min(kWarpSize, n - static_cast<unsigned>(w) * kWarpSize);
    warp.lanes = lanes == kWarpSize ? ~0u : (1u << lanes) - 1;
    warp.exited = ~warp.lanes;  // lanes that do not exist count as exited
    warp.runnable = static_cast<unsigned>(__builtin_popcount(warp.lanes));
    warp.at_activemask = 0;
    warp.pending.clear();
    warp.sync_gen = 0;
  }
  run.barrier.arrived = 0;
  run.barrier.waiters.clear();
  // Shared memory: everything the previous block used back to 0xFF, variables placed anew.
  asan_unpoison(run.smem, run.smem_capacity);
  std::memset(run.smem, 0xFF, run.high_water);
  asan_poison(run.smem, run.smem_capacity);
  asan_unpoison(run.smem + run.dynamic_offset, grid.launch->dynamic_smem);
  run.cursor = run.dynamic_offset + grid.launch->dynamic_smem + kRedzone;
  run.high_water = run.cursor;
  run.static_bytes = 0;
  run.variables.clear();
  new_epoch(run);
  std::vector<unsigned> ids(n);
  for (unsigned i = 0; i < n; ++i) ids[i] = i;
  release_in_order(grid, run, ids);
  note_progress(grid);
}

// ---- Warp collectives --------------------------------------------------------------------------
// Completes warp `warp_index`'s pending collective number `pending_index`: combine for every lane
// that arrived (exited lanes get nullptr), release them all but `caller` (which goes on itself).
void complete_collective(BlockRun& run, unsigned warp_index, size_t pending_index, const SimThread* caller) {
  Warp& warp = run.warps[warp_index];
  PendingCollective done = warp.pending[pending_index];
  warp.pending[pending_index] = warp.pending.back();
  warp.pending.pop_back();
  const unsigned arrived = done.arrived & ~warp.exited;
  WarpCollectiveArgs args{done.mask, done.in, done.out};
  (*done.combine)(args);
  if (done.what[0] == '_' && std::strcmp(done.what, "__syncwarp") == 0) {
    ++warp.sync_gen;
    warp.sync_masks[warp.sync_gen % kSyncHistory] = done.mask | warp.exited;
  }
  std::vector<unsigned> ids;
  const unsigned base = warp_index * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((arrived >> l & 1u) == 0 || &run.threads[base + l] == caller) continue;
    lane_released(run, run.threads[base + l]);
    ids.push_back(base + l);
  }
  release_in_order(*run.grid, run, ids);
  note_progress(*run.grid);
}

bool collective_complete(const Warp& warp, const PendingCollective& p) {
  return ((p.arrived | warp.exited) & p.mask) == p.mask;
}

// A thread exits: waiting collectives stop waiting for it, and a barrier it held up is released
// (PTX `exit`: "if the exiting threads are holding up the barrier, the barrier is released").
void lane_exits(BlockRun& run, SimThread& me) {
  Warp& warp = run.warps[me.state.warp];
  const unsigned bit = 1u << me.state.lane;
  warp.exited |= bit;
  lane_blocked(run, me.state.warp);
  for (size_t i = 0; i < warp.pending.size();) {
    PendingCollective& p = warp.pending[i];
    if ((p.mask & bit) == 0) {
      ++i;
      continue;
    }
    if (p.all_lanes) {
      fault_with_code(std::string(p.what) + " waits for lane " + std::to_string(me.state.lane) +
                          ", which exited: the instruction is .aligned (every lane of the warp must execute it)",
                      cudaErrorLaunchFailure);
    }
    if (collective_complete(warp, p)) {
      complete_collective(run, me.state.warp, i, &me);
      continue;  // the vector changed: look at index i again
    }
    ++i;
  }
  if (run.barrier.arrived > 0 && run.barrier.arrived + run.exited == run.threads.size()) release_block_barrier(run);
  GridRun& grid = *run.grid;
  if (grid.launch->cooperative && grid.grid_arrived > 0) {
    unsigned live = 0;
    for (const auto& slot : grid.slots) live += static_cast<unsigned>(slot->threads.size()) - slot->exited;
    if (grid.grid_arrived == live) release_grid_barrier(grid);
  }
}

void release_block_barrier(BlockRun& run) {
  Barrier& b = run.barrier;
  if (run.grid->checks.strictsync && run.exited > 0) {
    std::vector<unsigned> waiting(b.waiters.begin(), b.waiters.end()), gone;
    std::sort(waiting.begin(), waiting.end());
    for (const SimThread& t : run.threads)
      if (t.status == Status::exited) gone.push_back(t.linear);
    fault_with_code(site(b.what, b.file, b.line) + " completed by " + id_list("thread", "threads", waiting) +
                        " while " + id_list("thread", "threads", gone) +
                        (gone.size() == 1 ? " has" : " have") +
                        " exited without reaching it (strictsync): PTX releases such a barrier (exited threads do "
                        "not hold it up), but __syncthreads is bar.sync.aligned, which the CUDA programming guide "
                        "allows in conditional code only where the condition is the same across the block",
                    cudaErrorLaunchFailure);
  }
  const int result = b.count;
  for (unsigned w : b.waiters) {
    run.threads[w].barrier_result = result;
    lane_released(run, run.threads[w]);
  }
  release_in_order(*run.grid, run, b.waiters);
  b.waiters.clear();
  b.arrived = 0;
  count_block_barrier(run);
  counters_flush_block(run);  // every live lane has passed what came before
  new_epoch(run);
  note_progress(*run.grid);
}

void release_grid_barrier(GridRun& grid) {
  note_grid_barrier(grid);
  std::vector<SimThread*> waiters = grid.grid_waiters;
  if (grid.schedule.order == Order::reverse) std::reverse(waiters.begin(), waiters.end());
  for (SimThread* t : waiters) {
    lane_released(*t->block, *t);
    make_ready(grid, *t);
  }
  grid.grid_waiters.clear();
  grid.grid_arrived = 0;
  for (auto& slot : grid.slots) {
    counters_flush_block(*slot);
    new_epoch(*slot);
  }
  note_progress(grid);
}

}  // namespace

// ---- Executor services (executor_state.h) ---------------------------------------------------------
GridRun* current_grid() { return t_grid; }
SimThread* current_sim_thread() { return t_thread; }

std::string where(const BlockRun& run) {
  return "kernel " + kernel_label(*run.grid->launch) + ", block " + dims(run.block_idx);
}

std::string thread_name(const SimThread& t) {
  return "thread " + dims(t.state.thread_idx) + " (linear " + std::to_string(t.linear) + ", warp " +
         std::to_string(t.state.warp) + " lane " + std::to_string(t.state.lane) + ")";
}

std::string thread_name(const BlockRun& block, unsigned linear) { return thread_name(block.threads[linear]); }

[[noreturn]] void fault_with_code(const std::string& message, cudaError_t code) {
  if (t_grid == nullptr || t_thread == nullptr) throw Fault(message, code);
  throw NamedFault(where(*t_thread->block) + ", " + thread_name(*t_thread) + ": " + message + schedule_note(*t_grid),
                   code);
}

void note_progress(GridRun& grid) {
  grid.polls_without_progress = 0;
  // The watchdog only needs to see that something moves: publish one in 256 (stores are many).
  if ((++grid.progress_ticks & 255u) == 0) g_progress.fetch_add(1, std::memory_order_relaxed);
}

// `message` is moved out before the jump: the caller's frame is never unwound, so a string it
// still owned would leak (the callers build it in a statement of its own for the same reason).
[[noreturn]] void abandon_thread(std::string&& message, cudaError_t code) {
  set_error(*t_grid, std::move(message), code);
  abandon(*t_grid, *t_thread);
}

void poll(GridRun& grid, SimThread& me) {
  if (++grid.polls_without_progress > grid.spin_budget) {
    std::string message =
        where(*me.block) + ", " + thread_name(me) + ": no progress after " + std::to_string(grid.spin_budget) +
                       " polls (atomics, volatile accesses, fences, __nanosleep) with nothing else to run: a "
                       "spin-wait that cannot finish. Blocks run " +
                       (grid.slots.size() == 1 ? std::string("one at a time")
                                               : std::to_string(grid.slots.size()) + " at a time") +
                       " on the simulated GPU, and a GPU does not promise that a block waited for is resident "
                       "either (order inter-block work by an atomic ticket, not by blockIdx; or launch "
                       "cooperatively). BLOCKSCOPE_SIM_SPIN_BUDGET sets the limit";
    abandon_thread(std::move(message), cudaErrorLaunchFailure);
  }
  make_ready(grid, me);
  suspend(grid, me, false);
}

void preempt(GridRun& grid, SimThread& me) {
  if (grid.next_random() % kPreemptOneIn != 0) return;
  make_ready(grid, me);
  suspend(grid, me, false);
}

}  // namespace exec

using namespace exec;

// ---- Schedule (the settings themselves: settings.cpp) ----------------------------------------
// A new schedule is a new run: its grids count from 1 again, so the same seed replays it.
void set_schedule(const Schedule& schedule) {
  std::lock_guard<std::mutex> lock(g_grid_mutex);
  schedule_setting() = schedule;
  g_grid_count = 0;
}

// ---- Public: grid ----------------------------------------------------------------------------
void run_grid(const GridLaunch& launch, const std::function<void()>& body) {
  if (t_grid != nullptr) throw Fault(std::string("run_grid of ") + launch.name + " from inside a running kernel");
  const dim3 block = launch.block, g = launch.grid;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || g.x == 0 || g.y == 0 || g.z == 0) {
    throw Fault(std::string("run_grid of ") + launch.name + ": invalid launch configuration");
  }
  std::lock_guard<std::mutex> lock(g_grid_mutex);
  install_overflow_handler();
  start_watchdog();

  GridRun grid;
  grid.launch = &launch;
  grid.body = &body;
  grid.schedule = current_schedule();
  grid.checks = current_checks();
  grid.grid_number = ++g_grid_count;
  grid.rng = grid.schedule.seed * 0x100000001B3ull ^ grid.grid_number;
  grid.preempt = grid.schedule.order == Order::random;
  grid.counters = counters_begin_grid(grid);
  grid.hooks = grid.checks.race || grid.checks.memcheck || grid.checks.initcheck || grid.checks.streams ||
               grid.preempt || grid.counters != nullptr;
  grid.spin_budget = env_u64("BLOCKSCOPE_SIM_SPIN_BUDGET", uint64_t{1} << 20);
  grid.threads_per_block = static_cast<unsigned>(threads);
  grid.blocks = uint64_t{g.x} * g.y * g.z;
  if (grid.schedule.order == Order::random && grid.blocks > 1) {
    grid.block_offset = grid.next_random() % grid.blocks;
    do {
      grid.block_stride = 1 + grid.next_random() % grid.blocks;
    } while (gcd(grid.block_stride, grid.blocks) != 1);
  }
  uint64_t resident = 1;
  if (launch.cooperative) {
    resident = grid.blocks;
  } else if (grid.schedule.order == Order::random) {
    resident = std::min<uint64_t>(grid.blocks, kRandomResidentBlocks);
  }
  grid.device = launch.device;

  struct Cleanup {
    GridRun& grid;
    ~Cleanup() {
      checks_end_grid(grid);
      for (auto& slot : grid.slots) release_slot(*slot);
      t_grid = nullptr;
      t_thread = nullptr;
      g_watched.store(nullptr);
    }
  } cleanup{grid};
  for (uint64_t i = 0; i < resident; ++i) {
    grid.slots.push_back(std::make_unique<BlockRun>());
    grid.slots.back()->slot = static_cast<unsigned>(i);
    prepare_slot(grid, *grid.slots.back());
  }
  checks_begin_grid(grid);
  t_grid = &grid;
  g_watched.store(&launch);
  for (auto& slot : grid.slots) start_next_block(grid, *slot);

  while (!grid.aborting) {
    SimThread* t = pick(grid);
    if (t == nullptr) break;
    resume(grid, *t);
    BlockRun& run = *t->block;
    if (run.active && run.exited == run.threads.size() && !grid.aborting) start_next_block(grid, run);
  }
  if (!grid.aborting) {
    for (const auto& slot : grid.slots) {
      if (slot->active) {
        set_error(grid, deadlock_message(grid), cudaErrorLaunchFailure);
        break;
      }
    }
  }
  if (!grid.aborting) counters_end_grid(grid);
  if (grid.aborting) {
    // Unwind every started thread (destructors of its locals run); unstarted ones never start.
    for (auto& slot : grid.slots) {
      if (!slot->active) continue;
      for (SimThread& t : slot->threads) {
        if (t.context != nullptr && !t.lost) resume(grid, t);
      }
    }
    throw Fault(grid.error, grid.error_code);
  }
}

// ---- Public: kernel side ---------------------------------------------------------------------
const ThreadState& current_thread() {
  if (t_thread == nullptr) throw Fault("threadIdx/blockIdx/blockDim/gridDim read outside a kernel running on the simulated GPU");
  return t_thread->state;
}
uint3 thread_idx() { return current_thread().thread_idx; }
uint3 block_idx() { return current_thread().block_idx; }
dim3 block_dim() { return current_thread().block_dim; }
dim3 grid_dim() { return current_thread().grid_dim; }

[[noreturn]] void fault(const char* message) { fault_with_code(message, cudaErrorLaunchFailure); }

void* dynamic_shared_memory() {
  require_grid("dynamic shared memory");
  return t_thread->block->smem + t_thread->block->dynamic_offset;
}
size_t dynamic_shared_bytes() { return require_grid("dynamic shared memory").launch->dynamic_smem; }

void* shared_variable(const SharedSite* site) {
  GridRun& grid = require_grid("a __shared__ variable");
  BlockRun& run = *t_thread->block;
  for (const SharedVariable& v : run.variables) {
    if (v.site == site) return run.smem + v.offset;
  }
  size_t align = std::max<size_t>(site->align, 1);
  size_t offset = (run.cursor + align - 1) / align * align;
  if (align < 16 && offset % (2 * align) == 0) offset += align;  // aligned to `align`, not more
  run.static_bytes += site->size;
  if (run.static_bytes > kStaticSharedLimit) {
    fault_with_code("__shared__ " + std::string(site->name) + " (" + site->file + ":" + std::to_string(site->line) +
                        ") brings the kernel's static shared memory to " + std::to_string(run.static_bytes) +
                        " bytes, over the 48 KiB ptxas accepts (use dynamic shared memory and the opt-in attribute)",
                    cudaErrorLaunchOutOfResources);
  }
  if (run.static_bytes + grid.launch->dynamic_smem > kSharedPerBlockOptin) {
    fault_with_code("static (" + std::to_string(run.static_bytes) + " bytes) and dynamic (" +
                        std::to_string(grid.launch->dynamic_smem) + " bytes) shared memory exceed the 227 KiB of a block",
                    cudaErrorLaunchOutOfResources);
  }
  if (offset + site->size + kRedzone > run.smem_capacity) {
    fault_with_code("__shared__ variables need more room than the simulator set aside", cudaErrorLaunchOutOfResources);
  }
  run.variables.push_back(SharedVariable{site, offset});
  run.cursor = offset + site->size + kRedzone;
  run.high_water = std::max(run.high_water, run.cursor);
  asan_unpoison(run.smem + offset, site->size);
  return run.smem + offset;
}

int sync_block_at(const char* what, const char* file, int line, int predicate) {
  GridRun& grid = require_grid(what);
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  Barrier& b = run.barrier;
  if (b.arrived == 0) {
    b.what = what;
    b.file = file;
    b.line = line;
    b.count = 0;
  } else {
    const bool same_file = file == nullptr || b.file == nullptr || file == b.file || std::strcmp(file, b.file) == 0;
    const bool same_line = file == nullptr || b.file == nullptr || line == b.line;
    if ((what != b.what && std::strcmp(what, b.what) != 0) || !same_file || !same_line) {
      std::vector<unsigned> waiting(b.waiters.begin(), b.waiters.end());
      std::sort(waiting.begin(), waiting.end());
      fault(("divergent barrier: arrives at " + site(what, file, line) + " while " +
             id_list("thread", "threads", waiting) + " wait at " + site(b.what, b.file, b.line))
                .c_str());
    }
  }
  b.count += predicate != 0;
  ++b.arrived;
  me.status = Status::barrier;
  b.waiters.push_back(me.linear);
  lane_blocked(run, me.state.warp);
  if (b.arrived + run.exited == run.threads.size()) {
    // Last to arrive: release everyone (this thread too, through the queue, so that the
    // schedule decides who goes first).
    release_block_barrier(run);
  }
  suspend(grid, me);
  return me.barrier_result;
}

void sync_block() { sync_block_at("__syncthreads", nullptr, 0, 0); }

bool grid_is_cooperative() { return require_grid("this_grid()").launch->cooperative; }

void sync_grid() {
  GridRun& grid = require_grid("this_grid().sync()");
  if (!grid.launch->cooperative) {
    fault("this_grid().sync() in a grid not launched with cudaLaunchCooperativeKernel: its blocks are not all "
          "resident at once, so the grid barrier could never be met");
  }
  SimThread& me = *t_thread;
  me.status = Status::grid_barrier;
  lane_blocked(*me.block, me.state.warp);
  grid.grid_waiters.push_back(&me);
  unsigned live = 0;
  for (const auto& slot : grid.slots) live += static_cast<unsigned>(slot->threads.size()) - slot->exited;
  if (++grid.grid_arrived == live) release_grid_barrier(grid);
  suspend(grid, me);
}

void warp_collective(const char* what, unsigned mask, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                     CombineStep combine, bool all_lanes) {
  GridRun& grid = require_grid(what);
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  Warp& warp = run.warps[me.state.warp];
  const unsigned lane = me.state.lane, bit = 1u << lane;
  if ((mask & bit) == 0) {
    fault((std::string(what) + " with mask " + hex(mask) + ", which does not include the calling lane " +
           std::to_string(lane))
              .c_str());
  }
  if (all_lanes && (warp.exited & mask) != 0) {
    fault((std::string(what) + " with " + id_list("lane", "lanes", lanes_of(warp.exited & mask)) +
           " of the warp exited or absent: the instruction is .aligned (every lane of the warp must execute it)")
              .c_str());
  }
  size_t index = warp.pending.size();
  for (size_t i = 0; i < warp.pending.size(); ++i) {
    if ((warp.pending[i].mask & mask) != 0) index = i;
  }
  if (index == warp.pending.size()) {
    warp.pending.emplace_back();
    PendingCollective& p = warp.pending.back();
    p.what = what;
    p.mask = mask;
    p.in_bytes = in_bytes;
    p.out_bytes = out_bytes;
    p.all_lanes = all_lanes;
    p.combine = &combine;
  } else {
    const PendingCollective& p = warp.pending[index];
    const bool same_what = p.what == what || std::strcmp(p.what, what) == 0;
    if (p.mask != mask || !same_what || p.in_bytes != in_bytes || p.out_bytes != out_bytes) {
      fault((std::string(what) + " with mask " + hex(mask) + " while " + id_list("lane", "lanes", lanes_of(p.arrived)) +
             " of warp " + std::to_string(me.state.warp) + " wait at " + p.what + " with mask " + hex(p.mask) +
             (p.mask == mask && std::strcmp(p.what, what) == 0 ? " (a different operand type)" : ""))
                .c_str());
    }
  }
  PendingCollective& p = warp.pending[index];
  p.in[lane] = in;
  p.out[lane] = out;
  p.arrived |= bit;
  if (!collective_complete(warp, p)) {
    p.combine = &combine;  // this lane's copy stays alive while it waits
    me.status = Status::warp;
    lane_blocked(run, me.state.warp);
    suspend(grid, me);
    return;
  }
  // Last to arrive: combine for everyone, release the others, go on.
  p.combine = &combine;
  complete_collective(run, me.state.warp, index, &me);
}

unsigned active_lanes() {
  GridRun& grid = require_grid("__activemask");
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  run.warps[me.state.warp].at_activemask |= 1u << me.state.lane;
  me.status = Status::activemask;
  lane_blocked(run, me.state.warp);  // may release this lane (and the others) at once
  suspend(grid, me);
  return static_cast<unsigned>(me.barrier_result);
}

unsigned warp_lanes() {
  require_grid("warp_lanes");
  return t_thread->block->warps[t_thread->state.warp].lanes;
}

void yield_thread() {
  GridRun& grid = require_grid("__nanosleep");
  poll(grid, *t_thread);
}

void fence() {
  GridRun& grid = require_grid("__threadfence");
  note_sync(grid, *t_thread);
  poll(grid, *t_thread);
}

long long sm_cycles() {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  return ns + ns / 50 * 49 + ns % 50 * 49 / 50;  // 1.98 cycles per nanosecond, without overflowing ns * 198
}

}  // namespace blockscope::sim
