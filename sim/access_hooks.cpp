// The instrumentation's runtime: nvcc-sim compiles kernel code with the host compiler's
// ThreadSanitizer instrumentation (-fsanitize=thread without its runtime, as the Linux kernel's
// KCSAN does), so every load and store calls __tsan_readN / __tsan_writeN (…_unaligned_…,
// …_volatile_…, …_range) with its address, and std::atomic calls __tsan_atomicN_*. They are
// defined here: outside a kernel, and for the thread's own stack, a call returns at once;
// otherwise the access goes to check_access (checks.cpp) and the counters (counters.cpp). Also
// here: the explicit reports of device.h (atomics, pausing the checks), and which thread's
// accesses are looked at (hooks_enter/hooks_leave, as the executor switches threads).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "sim/checks_internal.h"

namespace blockscope::sim {
namespace exec {
namespace {

std::atomic<int> g_instrumented_units{0};

thread_local SimThread* t_hook = nullptr;  // whose accesses are looked at (null: none)
thread_local uintptr_t t_stack_low = 0;
thread_local uintptr_t t_stack_size = 0;
thread_local uintptr_t t_builtins_low = 0;  // threadIdx … gridDim of this host thread
thread_local uintptr_t t_builtins_size = 0;

// The thread's own local memory, or a built-in variable: no memory of the simulated GPU.
inline bool private_to_thread(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a - t_stack_low < t_stack_size || a - t_builtins_low < t_builtins_size;
}

inline void on_access(const void* p, size_t n, bool write, bool aligned, const void* pc) {
  SimThread* t = t_hook;
  if (t == nullptr || private_to_thread(p)) return;
  check_access(*t, p, n, write, aligned, pc);
  count_access(*t, p, n, write ? Access::store : Access::load, pc);
}

// A volatile access: checked like any other, and a poll (a spin loop on a flag makes progress).
inline void on_volatile(const void* p, size_t n, bool write, bool aligned, const void* pc) {
  SimThread* t = t_hook;
  if (t == nullptr || private_to_thread(p)) return;
  GridRun* g = current_grid();
  note_sync(*g, *t);  // a flag another block polls: a synchronisation, not a race between blocks
  t->sync_access = true;
  check_access(*t, p, n, write, aligned, pc);
  t->sync_access = false;
  count_access(*t, p, n, write ? Access::store : Access::load, pc);
  note_sync(*g, *t);
  poll(*g, *t);
}

}  // namespace

// ---- Executor interface (executor_state.h) -------------------------------------------------------
void hooks_enter(GridRun& grid, SimThread& thread) {
  if (!grid.hooks || !thread.checks_on) {
    t_hook = nullptr;
    return;
  }
  t_hook = &thread;
  t_stack_low = reinterpret_cast<uintptr_t>(thread.stack.base);
  t_stack_size = thread.stack.size;
  if (t_builtins_size == 0) std::tie(t_builtins_low, t_builtins_size) = builtin_variables();
}

void hooks_leave() { t_hook = nullptr; }

}  // namespace exec

int instrumented_units() { return exec::g_instrumented_units.load(); }

// ---- Explicit reports (device.h) ------------------------------------------------------------------
void atomic_begin(const void* address, size_t bytes) {
  exec::GridRun* grid = exec::current_grid();
  exec::SimThread* me = exec::current_sim_thread();
  if (grid == nullptr || me == nullptr) fault("an atomic outside a kernel running on the simulated GPU");
  if (grid->aborting) {  // a destructor while the grid unwinds: just the operation
    exec::hooks_leave();
    return;
  }
  exec::settle_write(*me);
  exec::note_sync(*grid, *me);
  exec::poll(*grid, *me);
  if (grid->hooks && (grid->checks.memcheck || grid->checks.initcheck || grid->checks.streams)) {
    // An atomic is no access for the race check; for initcheck it writes (a counter nothing
    // cleared first is a wrong result, not undefined data), for the streams check it writes.
    const Checks saved = grid->checks;
    grid->checks.race = false;
    grid->checks.initcheck = false;
    grid->checks.streams = false;
    exec::check_access(*me, address, bytes, false, true, __builtin_return_address(0), false);
    grid->checks = saved;
    const auto a = reinterpret_cast<uintptr_t>(address);
    if (a >= me->global_begin && a + bytes <= me->global_end) {
      if (saved.initcheck && me->global_written != nullptr) me->global_written->mark(a - me->global_begin, bytes);
      if (saved.streams) exec::stream_log(*grid, *me, a, bytes, true, __builtin_return_address(0));
    }
  }
  exec::count_access(*me, address, bytes, exec::Access::atomic, __builtin_return_address(0));
  exec::hooks_leave();  // the read-modify-write that follows is one step
}

void checks_pause() {
  if (exec::SimThread* me = exec::current_sim_thread()) me->checks_on = false;
  exec::hooks_leave();
}

void checks_resume() {
  exec::GridRun* grid = exec::current_grid();
  exec::SimThread* me = exec::current_sim_thread();
  if (grid == nullptr || me == nullptr) return;
  me->checks_on = true;
  exec::hooks_enter(*grid, *me);
}

void atomic_end(bool changed) {
  exec::GridRun* grid = exec::current_grid();
  exec::SimThread* me = exec::current_sim_thread();
  if (grid == nullptr || me == nullptr) return;
  exec::hooks_enter(*grid, *me);
  if (changed) exec::note_progress(*grid);
}

}  // namespace blockscope::sim

// ---- The instrumentation's entry points -------------------------------------------------------------
// Declared by GCC and Clang for -fsanitize=thread; defined here instead of by libtsan.
using blockscope::sim::exec::on_access;
using blockscope::sim::exec::on_volatile;

#define BLOCKSCOPE_SIM_ACCESS_HOOKS(N)                                                                          \
  extern "C" void __tsan_read##N(void* p) { on_access(p, N, false, true, __builtin_return_address(0)); }         \
  extern "C" void __tsan_write##N(void* p) { on_access(p, N, true, true, __builtin_return_address(0)); }         \
  extern "C" void __tsan_unaligned_read##N(void* p) { on_access(p, N, false, false, __builtin_return_address(0)); } \
  extern "C" void __tsan_unaligned_write##N(void* p) { on_access(p, N, true, false, __builtin_return_address(0)); } \
  extern "C" void __tsan_volatile_read##N(void* p) { on_volatile(p, N, false, true, __builtin_return_address(0)); } \
  extern "C" void __tsan_volatile_write##N(void* p) { on_volatile(p, N, true, true, __builtin_return_address(0)); } \
  extern "C" void __tsan_unaligned_volatile_read##N(void* p) {                                                   \
    on_volatile(p, N, false, false, __builtin_return_address(0));                                                \
  }                                                                                                              \
  extern "C" void __tsan_unaligned_volatile_write##N(void* p) {                                                  \
    on_volatile(p, N, true, false, __builtin_return_address(0));                                                 \
  }
BLOCKSCOPE_SIM_ACCESS_HOOKS(1)
BLOCKSCOPE_SIM_ACCESS_HOOKS(2)
BLOCKSCOPE_SIM_ACCESS_HOOKS(4)
BLOCKSCOPE_SIM_ACCESS_HOOKS(8)
BLOCKSCOPE_SIM_ACCESS_HOOKS(16)
#undef BLOCKSCOPE_SIM_ACCESS_HOOKS

extern "C" {
void __tsan_init() { blockscope::sim::exec::g_instrumented_units.fetch_add(1); }
void __tsan_read_range(void* p, unsigned long n) { on_access(p, n, false, false, __builtin_return_address(0)); }
void __tsan_write_range(void* p, unsigned long n) { on_access(p, n, true, false, __builtin_return_address(0)); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
// Clang replaces memcpy/memset/memmove by these.
void* __tsan_memcpy(void* dst, const void* src, unsigned long n) {
  on_access(src, n, false, false, __builtin_return_address(0));
  on_access(dst, n, true, false, __builtin_return_address(0));
  return std::memcpy(dst, src, n);
}
void* __tsan_memmove(void* dst, const void* src, unsigned long n) {
  on_access(src, n, false, false, __builtin_return_address(0));
  on_access(dst, n, true, false, __builtin_return_address(0));
  return std::memmove(dst, src, n);
}
void* __tsan_memset(void* dst, int value, unsigned long n) {
  on_access(dst, n, true, false, __builtin_return_address(0));
  return std::memset(dst, value, n);
}
}

// std::atomic and __atomic builtins in instrumented code (host code of a .cu, mostly): real
// atomics; inside a kernel also a memcheck of the address.
namespace {
using tsan_memory_order = int;

inline void atomic_hook(const volatile void* p, size_t n) {
  on_access(const_cast<const void*>(p), n, false, true, __builtin_return_address(0));
}
}  // namespace

#define BLOCKSCOPE_SIM_ATOMICS(BITS, T)                                                                          \
  extern "C" T __tsan_atomic##BITS##_load(const volatile T* a, tsan_memory_order) {                             \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                 \
  }                                                                                                              \
  extern "C" void __tsan_atomic##BITS##_store(volatile T* a, T v, tsan_memory_order) {                          \
    atomic_hook(a, sizeof(T));                                                                                   \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                    \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_exchange(volatile T* a, T v, tsan_memory_order) {                          \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                          \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_add(volatile T* a, T v, tsan_memory_order) {                         \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_sub(volatile T* a, T v, tsan_memory_order) {                         \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_and(volatile T* a, T v, tsan_memory_order) {                         \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_or(volatile T* a, T v, tsan_memory_order) {                          \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_xor(volatile T* a, T v, tsan_memory_order) {                         \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_fetch_nand(volatile T* a, T v, tsan_memory_order) {                        \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                          \
  }                                                                                                              \
  extern "C" int __tsan_atomic##BITS##_compare_exchange_strong(volatile T* a, T* c, T v, tsan_memory_order,     \
                                                               tsan_memory_order) {                             \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                      \
  }                                                                                                              \
  extern "C" int __tsan_atomic##BITS##_compare_exchange_weak(volatile T* a, T* c, T v, tsan_memory_order,       \
                                                             tsan_memory_order) {                               \
    atomic_hook(a, sizeof(T));                                                                                   \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                       \
  }                                                                                                              \
  extern "C" T __tsan_atomic##BITS##_compare_exchange_val(volatile T* a, T c, T v, tsan_memory_order,           \
                                                          tsan_memory_order) {                                  \
    atomic_hook(a, sizeof(T));                                                                                   \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                            \
    return c;                                                                                                    \
  }
BLOCKSCOPE_SIM_ATOMICS(8, char)
BLOCKSCOPE_SIM_ATOMICS(16, short)
BLOCKSCOPE_SIM_ATOMICS(32, int)
BLOCKSCOPE_SIM_ATOMICS(64, long)
#undef BLOCKSCOPE_SIM_ATOMICS

extern "C" void __tsan_atomic_thread_fence(tsan_memory_order) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
extern "C" void __tsan_atomic_signal_fence(tsan_memory_order) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
