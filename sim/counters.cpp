// The simulated GPU's counters (sim/sim.h's "Counters"): what Nsight Compute would count for each
// launch, worked out exactly from the accesses the threads made (sim/counters.h says how lanes
// are matched into warp-level instructions).
//
// The rules, per warp-level instruction:
//   global   one request per instruction; sectors = the distinct 32-byte sectors its active
//            lanes touch. Sector efficiency = distinct bytes requested / (sectors × 32) (a
//            broadcast's bytes count once).
//   shared   one instruction; wavefronts by the bank rule: 32 banks of 4 bytes; the lanes are
//            served in groups — all 32 for accesses up to 4 bytes, half-warps for 8 bytes,
//            quarter-warps for 16 bytes (each group asks for up to 128 bytes) — and a group takes
//            as many wavefronts as the most distinct 4-byte words any one bank holds among its
//            lanes' bytes (the same word is a broadcast: no conflict). Bank conflicts =
//            wavefronts − ideal, ideal = ⌈bytes the active lanes request / 128⌉.
//   ldmatrix one instruction; each 8x8 matrix is 8 rows of 16 bytes from 8 lanes' addresses,
//            served as one group by the rule above (ideal: one wavefront per matrix).
//   cp.async its global source as a request and sectors (op_ldgsts), its shared destination
//            by the shared rule for 16 bytes (sim__ldgsts_shared_*: no Nsight twin).
//   atomics  global: requests and sectors (op_atom); shared: instructions.
// Not counted: local memory (the host compiler keeps a thread's locals in registers or on its
// fiber stack, which says nothing of what ptxas spills; ptxas reports no spills for our kernels),
// texture and constant-cache traffic, L2 and DRAM (beyond what sectors imply), instructions
// that are not memory, MMA or barrier instructions.
// Where the host compiler merges or splits accesses, the counts follow what it emitted: a struct
// copy may become a memcpy (counted as one access of its size), a loop inside a thread may be
// vectorised. Our kernels use explicit vector types (float4, uint4) for wide accesses, as on a GPU.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include "sim/executor_state.h"
#include "sim/occupancy.h"
#include "sim/runtime_state.h"

namespace blockscope::sim {
namespace {

// ---- The metrics: every counter once, with the name it is written under ----------------------
enum Metric : int {
  kGlobalLoadRequests, kGlobalLoadSectors, kGlobalLoadBytes,
  kGlobalStoreRequests, kGlobalStoreSectors, kGlobalStoreBytes,
  kGlobalAtomRequests, kGlobalAtomSectors,
  kLdgstsRequests, kLdgstsSectors,
  kSharedLoadInst, kSharedLoadWavefronts, kSharedLoadConflicts,
  kSharedStoreInst, kSharedStoreWavefronts, kSharedStoreConflicts,
  kSharedAtomInst,
  kLdsmInst, kLdsmWavefronts, kLdsmConflicts,
  kLdgstsSharedWavefronts, kLdgstsSharedConflicts,
  kMmaInst, kMmaBf16, kMmaF16, kTensorFlops,
  kBlockBarriers, kWarpBarriers,
  kMemoryInst, kMemoryLanes,
  kMetricCount
};

// Nsight Compute's names where Nsight Compute counts the same thing; sim__ where it has no twin.
constexpr const char* kMetricNames[kMetricCount] = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "sim__global_ld_bytes_requested",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "sim__global_st_bytes_requested",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_atom.sum",
    "smsp__inst_executed_op_ldsm.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
    "sim__ldgsts_shared_wavefronts",
    "sim__ldgsts_shared_bank_conflicts",
    "smsp__inst_executed_pipe_tensor_op_hmma.sum",
    "sim__mma_m16n8k16_bf16",
    "sim__mma_m16n8k16_f16",
    "sim__tensor_flops",
    "sim__block_barriers",
    "sim__warp_barrier_instructions",
    "sim__memory_inst_executed",
    "sim__memory_thread_inst_executed",
};
static_assert(sizeof kMetricNames / sizeof kMetricNames[0] == kMetricCount, "one name per metric");

struct LaunchRecord {
  std::string name;
  dim3 grid, block;
  int device = 0;
  int registers = -1;
  int64_t static_smem = 0, dynamic_smem = 0;
  double totals[kMetricCount] = {};
};

// ---- Settings and the launches counted --------------------------------------------------------
struct CounterStore {
  std::mutex mutex;
  bool enabled = false;
  std::string file;          // BLOCKSCOPE_SIM_COUNTERS, "%p" expanded; empty: no file
  pid_t owner = 0;           // the process that read the setting (a fork's child writes nothing)
  std::vector<LaunchRecord> launches;  // every launch, for the file
  size_t taken = 0;                    // launches already handed to take_kernel_counters
};

void write_counters_file();

CounterStore& store() {
  static CounterStore* s = [] {
    auto* created = new CounterStore;  // never destroyed: written at exit by the handler below
    const char* value = std::getenv("BLOCKSCOPE_SIM_COUNTERS");
    if (value != nullptr && *value != '\0') {
      std::string path = value;
      for (size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p", at)) {
        path.replace(at, 2, std::to_string(getpid()));
      }
      created->file = path;
      created->enabled = true;
      created->owner = getpid();
      // Said now, not only at exit: a run of hours should not end with nothing written.
      const std::string probe = path + ".tmp." + std::to_string(getpid());
      if (FILE* f = std::fopen(probe.c_str(), "wb")) {
        std::fclose(f);
        std::remove(probe.c_str());
      } else {
        std::fprintf(stderr, "blockscope sim: BLOCKSCOPE_SIM_COUNTERS=%s: cannot write there (%s); counting anyway\n",
                     path.c_str(), std::strerror(errno));
      }
      std::atexit(write_counters_file);
    }
    return created;
  }();
  return *s;
}

}  // namespace

namespace exec {

struct GridCounters {
  double totals[kMetricCount] = {};
  int64_t static_smem_seen = 0;  // the most static shared memory a block placed
};

void GridCountersDeleter::operator()(GridCounters* counters) const { delete counters; }

namespace {

// ---- The rules -------------------------------------------------------------------------------
// The distinct 32-byte sectors the active lanes of `a` touch, and the distinct bytes they ask for
// (a broadcast asks for its bytes once, so bytes ≤ sectors × 32: efficiency is at most 100%).
struct Footprint {
  double sectors = 0, bytes = 0;
};
Footprint footprint(const WarpAccess& a) {
  std::pair<uintptr_t, uintptr_t> ranges[32];  // [begin, end) per active lane
  size_t n = 0;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((a.lanes >> l & 1u) != 0 && a.bytes > 0) ranges[n++] = {a.address[l], a.address[l] + a.bytes};
  }
  std::sort(ranges, ranges + n);
  Footprint f;
  uintptr_t covered = 0, last_sector = UINTPTR_MAX;  // bytes below `covered` counted already
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t begin = std::max(ranges[i].first, covered), end = ranges[i].second;
    if (begin >= end) continue;
    f.bytes += static_cast<double>(end - begin);
    const uintptr_t first = begin / 32, last = (end - 1) / 32;
    f.sectors += static_cast<double>(last - first + 1) - (first == last_sector ? 1 : 0);
    last_sector = last;
    covered = end;
  }
  return f;
}

// Wavefronts of one group of lanes (bits of `lanes`), each asking for `bytes` at its address.
unsigned group_wavefronts(const uintptr_t* address, uint32_t lanes, uint32_t bytes) {
  if (lanes == 0) return 0;
  uintptr_t words[32 * 4];  // at most 16 bytes a lane in a group of up to 32 lanes
  size_t n = 0;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((lanes >> l & 1u) == 0) continue;
    const uintptr_t first = address[l] / 4, last = (address[l] + std::max<uint32_t>(bytes, 1) - 1) / 4;
    for (uintptr_t w = first; w <= last && n < sizeof words / sizeof words[0]; ++w) words[n++] = w;
  }
  std::sort(words, words + n);
  n = static_cast<size_t>(std::unique(words, words + n) - words);
  unsigned per_bank[32] = {};
  unsigned most = 1;
  for (size_t i = 0; i < n; ++i) most = std::max(most, ++per_bank[words[i] % 32]);
  return most;
}

// Wavefronts and the ideal count of a shared-memory instruction.
void shared_wavefronts(const WarpAccess& a, double* wavefronts, double* ideal) {
  // Wider than 16 bytes (a memcpy of a struct): served as consecutive 16-byte pieces.
  const uint32_t piece = std::min<uint32_t>(std::max<uint32_t>(a.bytes, 1), 16);
  const unsigned group = piece <= 4 ? 32 : piece == 8 ? 16 : 8;
  const unsigned pieces = (std::max<uint32_t>(a.bytes, 1) + piece - 1) / piece;
  unsigned total = 0;
  uintptr_t shifted[32];
  for (unsigned p = 0; p < pieces; ++p) {
    for (unsigned l = 0; l < kWarpSize; ++l) shifted[l] = a.address[l] + uintptr_t{p} * piece;
    for (unsigned first = 0; first < kWarpSize; first += group) {
      const uint32_t mask = group == 32 ? ~0u : ((1u << group) - 1) << first;
      total += group_wavefronts(shifted, a.lanes & mask, piece);
    }
  }
  const double requested = static_cast<double>(__builtin_popcount(a.lanes)) * std::max<uint32_t>(a.bytes, 1);
  *wavefronts = total;
  *ideal = std::ceil(requested / 128);
}

void add_shared(double* totals, const WarpAccess& a, Metric inst, Metric wavefronts, Metric conflicts) {
  double w = 0, ideal = 0;
  shared_wavefronts(a, &w, &ideal);
  if (inst != kMetricCount) totals[inst] += 1;
  totals[wavefronts] += w;
  totals[conflicts] += std::max(0.0, w - ideal);
}

void add_global(double* totals, const WarpAccess& a, Metric requests, Metric sectors, Metric bytes) {
  const Footprint f = footprint(a);
  totals[requests] += 1;
  totals[sectors] += f.sectors;
  totals[bytes] += f.bytes;
}

void count_instruction(GridCounters& c, const WarpAccess& a) {
  double* t = c.totals;
  if (a.access != Access::async_copy_destination) {  // a cp.async's two sides: one instruction
    t[kMemoryInst] += 1;
    t[kMemoryLanes] += __builtin_popcount(a.lanes);
  }
  switch (a.access) {
    case Access::load:
      if (a.shared) {
        add_shared(t, a, kSharedLoadInst, kSharedLoadWavefronts, kSharedLoadConflicts);
      } else {
        add_global(t, a, kGlobalLoadRequests, kGlobalLoadSectors, kGlobalLoadBytes);
      }
      break;
    case Access::store:
      if (a.shared) {
        add_shared(t, a, kSharedStoreInst, kSharedStoreWavefronts, kSharedStoreConflicts);
      } else {
        add_global(t, a, kGlobalStoreRequests, kGlobalStoreSectors, kGlobalStoreBytes);
      }
      break;
    case Access::atomic:
      if (a.shared) {
        t[kSharedAtomInst] += 1;
      } else {
        t[kGlobalAtomRequests] += 1, t[kGlobalAtomSectors] += footprint(a).sectors;
      }
      break;
    case Access::async_copy_source:
      t[kLdgstsRequests] += 1, t[kLdgstsSectors] += footprint(a).sectors;
      break;
    case Access::async_copy_destination:
      add_shared(t, a, kMetricCount, kLdgstsSharedWavefronts, kLdgstsSharedConflicts);
      break;
  }
}

}  // namespace

GridCountersPtr counters_begin_grid(const GridRun&) {
  CounterStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.enabled) return nullptr;
  return GridCountersPtr(new GridCounters);
}

void count_access(SimThread& t, const void* address, size_t bytes, Access access, const void* pc) {
  BlockRun& b = *t.block;
  if (!b.grid->counters) return;
  const auto a = reinterpret_cast<uintptr_t>(address);
  uint32_t& seen = t.occurrences[pc];
  const WarpAccessKey key{pc, seen++, static_cast<uint16_t>(t.state.warp), static_cast<uint8_t>(access)};
  WarpAccess& w = b.warp_accesses[key];
  if (w.lanes == 0) {
    w.access = access;
    w.shared = a - reinterpret_cast<uintptr_t>(b.smem) < b.smem_capacity;
    w.bytes = static_cast<uint32_t>(bytes);
  }
  w.lanes |= 1u << t.state.lane;
  w.address[t.state.lane] = a;
}

void count_ldmatrix(GridRun& grid, int num, const void* const* rows) {
  if (!grid.counters) return;
  WarpAccess a;
  a.shared = true;
  a.bytes = 16;
  a.lanes = num == 4 ? ~0u : (1u << (8 * num)) - 1;
  for (int l = 0; l < 8 * num; ++l) a.address[l] = reinterpret_cast<uintptr_t>(rows[l]);
  double* t = grid.counters->totals;
  t[kMemoryInst] += 1;
  t[kMemoryLanes] += kWarpSize;  // .aligned: every lane executes it
  add_shared(t, a, kLdsmInst, kLdsmWavefronts, kLdsmConflicts);
}

void count_mma(GridRun& grid, bool bf16) {
  if (!grid.counters) return;
  double* t = grid.counters->totals;
  t[kMmaInst] += 1;
  t[bf16 ? kMmaBf16 : kMmaF16] += 1;
  t[kTensorFlops] += 2.0 * 16 * 8 * 16;
}

void counters_flush_block(BlockRun& b) {
  GridRun& g = *b.grid;
  if (!g.counters) return;
  for (const auto& [key, access] : b.warp_accesses) count_instruction(*g.counters, access);
  b.warp_accesses.clear();
  g.counters->static_smem_seen = std::max<int64_t>(g.counters->static_smem_seen, static_cast<int64_t>(b.static_bytes));
}

void count_block_barrier(BlockRun& b) {
  GridRun& g = *b.grid;
  if (!g.counters) return;
  g.counters->totals[kBlockBarriers] += 1;
  unsigned warps = 0;  // warps with a live lane: each executes the barrier instruction
  for (const Warp& w : b.warps) warps += (w.lanes & ~w.exited) != 0;
  g.counters->totals[kWarpBarriers] += warps;
}

void counters_end_grid(GridRun& grid) {
  if (!grid.counters) return;
  for (auto& slot : grid.slots) counters_flush_block(*slot);
  const GridLaunch& launch = *grid.launch;
  LaunchRecord r;
  r.name = launch.function != nullptr ? short_function_name(launch.function) : std::string();
  if (r.name.empty()) r.name = launch.name;
  r.grid = launch.grid;
  r.block = launch.block;
  r.device = grid.device;
  KernelResources resources{};
  const bool known = launch.function != nullptr && kernel_resources(launch.function, &resources);
  r.registers = known ? resources.registers : -1;
  r.static_smem = known ? resources.static_smem : grid.counters->static_smem_seen;
  r.dynamic_smem = static_cast<int64_t>(launch.dynamic_smem);
  std::copy(std::begin(grid.counters->totals), std::end(grid.counters->totals), r.totals);
  CounterStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.launches.push_back(std::move(r));
}

}  // namespace exec

namespace {

void put(std::vector<std::pair<std::string, double>>& out, const char* name, double value) {
  out.emplace_back(name, value);
}

KernelCounters to_public(const LaunchRecord& r) {
  KernelCounters k;
  k.name = r.name;
  k.grid = r.grid;
  k.block = r.block;
  k.device = r.device;
  const int threads = static_cast<int>(r.block.x * r.block.y * r.block.z);
  const uint64_t blocks = uint64_t{r.grid.x} * r.grid.y * r.grid.z;
  const Occupancy o = theoretical_occupancy(kSm90Limits, threads, r.registers, r.static_smem + r.dynamic_smem);
  k.occupancy_limiter = o.limiter;
  auto& m = k.metrics;
  put(m, "launch__grid_size", static_cast<double>(blocks));
  put(m, "launch__block_size", threads);
  put(m, "launch__thread_count", static_cast<double>(blocks) * threads);
  if (o.registers_known) put(m, "launch__registers_per_thread", r.registers);
  put(m, "launch__shared_mem_per_block_static", static_cast<double>(r.static_smem));
  put(m, "launch__shared_mem_per_block_dynamic", static_cast<double>(r.dynamic_smem));
  put(m, "launch__sm_count", detail::kSmCount);
  put(m, "launch__occupancy_limit_blocks", o.limit_blocks);
  put(m, "launch__occupancy_limit_warps", o.limit_warps);
  if (o.registers_known) put(m, "launch__occupancy_limit_registers", o.limit_registers);
  put(m, "launch__occupancy_limit_shared_mem", o.limit_shared_mem);
  put(m, "sm__maximum_warps_per_active_cycle_pct", 100.0 * o.occupancy);
  put(m, "launch__waves_per_multiprocessor", waves_per_sm(blocks, o.blocks_per_sm, detail::kSmCount));
  for (int i = 0; i < kMetricCount; ++i) put(m, kMetricNames[i], r.totals[i]);
  // Ratios Nsight Compute derives the same way (0 when there was nothing to divide).
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  put(m, "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
      100.0 * ratio(r.totals[kGlobalLoadBytes], 32.0 * r.totals[kGlobalLoadSectors]));
  put(m, "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",
      100.0 * ratio(r.totals[kGlobalStoreBytes], 32.0 * r.totals[kGlobalStoreSectors]));
  put(m, "sim__memory_lanes_per_inst", ratio(r.totals[kMemoryLanes], r.totals[kMemoryInst]));
  return k;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    std::snprintf(text, sizeof text, "%.0f", v);
  } else {
    std::snprintf(text, sizeof text, "%.17g", v);
  }
  return text;
}

// The environment is read at start-up, so a program that launches nothing still writes its file.
[[maybe_unused]] const bool g_read_at_start = (store(), true);

void write_counters_file() {
  CounterStore& s = store();
  std::vector<KernelCounters> launches;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.file.empty() || s.owner != getpid()) return;
    for (const LaunchRecord& r : s.launches) launches.push_back(to_public(r));
  }
  const std::string text = counters_json(launches);
  const std::string temporary = s.file + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(temporary.c_str(), "wb");
  bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr) ok = std::fclose(f) == 0 && ok;
  if (ok) ok = std::rename(temporary.c_str(), s.file.c_str()) == 0;
  if (!ok) {
    std::remove(temporary.c_str());
    std::fprintf(stderr, "blockscope sim: cannot write the counters to BLOCKSCOPE_SIM_COUNTERS=%s: %s\n",
                 s.file.c_str(), std::strerror(errno));
  }
}

}  // namespace

bool counters_enabled() {
  CounterStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.enabled;
}

void set_counters_enabled(bool on) {
  CounterStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.enabled = on || !s.file.empty();  // the environment's file keeps counting on
}

std::vector<KernelCounters> take_kernel_counters() {
  CounterStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<KernelCounters> out;
  for (size_t i = s.taken; i < s.launches.size(); ++i) out.push_back(to_public(s.launches[i]));
  s.taken = s.launches.size();
  if (s.file.empty()) {  // nothing to write at exit: forget them
    s.launches.clear();
    s.taken = 0;
  }
  return out;
}

std::string counters_json(const std::vector<KernelCounters>& launches) {
  std::string out = "{\"kernels\": [";
  for (size_t i = 0; i < launches.size(); ++i) {
    const KernelCounters& k = launches[i];
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"name\": " + json_string(k.name);
    out += ", \"grid\": [" + std::to_string(k.grid.x) + ", " + std::to_string(k.grid.y) + ", " + std::to_string(k.grid.z) + "]";
    out += ", \"block\": [" + std::to_string(k.block.x) + ", " + std::to_string(k.block.y) + ", " +
           std::to_string(k.block.z) + "]";
    out += ", \"device\": " + std::to_string(k.device);
    out += ", \"occupancy_limiter\": " + json_string(k.occupancy_limiter);
    out += ", \"metrics\": {";
    for (size_t m = 0; m < k.metrics.size(); ++m) {
      out += (m == 0 ? "" : ", ") + json_string(k.metrics[m].first) + ": " + json_number(k.metrics[m].second);
    }
    out += "}}";
  }
  return out + (launches.empty() ? "]}\n" : "\n]}\n");
}

}  // namespace blockscope::sim
