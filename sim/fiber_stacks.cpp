#include "sim/fiber_stacks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace blockscope::sim::exec {

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(env, &end, 10);
  if (*end != '\0') {
    std::fprintf(stderr, "blockscope sim: %s=%s is not a number; using %llu\n", name, env,
                 static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return value;
}

size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t stack_bytes() {
  static const size_t bytes = [] {
    const uint64_t kib = env_u64("BLOCKSCOPE_SIM_STACK_KIB", 1024);
    return static_cast<size_t>(std::max<uint64_t>(kib, 16)) << 10;
  }();
  return bytes;
}

Stack StackPool::take() {
  if (!free_.empty()) {
    Stack stack = free_.back();
    free_.pop_back();
    return stack;
  }
  const size_t page = page_bytes();
  const size_t size = stack_bytes();
  void* mem = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) throw std::bad_alloc();
  mprotect(mem, page, PROT_NONE);  // a kernel overflowing its stack faults here, not in a neighbour
  return Stack{static_cast<char*>(mem) + page, size};
}

}  // namespace blockscope::sim::exec
