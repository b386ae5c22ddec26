// Kernel counters on CUDA (Backend::begin_counting / end_counting). The simulated GPU counts
// every launch exactly, with Nsight Compute's metric names (sim/counters.cpp). On a GPU the same
// names would come from CUPTI's range profiler, which is not built yet: there `profile
// --counters` says so instead of printing nothing.
#include "runtime/cuda/cuda_backend.h"

#ifdef BLOCKSCOPE_CUDA_SIM
#include "sim/sim.h"
#endif

namespace blockscope {

#ifdef BLOCKSCOPE_CUDA_SIM

std::string CudaBackend::counters_unavailable() const { return ""; }

void CudaBackend::begin_counting() {
  synchronize();                       // earlier work is not this region's
  blockscope::sim::take_kernel_counters();
  blockscope::sim::set_counters_enabled(true);
}

std::vector<KernelCounterRecord> CudaBackend::end_counting() {
  synchronize();  // the queue runs its grids now: they count while counting is on
  blockscope::sim::set_counters_enabled(false);
  std::vector<KernelCounterRecord> records;
  for (const blockscope::sim::KernelCounters& k : blockscope::sim::take_kernel_counters()) {
    KernelCounterRecord r;
    r.name = k.name;
    r.grid[0] = k.grid.x, r.grid[1] = k.grid.y, r.grid[2] = k.grid.z;
    r.block[0] = k.block.x, r.block[1] = k.block.y, r.block[2] = k.block.z;
    r.occupancy_limiter = k.occupancy_limiter;
    r.metrics = k.metrics;
    records.push_back(std::move(r));
  }
  return records;
}

#else

std::string CudaBackend::counters_unavailable() const {
  return "kernel counters on a GPU need CUPTI's range profiler, which blockscope does not drive yet (Nsight Compute "
         "gives the same metrics: ncu --metrics ...); the simulated GPU counts them (cmake --preset cuda-sim)";
}
void CudaBackend::begin_counting() {}
std::vector<KernelCounterRecord> CudaBackend::end_counting() { return {}; }

#endif

}  // namespace blockscope
