#include "runtime/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace blockscope {

HostMemory host_memory() {
  HostMemory memory;
  memory.free_ram = static_cast<size_t>(1) << 40;  // "plenty" where /proc/meminfo cannot be read
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        memory.free_ram = static_cast<size_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  memory.address_space_limit = SIZE_MAX;
  memory.address_space_left = SIZE_MAX;
  struct rlimit limit;
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    memory.address_space_limit = static_cast<size_t>(limit.rlim_cur);
    size_t mapped = 0;  // VmSize: the first field of /proc/self/statm, in pages
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long long pages = 0;
      if (std::fscanf(f, "%llu", &pages) == 1) mapped = static_cast<size_t>(pages) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      std::fclose(f);
    }
    memory.address_space_left = mapped < memory.address_space_limit ? memory.address_space_limit - mapped : 0;
  }
  return memory;
}

}  // namespace blockscope
