// What keeps a broken kernel from going down silently or hanging: a thread's stack overflow
// (the guard page's SIGSEGV becomes a fault naming the thread) and a grid that stops making
// progress (the watchdog ends the process naming the kernel). Apart from executor.cpp: a signal
// handler and a watchdog thread, outside the grid's run.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "sim/executor_internal.h"
#include "sim/fiber_stacks.h"

namespace blockscope::sim::exec {

std::atomic<uint64_t> g_progress{0};
std::atomic<const GridLaunch*> g_watched{nullptr};

namespace {

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

}  // namespace

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

}  // namespace blockscope::sim::exec
