// What the simulated GPU checks of every memory access a kernel makes (BLOCKSCOPE_SIM_CHECKS).
//
// nvcc-sim compiles kernel code with the host compiler's ThreadSanitizer instrumentation
// (-fsanitize=thread without its runtime, as the Linux kernel's KCSAN does): every load and store
// calls __tsan_readN / __tsan_writeN (…_unaligned_…, …_volatile_…, …_range) with its address. This
// file is that runtime. Outside a kernel, and for the thread's own stack, a call returns at once;
// otherwise the access is
//   memcheck  inside the block's shared memory (its dynamic region or one __shared__ variable,
//             never a redzone), or a live allocation of this device (or a peer's, or pinned or
//             managed memory), or a __device__/__constant__/__managed__ variable, or read-only data
//             of the program; aligned to its size when the compiler says the type is (a float4
//             at an address not 16-byte aligned faults, as cudaErrorMisalignedAddress); no write
//             to __constant__
//   race      against the last writer and the readers of each byte since the block's last
//             __syncthreads (shared memory, and global memory per block): two threads, one of
//             them writing, are a hazard unless a __syncwarp covering both (same warp) came
//             between; atomics are not accesses here (atomic_begin/atomic_end); between the
//             blocks of one launch, per byte of global memory, unless both blocks synchronised
//             (atomic, fence, volatile access) after the first access, or a grid barrier came
//   initcheck a global load of a byte of a cudaMalloc/cudaMallocAsync/graph allocation that
//             nothing wrote (WrittenBytes, sim.h); stores and atomics mark bytes written
//   streams   records each global access into the running op's log (stream_order.h), which
//             streams.cpp compares with other streams' unordered work when the op ends
// and, with a random schedule, sometimes a switch to another thread.
//
// A fault found here cannot be thrown: the instrumented call sites are nothrow to the compiler.
// The thread is abandoned instead (its stack is never unwound) and the grid ends with the fault.
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "sim/device_heap.h"
#include "sim/executor_state.h"
#include "sim/symbols.h"

namespace blockscope::sim {
namespace exec {
namespace {

std::atomic<int> g_instrumented_units{0};

thread_local SimThread* t_hook = nullptr;  // whose accesses are looked at (null: none)
thread_local uintptr_t t_stack_low = 0;
thread_local uintptr_t t_stack_size = 0;

constexpr size_t kShadowPagesKept = 1024;  // 4 MiB of global memory tracked at once

std::string hex_address(uintptr_t a) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(a));
  return text;
}

std::string bytes_word(size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

std::string at_line(const void* pc) {
  const std::string line = source_line(pc);
  return line.empty() ? std::string() : " at " + line;
}

// ---- Faults from a hook: the thread is abandoned, the grid ends ------------------------------------
// `t` is the thread the access belongs to (for ldmatrix rows, the lane that gave the address).
// The message is composed here, in a statement of its own: the abandoned thread's frames are never
// unwound, so no string may still be alive in them (the callers pass a lambda, not a string).
template <class Compose>
[[noreturn]] void hook_fault(const SimThread& t, cudaError_t code, Compose compose) {
  std::string full = where(*t.block) + ", " + thread_name(t) + ": " + compose();
  abandon_thread(std::move(full), code);
}

// ---- Shared memory ---------------------------------------------------------------------------------
const SharedVariable* variable_containing(const BlockRun& b, size_t offset) {
  auto it = std::upper_bound(b.variables.begin(), b.variables.end(), offset,
                             [](size_t o, const SharedVariable& v) { return o < v.offset; });
  if (it == b.variables.begin()) return nullptr;
  --it;
  return offset < it->offset + it->site->size ? &*it : nullptr;
}

// For a wide access into a shared variable declared with a smaller alignment (a byte array read
// as words): the simulator places it as declared, so the access is misaligned here; on a GPU it
// is whenever ptxas places it so, which nothing in the declaration prevents.
std::string underaligned_variable_hint(const BlockRun& b, const void* address, size_t n) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(b.smem);
  if (offset >= b.smem_capacity) return "";
  const SharedVariable* v = variable_containing(b, offset);
  if (v == nullptr || v->site->align >= n) return "";
  return " wherever it is placed off a multiple of " + std::to_string(n) + ": `" + std::string(v->site->name) +
         "` is declared with alignment " + std::to_string(v->site->align) +
         " only, which the simulator keeps to (declare it __align__(" + std::to_string(n) + ") or of a " +
         std::to_string(n) + "-byte type)";
}

std::string variable_label(const SharedVariable& v) {
  return "`" + std::string(v.site->name) + "` (" + v.site->file + ":" + std::to_string(v.site->line) + ", " +
         bytes_word(v.site->size) + ")";
}

// True when [offset, offset + n) lies inside the dynamic region or inside one variable; that
// region is *begin, *end.
bool shared_range_valid(const BlockRun& b, size_t offset, size_t n, size_t* begin, size_t* end) {
  const size_t dynamic = b.grid->launch->dynamic_smem;
  if (offset >= b.dynamic_offset && offset + n <= b.dynamic_offset + dynamic) {
    *begin = b.dynamic_offset, *end = b.dynamic_offset + dynamic;
    return true;
  }
  const SharedVariable* v = variable_containing(b, offset);
  if (v == nullptr || offset + n > v->offset + v->site->size) return false;
  *begin = v->offset, *end = v->offset + v->site->size;
  return true;
}

// Why [offset, offset + n) is not inside one region: it starts in one and runs past its end, or it
// starts in a redzone.
std::string shared_overrun(const BlockRun& b, size_t offset, size_t n) {
  const size_t dynamic = b.grid->launch->dynamic_smem;
  if (offset >= b.dynamic_offset && offset < b.dynamic_offset + dynamic) {
    return "it runs " + bytes_word(offset + n - (b.dynamic_offset + dynamic)) +
           " past the end of the dynamic shared memory (" + bytes_word(dynamic) + ", access at +" +
           std::to_string(offset - b.dynamic_offset) + ")";
  }
  if (const SharedVariable* v = variable_containing(b, offset)) {
    return "it runs " + bytes_word(offset + n - (v->offset + v->site->size)) + " past the end of " + variable_label(*v) +
           " (access at +" + std::to_string(offset - v->offset) + ")";
  }
  return describe_address(b, reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(b.smem) + offset));
}

// ---- The race check ---------------------------------------------------------------------------------
// Whether a __syncwarp covering `lanes` completed in warp `w` after its __syncwarp number `from`.
bool synced(const Warp& w, uint16_t from, unsigned lanes) {
  const uint16_t distance = static_cast<uint16_t>(static_cast<uint16_t>(w.sync_gen) - from);
  if (distance == 0) return false;
  const unsigned look = std::min<unsigned>(distance, kSyncHistory);
  for (unsigned k = 0; k < look; ++k) {
    if ((w.sync_masks[(w.sync_gen - k) % kSyncHistory] & lanes) == lanes) return true;
  }
  return distance > kSyncHistory;  // older history is gone: assume it was ordered
}

struct Hazard {
  const char* kind;  // "write after write" …
  const char* racecheck;
  unsigned other;    // linear thread index, or UINT32_MAX: threads of several warps
  bool other_wrote;
  const void* other_pc;
};

[[noreturn]] void report_race(const BlockRun& b, const SimThread& t, const Hazard& h, bool write, size_t n,
                              uintptr_t address, const void* pc) {
  hook_fault(t, cudaErrorLaunchFailure, [&] {
    const std::string location = describe_address(b, reinterpret_cast<const void*>(address));
    const std::string other = h.other == UINT32_MAX ? std::string("threads of other warps") : thread_name(b, h.other);
    return std::string(location.rfind("shared", 0) == 0 ? "shared" : "global") + "-memory race (" + h.kind +
           ", racecheck's " + h.racecheck + " hazard): this thread " + (write ? "writes " : "reads ") + bytes_word(n) +
           " at " + location + at_line(pc) + ", which " + other + (h.other_wrote ? " wrote" : " read") +
           at_line(h.other_pc) +
           " since the block's last __syncthreads, and no barrier orders the two (__syncthreads; within a warp, "
           "__syncwarp)";
  });
}

void race_check(const BlockRun& b, const SimThread& t, RaceCell* cells, RacePcs* pcs, size_t n, bool write,
                const void* pc, uintptr_t address) {
  const uint16_t me = static_cast<uint16_t>(t.linear + 1);
  const unsigned w = t.state.warp, bit = 1u << t.state.lane;
  const Warp& warp = b.warps[w];
  const uint16_t gen = static_cast<uint16_t>(warp.sync_gen);
  const uint32_t epoch = b.epoch;
  for (size_t i = 0; i < n; ++i) {
    RaceCell& c = cells[i];
    // Fast paths: the first access of this epoch, and the thread's own data.
    if (c.epoch != epoch) {
      c.epoch = epoch;
      if (write) {
        c.writer = me, c.writer_gen = gen, c.reader_lanes = 0, c.readers_warp = 0;
      } else {
        c.writer = 0, c.readers_warp = static_cast<uint16_t>(w), c.reader_lanes = bit, c.reader_gen = gen;
      }
      if (pcs) (write ? pcs[i].write : pcs[i].read) = pc;
      continue;
    }
    if (c.writer == me || c.writer == 0) {
      const bool only_me_read = c.reader_lanes == 0 || (c.readers_warp == w && c.reader_lanes == bit);
      if (write && only_me_read) {
        c.writer = me, c.writer_gen = gen, c.reader_lanes = 0, c.readers_warp = 0;
        if (pcs) pcs[i].write = pc;
        continue;
      }
      if (!write && (c.reader_lanes == 0 || c.readers_warp == w)) {
        if (c.reader_lanes == 0) c.readers_warp = static_cast<uint16_t>(w);
        c.reader_lanes |= bit, c.reader_gen = gen;
        if (pcs) pcs[i].read = pc;
        continue;
      }
    }
    Hazard hazard{nullptr, nullptr, 0, false, nullptr};
    if (c.writer != 0 && c.writer != me) {
      const unsigned other = c.writer - 1u;
      if (other / kWarpSize != w || !synced(warp, c.writer_gen, bit | 1u << (other % kWarpSize))) {
        hazard = write ? Hazard{"write after write", "WAW", other, true, pcs ? pcs[i].write : nullptr}
                       : Hazard{"read after write", "RAW", other, true, pcs ? pcs[i].write : nullptr};
      }
    }
    if (hazard.kind == nullptr && write && c.reader_lanes != 0) {
      if (c.readers_warp == kManyWarps) {
        hazard = Hazard{"write after read", "WAR", UINT32_MAX, false, pcs ? pcs[i].read : nullptr};
      } else {
        const unsigned others = c.reader_lanes & ~(c.readers_warp == w ? bit : 0u);
        if (others != 0 && (c.readers_warp != w || !synced(warp, c.reader_gen, others | bit))) {
          const unsigned other = c.readers_warp * kWarpSize + static_cast<unsigned>(__builtin_ctz(others));
          hazard = Hazard{"write after read", "WAR", other, false, pcs ? pcs[i].read : nullptr};
        }
      }
    }
    if (hazard.kind != nullptr) {
      report_race(b, t, hazard, write, n, address + i, pc);
    }
    if (write) {
      c.writer = me;
      c.writer_gen = gen;
      c.reader_lanes = 0;
      c.readers_warp = 0;
      if (pcs) pcs[i].write = pc;
    } else {
      if (c.reader_lanes == 0) {
        c.readers_warp = static_cast<uint16_t>(w);
        c.reader_lanes = bit;
      } else if (c.readers_warp == w) {
        c.reader_lanes |= bit;
      } else {
        c.readers_warp = kManyWarps;
      }
      c.reader_gen = gen;
      if (pcs) pcs[i].read = pc;
    }
  }
}

// The shadow cells of global byte `a` and the rest of its page (a thread keeps its last page).
RaceCell* global_cells(GridRun& g, SimThread& t, uintptr_t a) {
  const uintptr_t key = a / kShadowPageBytes;
  if (t.shadow_key != key || t.shadow_generation != g.shadow_generation) {
    auto it = g.shadow_pages.find(key);
    if (it == g.shadow_pages.end()) {
      if (g.shadow_pages.size() >= kShadowPagesKept) {
        g.shadow_pages.clear();  // forget older records (later hazards on them go unseen)
        ++g.shadow_generation;
      }
      it = g.shadow_pages.emplace(key, std::make_unique<ShadowPage>()).first;
      if (!g.block_synced.empty()) it->second->blocks.reset(new BlockCell[kShadowPageBytes]());
    }
    t.shadow_key = key;
    t.shadow_page = it->second.get();
    t.shadow_generation = g.shadow_generation;
  }
  return &t.shadow_page->cells[a % kShadowPageBytes];
}

// "block (x,y,z) thread (x,y,z)" of a linear block and thread index.
std::string block_thread(const GridRun& g, uint32_t block, unsigned thread) {
  const dim3 gd = g.launch->grid, bd = g.launch->block;
  const auto coords = [](uint64_t i, const dim3& d) {
    return "(" + std::to_string(i % d.x) + "," + std::to_string(i / d.x % d.y) + "," +
           std::to_string(i / d.x / d.y) + ")";
  };
  return "block " + coords(block, gd) + " thread " + coords(thread, bd);
}

// Blocks of one launch are ordered only by synchronisation: a conflicting access to a byte another
// block touched is a race unless that block synchronised (atomic, fence, volatile access) after its
// access and this block did too, later (a release and an acquire, as far as the sim can tell), or
// a grid barrier came between. Atomics and volatile accesses are not checked here.
void cross_block_check(GridRun& g, const BlockRun& b, SimThread& t, BlockCell* cells, size_t n, bool write,
                       const void* pc, uintptr_t address) {
  const uint32_t me = static_cast<uint32_t>(b.linear_block) + 1;
  const uint32_t my_sync = g.block_synced[b.linear_block];
  const auto ordered = [&](uint32_t other, uint32_t tick) {
    return g.block_synced[other - 1] > tick && my_sync > tick;
  };
  for (size_t i = 0; i < n; ++i) {
    BlockCell& c = cells[i];
    const char* kind = nullptr;
    uint32_t other = 0;
    unsigned other_thread = 0;
    const void* other_pc = nullptr;
    bool other_wrote = false;
    if (c.writer != 0 && c.writer != me && !ordered(c.writer, c.write_tick)) {
      kind = write ? "write after write" : "read after write";
      other = c.writer, other_thread = c.writer_thread, other_pc = c.write_pc, other_wrote = true;
    } else if (write && c.reader != 0 && c.reader != me && !ordered(c.reader, c.read_tick)) {
      kind = "write after read";
      other = c.reader, other_thread = c.reader_thread, other_pc = c.read_pc;
    }
    if (kind != nullptr) {
      hook_fault(t, cudaErrorLaunchFailure, [&] {
        return std::string("global-memory race between blocks (") + kind + "): this thread " +
               (write ? "writes " : "reads ") + bytes_word(n) + " at " +
               describe_address(b, reinterpret_cast<const void*>(address + i)) + at_line(pc) + ", which " +
               block_thread(g, other - 1, other_thread) + (other_wrote ? " wrote" : " read") + at_line(other_pc) +
               " in this launch, and no atomic, fence or volatile access by both blocks (nor a grid barrier) orders "
               "the two: blocks of a launch run in any order, or at once";
      });
    }
    if (write) {
      c.writer = me, c.write_tick = g.sync_tick, c.writer_thread = static_cast<uint16_t>(t.linear), c.write_pc = pc;
      c.reader = 0;
    } else if (c.writer != me) {
      c.reader = me, c.read_tick = g.sync_tick, c.reader_thread = static_cast<uint16_t>(t.linear), c.read_pc = pc;
    }
  }
}

void global_race_check(GridRun& g, const BlockRun& b, SimThread& t, uintptr_t a, size_t n, bool write,
                       const void* pc) {
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, kShadowPageBytes - a % kShadowPageBytes);
    RaceCell* cells = global_cells(g, t, a);
    race_check(b, t, cells, nullptr, chunk, write, pc, a);
    if (!g.block_synced.empty() && !t.sync_access) {
      cross_block_check(g, b, t, t.shadow_page->blocks.get() + a % kShadowPageBytes, chunk, write, pc, a);
    }
    a += chunk;
    n -= chunk;
  }
}

// ---- Global memory -----------------------------------------------------------------------------------
const AllocationRange* allocation_containing(const GridRun& g, uintptr_t a) {
  auto it = std::upper_bound(g.allocations.begin(), g.allocations.end(), a,
                             [](uintptr_t x, const AllocationRange& r) { return x < r.base; });
  if (it == g.allocations.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

// "(the nearest allocation, 4096 bytes at 0x…, ends 4 bytes before it)" for an address in none.
std::string nearest_allocation(const GridRun& g, uintptr_t a) {
  auto it = std::upper_bound(g.allocations.begin(), g.allocations.end(), a,
                             [](uintptr_t x, const AllocationRange& r) { return x < r.base; });
  std::string best;
  uintptr_t distance = UINTPTR_MAX;
  if (it != g.allocations.begin()) {
    const AllocationRange& r = *std::prev(it);
    if (a - r.end < distance) {
      distance = a - r.end;
      best = distance == 0 ? "; it is just past the end of a " + bytes_word(r.end - r.base) + " allocation at " +
                                 hex_address(r.base)
                           : "; the nearest allocation (" + bytes_word(r.end - r.base) + " at " + hex_address(r.base) +
                                 ") ends " + bytes_word(distance) + " before it";
    }
  }
  if (it != g.allocations.end() && it->base - a < distance) {
    distance = it->base - a;
    best = "; the nearest allocation (" + bytes_word(it->end - it->base) + " at " + hex_address(it->base) +
           ") starts " + bytes_word(distance) + " after it";
  }
  return distance <= (1u << 20) ? best : std::string();
}

const char* kind_name(AllocationInfo::Kind kind) {
  switch (kind) {
    case AllocationInfo::Kind::device: return "cudaMalloc";
    case AllocationInfo::Kind::pool: return "cudaMallocAsync";
    case AllocationInfo::Kind::graph: return "graph allocation";
    case AllocationInfo::Kind::pinned_host: return "cudaMallocHost";
    case AllocationInfo::Kind::registered_host: return "cudaHostRegister";
    case AllocationInfo::Kind::managed: return "cudaMallocManaged";
  }
  return "?";
}

void global_access(GridRun& g, const BlockRun& b, SimThread& t, uintptr_t a, size_t n, bool write,
                   const void* pc) {
  if (a >= t.global_begin && a + n <= t.global_end) return;  // inside the allocation it used last
  const char* verb = write ? "write" : "read";
  if (const AllocationRange* r = allocation_containing(g, a)) {
    if (g.checks.memcheck) {
      if (a + n > r->end) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds global ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) +
                       at_line(pc) + ": it runs " + bytes_word(a + n - r->end) + " past the end of a " +
                       bytes_word(r->end - r->base) + " " + kind_name(r->kind) + " allocation at " + hex_address(r->base);
  });
      }
      const bool everywhere = r->kind == AllocationInfo::Kind::pinned_host ||
                              r->kind == AllocationInfo::Kind::registered_host || r->kind == AllocationInfo::Kind::managed;
      if (!everywhere && r->device != g.device && !peer_access_enabled(g.device, r->device)) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("global ") + verb + " at " + hex_address(a) + at_line(pc) + " of device " +
                       std::to_string(r->device) + "'s memory (" + kind_name(r->kind) + ", " +
                       bytes_word(r->end - r->base) + " at " + hex_address(r->base) + ") from a kernel on device " +
                       std::to_string(g.device) + " without peer access (cudaDeviceEnablePeerAccess)";
  });
      }
    }
    t.global_begin = r->base;  // checked: later accesses inside it need no lookup
    t.global_end = r->end;
    t.global_written = r->written;
    return;
  }
  if (const SymbolRange* s = find_symbol(a)) {
    if (g.checks.memcheck) {
      if (a + n > s->end) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) + at_line(pc) +
                       ": it runs " + bytes_word(a + n - s->end) + " past the end of __device__ variable `" + s->name + "`";
  });
      }
      if (write && s->constant) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("write of ") + bytes_word(n) + " to __constant__ variable `" + s->name + "`" + at_line(pc) +
                       ": constant memory is read-only in kernels (cudaMemcpyToSymbol writes it)";
  });
      }
    }
    return;
  }
  if (!g.checks.memcheck) return;
  // The device heap (kernels' malloc and new): its blocks come and go during the grid.
  const HeapLookup heap = device_heap_lookup(g.device, a);
  if (heap.kind == HeapLookup::live && a + n <= heap.base + heap.size) return;
  if (heap.kind != HeapLookup::outside) {
    hook_fault(t, cudaErrorIllegalAddress, [&] {
      const std::string block = bytes_word(heap.size) + " device-heap block (a kernel's malloc or new) at " +
                                hex_address(heap.base);
      std::string what = std::string("illegal device-heap ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) +
                         at_line(pc) + ": ";
      if (heap.kind == HeapLookup::freed) return what + "use after free: it lies in a " + block + " that was freed";
      if (heap.kind == HeapLookup::live || heap.base != 0) {
        return what + "out of bounds: it runs " + bytes_word(a + n - heap.base - heap.size) + " past the end of a " +
               block;
      }
      return what + "it lies in the device heap but in no block malloc or new gave";
    });
  }
  if (!write && readonly_image(a, n)) return;  // string literals, constant tables
  for (const auto& slot : g.slots) {
    if (slot.get() != &b && slot->active && a - reinterpret_cast<uintptr_t>(slot->smem) < slot->smem_capacity) {
      hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string(verb) + " at " + hex_address(a) + at_line(pc) + ": shared memory of another block (" +
                     where(*slot) + ")";
  });
    }
  }
  hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("illegal ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) + at_line(pc) +
                 ": not memory of the simulated GPU (no live allocation, __device__ variable, shared memory of this "
                 "block or read-only data there: host memory, freed memory, another thread's local memory?)" +
                 nearest_allocation(g, a);
  });
}

// ---- initcheck ---------------------------------------------------------------------------------------
// A kernel store marks its bytes written; a load of a byte nothing wrote since the allocation (no
// cudaMemset, cudaMemcpy, cuBLASLt/NCCL output or kernel store) is reported, as compute-sanitizer's
// initcheck reports an uninitialized __global__ memory read.
void initcheck_access(const GridRun& g, SimThread& t, WrittenBytes& w, uintptr_t a, size_t n, bool write,
                      const void* pc) {
  const size_t offset = a - t.global_begin;
  if (write) {
    w.mark(offset, n);
    return;
  }
  const size_t first = w.first_unwritten(offset, n);
  if (first == SIZE_MAX) return;
  hook_fault(t, cudaErrorLaunchFailure, [&] {
    const std::string allocated = at_line(w.allocated_at);
    return std::string("uninitialized global-memory read (initcheck): this thread reads ") + bytes_word(n) + " at " +
           describe_address(*t.block, reinterpret_cast<const void*>(a)) + at_line(pc) + "; byte +" +
           std::to_string(first) + " of the allocation" + (allocated.empty() ? "" : " (cudaMalloc'd" + allocated + ")") +
           " was never written since it was allocated: no cudaMemset, cudaMemcpy or kernel store covered it (a GPU "
           "returns whatever the memory held)";
  });
  (void)g;
}

inline void on_access(const void* p, size_t n, bool write, bool aligned, const void* pc) {
  SimThread* t = t_hook;
  if (t == nullptr) return;
  if (reinterpret_cast<uintptr_t>(p) - t_stack_low < t_stack_size) return;  // its own local memory
  check_access(*t, p, n, write, aligned, pc);
  count_access(*t, p, n, write ? Access::store : Access::load, pc);
}

// A volatile access: checked like any other, and a poll (a spin loop on a flag makes progress).
inline void on_volatile(const void* p, size_t n, bool write, bool aligned, const void* pc) {
  SimThread* t = t_hook;
  if (t == nullptr) return;
  if (reinterpret_cast<uintptr_t>(p) - t_stack_low < t_stack_size) return;
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
}

void hooks_leave() { t_hook = nullptr; }

void new_epoch(BlockRun& block) {
  static uint32_t epochs = 0;  // guarded by the grid mutex; never 0 (empty cells have epoch 0)
  if (++epochs == 0) ++epochs;
  block.epoch = epochs;
}

void check_access(SimThread& t, const void* address, size_t n, bool write, bool aligned, const void* pc,
                  bool may_switch) {
  settle_write(t);
  BlockRun& b = *t.block;
  GridRun& g = *b.grid;
  if (may_switch) maybe_preempt(g, t);  // before the access: the interleaving a GPU could have
  const auto a = reinterpret_cast<uintptr_t>(address);
  if (g.checks.memcheck && aligned && n > 1 && (a & (n - 1)) != 0) {  // n: 2, 4, 8 or 16
    hook_fault(t, cudaErrorMisalignedAddress, [&] {
    return std::string("misaligned ") + std::to_string(n) + "-byte " + (write ? "write" : "read") + at_line(pc) +
                      ": " + describe_address(b, address) + " is " + std::to_string(a % n) +
                      " bytes past a multiple of " + std::to_string(n) + "; a GPU faults (cudaErrorMisalignedAddress)" +
                      underaligned_variable_hint(b, address, n);
  });
  }
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  const bool shared = offset < b.smem_capacity;
  if (shared) {
    if (g.checks.memcheck && !(offset >= t.shared_begin && offset + n <= t.shared_end) &&
        !shared_range_valid(b, offset, n, &t.shared_begin, &t.shared_end)) {
      hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds shared-memory ") + (write ? "write" : "read") + " of " + bytes_word(n) +
                        at_line(pc) + ": " + shared_overrun(b, offset, n);
  });
    }
  } else {
    global_access(g, b, t, a, n, write, pc);
    if (a >= t.global_begin && a + n <= t.global_end) {
      if (g.checks.initcheck && t.global_written != nullptr && (write || t.global_written->unwritten != 0)) {
        initcheck_access(g, t, *t.global_written, a, n, write, pc);
      }
      if (g.op_log != nullptr) stream_log(g, t, a, n, write, pc);
    }
  }
  if (g.checks.race && (!shared || !b.shadow.empty())) {
    if (write && n <= sizeof t.pending_write.old) {
      SimThread::PendingWrite& w = t.pending_write;
      w.active = true;
      w.address = a;
      w.bytes = n;
      std::memcpy(w.old, address, n);
      w.pc = pc;
      w.sync = t.sync_access;
    } else if (shared) {
      race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], n, write, pc, a);
    } else {
      global_race_check(g, b, t, a, n, write, pc);
    }
  }
  if (write) note_progress(g);
}

void stream_log(GridRun& g, SimThread& t, uintptr_t a, size_t n, bool write, const void* pc) {
  if (g.op_log == nullptr) return;
  if (t.log_entry == nullptr || t.log_base != t.global_begin) {
    t.log_entry = &g.op_log->by_allocation[t.global_begin];
    t.log_base = t.global_begin;
  }
  (write ? t.log_entry->writes : t.log_entry->reads).add(a, a + n, pc, t.block->linear_block, t.linear);
}

void check_async_write(SimThread& t, const void* destination, const void* incoming, size_t n, const void* pc) {
  settle_write(t);
  BlockRun& b = *t.block;
  if (!b.grid->hooks || !b.grid->checks.race || b.shadow.empty()) return;
  if (std::memcmp(destination, incoming, n) == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(destination);
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], n, true, pc, a);
}

void settle_write(SimThread& t) {
  SimThread::PendingWrite& w = t.pending_write;
  if (!w.active) return;
  w.active = false;
  if (std::memcmp(w.old, reinterpret_cast<const void*>(w.address), w.bytes) == 0) return;  // a silent store
  BlockRun& b = *t.block;
  const uintptr_t offset = w.address - reinterpret_cast<uintptr_t>(b.smem);
  if (offset < b.smem_capacity) {
    race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], w.bytes, true, w.pc, w.address);
  } else {
    t.sync_access = w.sync;
    global_race_check(*b.grid, b, t, w.address, w.bytes, true, w.pc);
    t.sync_access = false;
  }
}

void note_sync(GridRun& g, SimThread& t) {
  if (g.block_synced.empty()) return;
  g.block_synced[t.block->linear_block] = ++g.sync_tick;
}

void note_grid_barrier(GridRun& g) {
  if (g.block_synced.empty()) return;
  ++g.sync_tick;
  std::fill(g.block_synced.begin(), g.block_synced.end(), g.sync_tick + 1);
  ++g.sync_tick;
}

std::string describe_address(const BlockRun& b, const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  if (offset >= b.smem_capacity) {
    if (const AllocationRange* r = allocation_containing(*b.grid, a)) {
      return hex_address(a) + " (" + kind_name(r->kind) + " allocation of " + bytes_word(r->end - r->base) + " at " +
             hex_address(r->base) + ", +" + std::to_string(a - r->base) + ")";
    }
    if (const SymbolRange* s = find_symbol(a)) return hex_address(a) + " (`" + s->name + "` +" + std::to_string(a - s->base) + ")";
    return hex_address(a);
  }
  // Shared offsets as a GPU would number them: from the start of the block's shared memory.
  const size_t dynamic = b.grid->launch->dynamic_smem;
  std::string out = "shared offset " + hex_address(offset - b.dynamic_offset);
  if (offset >= b.dynamic_offset && offset < b.dynamic_offset + dynamic) {
    return out + " (dynamic shared memory of " + bytes_word(dynamic) + ", +" + std::to_string(offset - b.dynamic_offset) + ")";
  }
  if (const SharedVariable* v = variable_containing(b, offset)) {
    return out + " (" + variable_label(*v) + ", +" + std::to_string(offset - v->offset) + ")";
  }
  // In a redzone: name the nearest region on either side.
  std::string nearest;
  size_t best = SIZE_MAX;
  if (offset >= b.dynamic_offset + dynamic && offset - (b.dynamic_offset + dynamic) < best) {
    best = offset - (b.dynamic_offset + dynamic);
    nearest = (best == 0 ? std::string("just") : bytes_word(best)) + " past the end of dynamic shared memory (" +
              bytes_word(dynamic) + ")";
  }
  if (offset < b.dynamic_offset && b.dynamic_offset - offset < best) {
    best = b.dynamic_offset - offset;
    nearest = bytes_word(best) + " before the start of dynamic shared memory";
  }
  for (const SharedVariable& v : b.variables) {
    const size_t end = v.offset + v.site->size;
    if (offset >= end && offset - end < best) {
      best = offset - end;
      nearest = (best == 0 ? std::string("just") : bytes_word(best)) + " past the end of " + variable_label(v);
    } else if (offset < v.offset && v.offset - offset < best) {
      best = v.offset - offset;
      nearest = bytes_word(best) + " before the start of " + variable_label(v);
    }
  }
  return out + (nearest.empty() ? " (no variable there)" : " (" + nearest + ")");
}

void checks_begin_grid(GridRun& grid) {
  load_symbols_for_device(grid.device);
  if (!grid.hooks) return;
  if (grid.checks.streams) grid.op_log = detail::current_op_log();
  // The race check between blocks: a sync tick per block (grids of up to 2^24 blocks).
  if (grid.checks.race && grid.blocks > 1 && grid.blocks <= (uint64_t{1} << 24)) grid.block_synced.assign(grid.blocks, 0);
  snapshot_allocations([&grid](const AllocationInfo& info) {
    const auto base = reinterpret_cast<uintptr_t>(info.base);
    grid.allocations.push_back(AllocationRange{base, base + info.size, info.device, info.kind, info.written});
  });
  std::sort(grid.allocations.begin(), grid.allocations.end(),
            [](const AllocationRange& x, const AllocationRange& y) { return x.base < y.base; });
}

void checks_end_grid(GridRun& grid) { grid.shadow_pages.clear(); }

// "file.cu:42" of a code address: addr2line on the object that holds it (kernels are compiled with
// line tables). Code inlined from a helper names its callers too: "tensor_core.cuh:179, called
// from flash.cu:93". Only ever run to word a fault.
std::string source_line(const void* pc) {
  if (pc == nullptr) return "";
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return "";
  // A position-independent object is addressed from its load base; a fixed one absolutely.
  uintptr_t address = reinterpret_cast<uintptr_t>(pc) - 1;  // the call instruction, not the return
  const auto* header = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
  if (header != nullptr && header->e_type == ET_DYN) address -= reinterpret_cast<uintptr_t>(info.dli_fbase);
  std::string path = info.dli_fname;
  if (path.empty() || path.find('\'') != std::string::npos) return "";
  if (path.find('/') == std::string::npos) path = "/proc/self/exe";
  char command[4200];
  std::snprintf(command, sizeof command, "addr2line -i -e '%s' 0x%llx 2>/dev/null", path.c_str(),
                static_cast<unsigned long long>(address));
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  std::string text;
  char line[4096] = {};
  for (int frame = 0; frame < 3 && std::fgets(line, sizeof line, pipe) != nullptr; ++frame) {
    std::string place = line;  // innermost first, then the places it was inlined into
    while (!place.empty() && (place.back() == '\n' || place.back() == '\r')) place.pop_back();
    const size_t discriminator = place.find(" (discriminator");
    if (discriminator != std::string::npos) place.resize(discriminator);
    if (place.empty() || place[0] == '?') break;
    text += (text.empty() ? "" : ", called from ") + place;
  }
  pclose(pipe);
  return text;
}

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
