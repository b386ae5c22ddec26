// The executor's fiber plumbing: stacks (mmap'ed with a guard page, pooled), the AddressSanitizer
// fiber and poisoning annotations (no-ops in other builds), and the numeric environment settings
// the executor reads. Internal to the simulated GPU (executor.cpp and its parts, executor_*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/executor_state.h"

#if defined(__SANITIZE_ADDRESS__)
#define BLOCKSCOPE_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKSCOPE_SIM_ASAN 1
#endif
#endif
#ifdef BLOCKSCOPE_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace blockscope::sim::exec {

// The value of environment variable `name` as a number, else `fallback` (a note on stderr when
// it is set but not a number).
uint64_t env_u64(const char* name, uint64_t fallback);

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
inline void asan_poison(const void* p, size_t bytes) {
#ifdef BLOCKSCOPE_SIM_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}
inline void asan_unpoison(const void* p, size_t bytes) {
#ifdef BLOCKSCOPE_SIM_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

// ---- Fiber stacks ----------------------------------------------------------------------------
// mmap'ed with MAP_NORESERVE (only touched pages cost memory) and a PROT_NONE guard page below,
// kept in a LIFO pool: a barrier-free kernel reuses one warm stack for every thread. 1 MiB by
// default: a GPU thread may use up to 512 KiB of local memory, and host frames are larger.
size_t page_bytes();
size_t stack_bytes();  // BLOCKSCOPE_SIM_STACK_KIB, at least 16 KiB

class StackPool {
 public:
  Stack take();
  void give(Stack stack) { free_.push_back(stack); }

 private:
  std::vector<Stack> free_;  // stacks live as long as the process: no munmap at exit needed
};

}  // namespace blockscope::sim::exec
