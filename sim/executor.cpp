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
//
// Apart from it, with what they share in executor_internal.h: barriers and warp collectives
// (executor_sync.cpp), shared memory (executor_shared.cpp), the stack-overflow handler and the
// watchdog (executor_guards.cpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sim/executor_internal.h"
#include "sim/fiber_stacks.h"

// The built-in variables kernels read (declared by sim/kernel_prelude.h): the GPU thread being
// run on this host thread, set by resume(). Defined together, one after the other, so that the
// access hooks can pass over them as one range (builtin_variables).
thread_local uint3 threadIdx{};
thread_local uint3 blockIdx{};
thread_local dim3 blockDim{};
thread_local dim3 gridDim{};

namespace blockscope::sim {
namespace exec {

thread_local GridRun* t_grid = nullptr;
thread_local SimThread* t_thread = nullptr;

namespace {

// ---- Configuration ------------------------------------------------------------------------------
constexpr unsigned kRandomResidentBlocks = 2;
constexpr unsigned kPreemptOneIn = 128;  // random schedule: switch at about 1 access in 128

// A Fault whose message already names kernel, block and thread.
struct NamedFault : Fault {
  using Fault::Fault;
};

std::mutex g_grid_mutex;
StackPool g_stacks;  // guarded by g_grid_mutex
uint64_t g_grid_count = 0;

// ---- Messages --------------------------------------------------------------------------------
std::string dims(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

// What reproduces the run: appended to every fault of a schedule other than inorder.
std::string schedule_note(const GridRun& grid) {
  if (grid.schedule.order == Order::inorder) return "";
  const std::string name = schedule_name(grid.schedule);
  return " [schedule " + name + ", grid " + std::to_string(grid.grid_number) + " of the process; BLOCKSCOPE_SIM_SCHEDULE=" +
         name + " replays it]";
}

}  // namespace

// The kernel's own name when its address is known (a launch through a pointer spells the
// pointer), else the name the launch spelled.
std::string kernel_label(const GridLaunch& launch) {
  if (launch.function != nullptr) {
    const std::string real = short_function_name(launch.function);
    if (!real.empty()) return real;
  }
  return launch.name;
}

void set_error(GridRun& grid, std::string message, cudaError_t code) {
  if (grid.error.empty()) {
    grid.error = std::move(message) + schedule_note(grid);
    grid.error_code = code;
  }
  grid.aborting = true;
}

namespace {

// ---- The queue of runnable threads -----------------------------------------------------------
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

// ---- Switching -------------------------------------------------------------------------------
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
  if (!me.copy_groups.empty()) me.copy_groups.clear();
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
  ::threadIdx = t.state.thread_idx;
  ::blockIdx = t.state.block_idx;
  ::blockDim = t.state.block_dim;
  ::gridDim = t.state.grid_dim;
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

}  // namespace

void suspend(GridRun& grid, SimThread& me, bool may_throw) {
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

namespace {

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
  prepare_shared_memory(grid, run);
}

void release_slot(BlockRun& run) { release_shared_memory(run); }

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
    t.unseen_write.active = false;
    t.shared_begin = t.shared_end = 0;
    t.global_begin = t.global_end = 0;
    t.global_written = nullptr;
    t.log_entry = nullptr;
    t.shadow_key = UINTPTR_MAX;
    t.fake_stack = nullptr;
    // Cleared only when not empty: an empty deque's or unordered_map's clear() still writes its
    // buckets or map, and this runs for every thread of every block.
    t.open_copies.clear();
    if (!t.copy_groups.empty()) t.copy_groups.clear();
    if (!t.occurrences.empty()) t.occurrences.clear();
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
  reset_shared_memory(grid, run);
  new_epoch(run);
  std::vector<unsigned> ids(n);
  for (unsigned i = 0; i < n; ++i) ids[i] = i;
  release_in_order(grid, run, ids);
  note_progress(grid);
}

}  // namespace

// ---- Executor services (executor_state.h) ---------------------------------------------------------
GridRun* current_grid() { return t_grid; }
SimThread* current_sim_thread() { return t_thread; }

std::pair<uintptr_t, size_t> builtin_variables() {
  const uintptr_t addresses[] = {reinterpret_cast<uintptr_t>(&::threadIdx), reinterpret_cast<uintptr_t>(&::blockIdx),
                                 reinterpret_cast<uintptr_t>(&::blockDim), reinterpret_cast<uintptr_t>(&::gridDim)};
  const uintptr_t low = *std::min_element(std::begin(addresses), std::end(addresses));
  const uintptr_t high = *std::max_element(std::begin(addresses), std::end(addresses)) + sizeof(dim3);
  return {low, high - low};
}

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

void kernel_body_entered(const char* kernel) {
  if (t_thread != nullptr) return;
  throw Fault(std::string("__global__ function ") + kernel +
              " called as a host function, without <<<>>> or a launch API: a kernel runs only when launched");
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
