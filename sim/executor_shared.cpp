// A block's shared memory on the simulated GPU: [redzone][dynamic][redzone][variable][redzone]…,
// the dynamic part 16-byte aligned and each variable aligned as declared and no more, all 0xFF at
// every block start, ptxas's 48 KiB limit on static variables; and the pool that keeps each
// slot's buffer and race-check shadow across grids. Apart from executor.cpp, which runs the
// blocks in their slots.
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "sim/executor_internal.h"
#include "sim/fiber_stacks.h"
#include "sim/occupancy.h"

namespace blockscope::sim {
namespace exec {
namespace {

constexpr size_t kRedzone = 32;                 // bytes around every shared-memory region
constexpr size_t kStaticSharedLimit = 48 << 10;  // what ptxas accepts of static __shared__

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
std::vector<SlotMemory> g_slot_memory;  // guarded by executor.cpp's g_grid_mutex (one grid at a time)

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

}  // namespace

void prepare_shared_memory(GridRun& grid, BlockRun& run) {
  // Shared memory: the dynamic region 16-byte aligned and no more (offset 48 of a page-aligned
  // buffer), then room for 48 KiB of variables with their redzones.
  run.dynamic_offset = 48;
  const size_t dynamic_end = run.dynamic_offset + grid.launch->dynamic_smem;
  run.smem_capacity = dynamic_end + kRedzone + kStaticSharedLimit + (16 << 10);
  take_slot_memory(run, grid.checks.race);
  run.high_water = run.smem_capacity;  // poison everything before the first block
}

void release_shared_memory(BlockRun& run) { give_slot_memory(run); }

void reset_shared_memory(GridRun& grid, BlockRun& run) {
  asan_unpoison(run.smem, run.smem_capacity);
  std::memset(run.smem, 0xFF, run.high_water);
  asan_poison(run.smem, run.smem_capacity);
  asan_unpoison(run.smem + run.dynamic_offset, grid.launch->dynamic_smem);
  run.cursor = run.dynamic_offset + grid.launch->dynamic_smem + kRedzone;
  run.high_water = run.cursor;
  run.static_bytes = 0;
  run.variables.clear();
}

}  // namespace exec

using namespace exec;

// ---- Public: kernel side ---------------------------------------------------------------------
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

}  // namespace blockscope::sim
