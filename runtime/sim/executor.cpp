// The kernel executor of the simulated GPU: one grid at a time (a global mutex), its blocks one
// after another in linear order (blockIdx.x fastest), every thread of a block a fiber. Fibers are
// cooperative: a thread runs until it exits or blocks at a barrier or a warp collective, then the
// scheduler resumes the next runnable thread (FIFO, so threads advance round-robin).
//
// The raw fcontext layer of Boost.Context is used instead of boost::context::fiber because
// starting a fiber then costs no allocation and no extra switch, and every switch goes through
// one place where AddressSanitizer is told about it (fiber's own creation switch is not).
#include <boost/context/detail/fcontext.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "runtime/sim/device.h"
#include "runtime/sim/sim.h"

#if defined(__SANITIZE_ADDRESS__)
#define BLOCKSCOPE_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKSCOPE_SIM_ASAN 1
#endif
#endif
#ifdef BLOCKSCOPE_SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace blockscope::sim {
namespace {

namespace fc = boost::context::detail;

constexpr unsigned kWarpSize = 32;

// ---- ASan fiber annotations (no-ops in other builds) -----------------------------------------
inline void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef BLOCKSCOPE_SIM_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}
inline void finish_switch(void* fake_stack_save, const void** old_bottom, size_t* old_size) {
#ifdef BLOCKSCOPE_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
#else
  (void)fake_stack_save, (void)old_bottom, (void)old_size;
#endif
}

// ---- Fiber stacks ----------------------------------------------------------------------------
// mmap'ed once with a PROT_NONE guard page below, kept in a LIFO pool: a barrier-free kernel
// reuses one warm stack for every thread.
size_t stack_bytes() {
#ifdef BLOCKSCOPE_SIM_ASAN
  size_t kib = 256;  // instrumented frames are several times larger
#else
  size_t kib = 64;
#endif
  if (const char* env = std::getenv("BLOCKSCOPE_SIM_STACK_KIB")) {
    const long value = std::atol(env);
    if (value >= 16) kib = static_cast<size_t>(value);
  }
  return kib << 10;
}

struct Stack {
  char* base = nullptr;  // lowest usable byte; the guard page is just below
  size_t size = 0;
};

class StackPool {
 public:
  Stack take() {
    if (!free_.empty()) {
      Stack stack = free_.back();
      free_.pop_back();
      return stack;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t size = stack_bytes();
    void* mem = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    mprotect(mem, page, PROT_NONE);  // a kernel overflowing its stack faults here, not in a neighbour
    return Stack{static_cast<char*>(mem) + page, size};
  }
  void give(Stack stack) { free_.push_back(stack); }

 private:
  std::vector<Stack> free_;  // stacks live as long as the process: no munmap at exit needed
};

// ---- One block's threads ---------------------------------------------------------------------
enum class Status : unsigned char { ready, barrier, warp, activemask, exited };

struct SimThread {
  ThreadState state;
  unsigned linear = 0;
  fc::fcontext_t context = nullptr;  // where to resume it; null before it starts and after it exits
  Stack stack;
  Status status = Status::ready;
  int barrier_result = 0;
  void* fake_stack = nullptr;  // ASan's fake stack while switched out
};

struct PendingCollective {
  const char* what = "";
  unsigned mask = 0, arrived = 0;
  size_t in_bytes = 0, out_bytes = 0;
  const void* in[kWarpSize] = {};
  void* out[kWarpSize] = {};
};

struct Warp {
  unsigned lanes = 0;   // lanes that exist
  unsigned exited = 0;  // lanes that have exited
  unsigned runnable = 0;          // lanes neither blocked nor exited
  unsigned at_activemask = 0;     // lanes waiting in __activemask
  std::vector<PendingCollective> pending;  // disjoint masks: divergent halves may sync apart
};

struct Barrier {
  const char* what = "";
  const char* file = nullptr;
  int line = 0;
  unsigned arrived = 0;
  int count = 0;  // arrivals with a non-zero predicate
  std::vector<unsigned> waiters;
};

// Thrown into blocked threads to unwind their stacks when the grid ends at a fault. Not a
// std::exception, so a kernel's catch (const std::exception&) does not stop it.
struct AbortGrid {};

// A Fault whose message already names kernel, block and thread (from fault()).
struct NamedFault : Fault {
  using Fault::Fault;
};

struct BlockRun {
  const GridLaunch* launch = nullptr;
  const std::function<void()>* body = nullptr;
  uint3 block_idx{};
  std::vector<SimThread> threads;
  std::vector<Warp> warps;
  Barrier barrier;
  std::vector<unsigned> ready;  // FIFO of runnable threads: ring of threads.size() + 1 slots
  size_t head = 0, tail = 0;
  unsigned exited = 0;
  SimThread* running = nullptr;
  fc::fcontext_t scheduler = nullptr;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  bool aborting = false;
  std::string error;  // the first fault's message
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;

  void push(unsigned i) {
    ready[tail] = i;
    tail = tail + 1 == ready.size() ? 0 : tail + 1;
  }
  bool pop(unsigned* i) {
    if (head == tail) return false;
    *i = ready[head];
    head = head + 1 == ready.size() ? 0 : head + 1;
    return true;
  }
};

// A lane stops being runnable (blocks or exits). __activemask waiters are released once no lane
// of their warp can still run: the lanes waiting there together are the active mask.
void lane_blocked(BlockRun& run, unsigned warp_index) {
  Warp& warp = run.warps[warp_index];
  --warp.runnable;
  if (warp.runnable != 0 || warp.at_activemask == 0) return;
  const unsigned base = warp_index * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((warp.at_activemask >> l & 1u) == 0) continue;
    SimThread& t = run.threads[base + l];
    t.barrier_result = static_cast<int>(warp.at_activemask);
    t.status = Status::ready;
    run.push(base + l);
  }
  warp.runnable += static_cast<unsigned>(__builtin_popcount(warp.at_activemask));
  warp.at_activemask = 0;
}

void lane_released(BlockRun& run, SimThread& t) {
  t.status = Status::ready;
  ++run.warps[t.state.warp].runnable;
}

std::mutex g_grid_mutex;
StackPool g_stacks;  // guarded by g_grid_mutex
thread_local BlockRun* t_run = nullptr;
thread_local SimThread* t_thread = nullptr;
void* const kFinished = reinterpret_cast<void*>(uintptr_t{1});

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

std::string where(const BlockRun& run) {
  return std::string("kernel ") + run.launch->name + ", block " + dims(run.block_idx);
}

std::string thread_name(const SimThread& t) {
  return "thread " + dims(t.state.thread_idx) + " (linear " + std::to_string(t.linear) + ", warp " +
         std::to_string(t.state.warp) + " lane " + std::to_string(t.state.lane) + ")";
}

// Why the block cannot go on: who waits where, who has exited.
std::string deadlock_message(const BlockRun& run) {
  std::vector<unsigned> exited, at_barrier;
  for (const SimThread& t : run.threads) {
    if (t.status == Status::exited) exited.push_back(t.linear);
    if (t.status == Status::barrier) at_barrier.push_back(t.linear);
  }
  std::vector<std::string> parts;
  if (!at_barrier.empty()) {
    std::string part = site(run.barrier.what, run.barrier.file, run.barrier.line) + " in " + where(run) + ": " +
                       id_list("thread", "threads", at_barrier) + " wait at the barrier";
    if (!exited.empty()) part += ", " + id_list("thread", "threads", exited) + (exited.size() == 1 ? " has" : " have") + " exited";
    parts.push_back(part);
  }
  for (size_t w = 0; w < run.warps.size(); ++w) {
    for (const PendingCollective& p : run.warps[w].pending) {
      std::string part = std::string(p.what) + " mask " + hex(p.mask) + " in " + where(run) + ", warp " +
                         std::to_string(w) + ": " + id_list("lane", "lanes", lanes_of(p.arrived)) + " arrived";
      std::vector<unsigned> gone, elsewhere;
      for (unsigned l : lanes_of(p.mask & ~p.arrived)) {
        const SimThread& t = run.threads[w * kWarpSize + l];
        (t.status == Status::exited ? gone : elsewhere).push_back(l);
      }
      if (!gone.empty()) part += ", " + id_list("lane", "lanes", gone) + (gone.size() == 1 ? " has" : " have") + " exited";
      if (!elsewhere.empty()) {
        part += ", " + id_list("lane", "lanes", elsewhere) + " wait elsewhere (";
        part += at_barrier.empty() ? "another warp collective" : "__syncthreads or another warp collective";
        part += ")";
      }
      parts.push_back(part);
    }
  }
  std::string message = "deadlock: ";
  for (size_t i = 0; i < parts.size(); ++i) message += (i ? "; " : "") + parts[i];
  if (parts.empty()) message += where(run) + ": threads blocked with nothing to wait for";
  return message;
}

// ---- Switching -------------------------------------------------------------------------------
[[noreturn]] void thread_entry(fc::transfer_t from) {
  BlockRun* run = static_cast<BlockRun*>(from.data);
  run->scheduler = from.fctx;
  finish_switch(nullptr, &run->scheduler_bottom, &run->scheduler_size);
  SimThread& me = *run->running;
  try {
    (*run->body)();
  } catch (const AbortGrid&) {
  } catch (const NamedFault& fault) {
    if (run->error.empty()) run->error = fault.what();
  } catch (const std::exception& error) {
    if (run->error.empty()) run->error = where(*run) + ", " + thread_name(me) + ": uncaught exception: " + error.what();
  } catch (...) {
    if (run->error.empty()) run->error = where(*run) + ", " + thread_name(me) + ": uncaught exception of unknown type";
  }
  if (!run->error.empty()) run->aborting = true;
  me.status = Status::exited;
  run->warps[me.state.warp].exited |= 1u << me.state.lane;
  ++run->exited;
  lane_blocked(*run, me.state.warp);
  start_switch(nullptr, run->scheduler_bottom, run->scheduler_size);  // this fiber's fake stack dies
  fc::jump_fcontext(run->scheduler, kFinished);
  std::abort();  // a finished thread is never resumed
}

void resume(BlockRun& run, SimThread& t) {
  if (t.context == nullptr) {
    t.stack = g_stacks.take();
    t.context = fc::make_fcontext(t.stack.base + t.stack.size, t.stack.size, &thread_entry);
  }
  run.running = &t;
  t_thread = &t;
  start_switch(&run.scheduler_fake_stack, t.stack.base, t.stack.size);
  const fc::transfer_t back = fc::jump_fcontext(t.context, &run);
  finish_switch(run.scheduler_fake_stack, nullptr, nullptr);
  t_thread = nullptr;
  if (back.data == kFinished) {
    g_stacks.give(t.stack);
    t.context = nullptr;
  } else {
    t.context = back.fctx;
  }
}

// Called on the blocked thread's fiber: back to the scheduler until released.
void suspend(BlockRun& run, SimThread& me) {
  start_switch(&me.fake_stack, run.scheduler_bottom, run.scheduler_size);
  const fc::transfer_t back = fc::jump_fcontext(run.scheduler, nullptr);
  finish_switch(me.fake_stack, nullptr, nullptr);
  run.scheduler = back.fctx;
  if (run.aborting) throw AbortGrid{};
}

BlockRun& require_run(const char* what) {
  if (t_run == nullptr || t_thread == nullptr) {
    throw Fault(std::string(what) + " called outside a kernel running on the simulated GPU");
  }
  if (t_run->aborting) throw AbortGrid{};
  return *t_run;
}

// ---- One block -------------------------------------------------------------------------------
void run_block(BlockRun& run) {
  const dim3 block = run.launch->block;
  const unsigned n = static_cast<unsigned>(run.threads.size());
  for (unsigned i = 0; i < n; ++i) {
    SimThread& t = run.threads[i];
    t.state.thread_idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    t.state.block_idx = run.block_idx;
    t.status = Status::ready;
    t.context = nullptr;
    t.fake_stack = nullptr;
  }
  for (size_t w = 0; w < run.warps.size(); ++w) {
    const unsigned lanes = std::min(kWarpSize, n - static_cast<unsigned>(w) * kWarpSize);
    run.warps[w].lanes = lanes == kWarpSize ? ~0u : (1u << lanes) - 1;
    run.warps[w].exited = 0;
    run.warps[w].runnable = static_cast<unsigned>(__builtin_popcount(run.warps[w].lanes));
    run.warps[w].at_activemask = 0;
    run.warps[w].pending.clear();
  }
  run.barrier.arrived = 0;
  run.barrier.waiters.clear();
  run.exited = 0;
  run.head = 0;
  run.tail = 0;
  for (unsigned i = 0; i < n; ++i) run.push(i);
  if (run.smem_bytes > 0) std::memset(run.smem, 0xFF, run.smem_bytes);

  unsigned next;
  while (!run.aborting && run.pop(&next)) resume(run, run.threads[next]);

  if (run.exited != n && !run.aborting) {
    run.error = deadlock_message(run);
    run.aborting = true;
  }
  if (run.aborting) {
    // Unwind every started thread (destructors of its locals run); unstarted ones never start.
    for (SimThread& t : run.threads) {
      if (t.context != nullptr) resume(run, t);
    }
    throw Fault(run.error);
  }
}

}  // namespace

// ---- Public: grid ----------------------------------------------------------------------------
void run_grid(const GridLaunch& launch, const std::function<void()>& body) {
  if (t_run != nullptr) throw Fault(std::string("run_grid of ") + launch.name + " from inside a running kernel");
  const dim3 block = launch.block, grid = launch.grid;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    throw Fault(std::string("run_grid of ") + launch.name + ": invalid launch configuration");
  }
  std::lock_guard<std::mutex> lock(g_grid_mutex);
  BlockRun run;
  run.launch = &launch;
  run.body = &body;
  run.threads.resize(threads);
  run.warps.resize((threads + kWarpSize - 1) / kWarpSize);
  run.ready.resize(threads + 1);
  for (unsigned i = 0; i < threads; ++i) {
    SimThread& t = run.threads[i];
    t.linear = i;
    t.state.block_dim = block;
    t.state.grid_dim = grid;
    t.state.lane = i % kWarpSize;
    t.state.warp = i / kWarpSize;
  }
  // Exactly the launch's bytes, so that ASan sees an overrun of dynamic shared memory.
  run.smem_bytes = launch.dynamic_smem;
  run.smem = static_cast<unsigned char*>(::operator new(run.smem_bytes, std::align_val_t{128}));
  struct Cleanup {
    BlockRun& run;
    ~Cleanup() {
      ::operator delete(run.smem, std::align_val_t{128});
      t_run = nullptr;
    }
  } cleanup{run};
  t_run = &run;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        run.block_idx = uint3{x, y, z};
        run_block(run);
      }
    }
  }
}

// ---- Public: kernel side ---------------------------------------------------------------------
const ThreadState& current_thread() {
  if (t_thread == nullptr) throw Fault("threadIdx/blockIdx/blockDim/gridDim read outside a kernel running on the simulated GPU");
  return t_thread->state;
}

[[noreturn]] void fault(const char* message) {
  if (t_run == nullptr || t_thread == nullptr) throw Fault(message);
  throw NamedFault(where(*t_run) + ", " + thread_name(*t_thread) + ": " + message);
}

void* dynamic_shared_memory() { return require_run("dynamic shared memory").smem; }
size_t dynamic_shared_bytes() { return require_run("dynamic shared memory").smem_bytes; }

int sync_block_at(const char* what, const char* file, int line, int predicate) {
  BlockRun& run = require_run(what);
  SimThread& me = *t_thread;
  Barrier& b = run.barrier;
  if (b.arrived == 0) {
    b.what = what;
    b.file = file;
    b.line = line;
    b.count = 0;
  } else {
    const bool same_file = file == nullptr || b.file == nullptr || file == b.file || std::strcmp(file, b.file) == 0;
    const bool same_line = file == nullptr || b.file == nullptr || line == b.line;
    if (std::strcmp(what, b.what) != 0 || !same_file || !same_line) {
      std::vector<unsigned> waiting(b.waiters.begin(), b.waiters.end());
      std::sort(waiting.begin(), waiting.end());
      fault(("divergent barrier: arrives at " + site(what, file, line) + " while " +
             id_list("thread", "threads", waiting) + " wait at " + site(b.what, b.file, b.line))
                .c_str());
    }
  }
  b.count += predicate != 0;
  if (++b.arrived == run.threads.size()) {
    const int result = b.count;
    for (unsigned w : b.waiters) {
      run.threads[w].barrier_result = result;
      lane_released(run, run.threads[w]);
      run.push(w);
    }
    b.waiters.clear();
    b.arrived = 0;
    return result;
  }
  me.status = Status::barrier;
  b.waiters.push_back(me.linear);
  lane_blocked(run, me.state.warp);
  suspend(run, me);
  return me.barrier_result;
}

void sync_block() { sync_block_at("__syncthreads", nullptr, 0, 0); }

void warp_collective(const char* what, unsigned mask, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                     const std::function<void(const WarpCollectiveArgs&)>& combine) {
  BlockRun& run = require_run(what);
  SimThread& me = *t_thread;
  Warp& warp = run.warps[me.state.warp];
  const unsigned lane = me.state.lane, bit = 1u << lane;
  if ((mask & bit) == 0) {
    fault((std::string(what) + " with mask " + hex(mask) + ", which does not include the calling lane " +
           std::to_string(lane))
              .c_str());
  }
  if ((mask & ~warp.lanes) != 0) {
    fault((std::string(what) + " with mask " + hex(mask) + " names " + id_list("lane", "lanes", lanes_of(mask & ~warp.lanes)) +
           " that do not exist (warp " + std::to_string(me.state.warp) + " is a partial warp of " +
           std::to_string(__builtin_popcount(warp.lanes)) + " lanes)")
              .c_str());
  }
  PendingCollective* p = nullptr;
  for (PendingCollective& candidate : warp.pending) {
    if ((candidate.mask & mask) != 0) p = &candidate;
  }
  if (p == nullptr) {
    warp.pending.emplace_back();
    p = &warp.pending.back();
    p->what = what;
    p->mask = mask;
    p->in_bytes = in_bytes;
    p->out_bytes = out_bytes;
  } else if (p->mask != mask || std::strcmp(p->what, what) != 0 || p->in_bytes != in_bytes ||
             p->out_bytes != out_bytes) {
    fault((std::string(what) + " with mask " + hex(mask) + " while " + id_list("lane", "lanes", lanes_of(p->arrived)) +
           " of warp " + std::to_string(me.state.warp) + " wait at " + p->what + " with mask " + hex(p->mask) +
           (p->mask == mask && std::strcmp(p->what, what) == 0 ? " (a different operand type)" : ""))
              .c_str());
  }
  p->in[lane] = in;
  p->out[lane] = out;
  p->arrived |= bit;
  if (p->arrived != mask) {
    me.status = Status::warp;
    lane_blocked(run, me.state.warp);
    suspend(run, me);
    return;
  }
  // Last to arrive: combine for everyone, then release the others.
  PendingCollective done = *p;
  *p = warp.pending.back();
  warp.pending.pop_back();
  WarpCollectiveArgs args{mask, done.in, done.out};
  combine(args);
  const unsigned base = me.state.warp * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask >> l & 1u) == 0 || l == lane) continue;
    lane_released(run, run.threads[base + l]);
    run.push(base + l);
  }
}

unsigned active_lanes() {
  BlockRun& run = require_run("__activemask");
  SimThread& me = *t_thread;
  run.warps[me.state.warp].at_activemask |= 1u << me.state.lane;
  me.status = Status::activemask;
  lane_blocked(run, me.state.warp);  // may release this lane (and the others) at once
  suspend(run, me);
  return static_cast<unsigned>(me.barrier_result);
}

unsigned warp_lanes() { return require_run("warp_lanes").warps[t_thread->state.warp].lanes; }

void yield_thread() {
  BlockRun& run = require_run("__nanosleep");
  SimThread& me = *t_thread;
  run.push(me.linear);
  suspend(run, me);
}

}  // namespace blockscope::sim
