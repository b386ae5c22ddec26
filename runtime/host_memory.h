// What host memory this process may still use: free RAM (MemAvailable) and what is left of its
// address-space limit (RLIMIT_AS, `ulimit -v`: an allocation past it fails however much RAM is
// free). The CPU backend's memory_available() is the smaller; `check` names which one binds.
#pragma once

#include <cstddef>

namespace blockscope {

struct HostMemory {
  size_t free_ram = 0;               // MemAvailable; 1 TiB where /proc/meminfo cannot be read
  size_t address_space_limit = 0;    // RLIMIT_AS's soft limit; SIZE_MAX when unlimited
  size_t address_space_left = 0;     // that limit less what the process has mapped (VmSize)
};
HostMemory host_memory();

}  // namespace blockscope
