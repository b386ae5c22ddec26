// The simulated GPU's race check (BLOCKSCOPE_SIM_CHECKS race), racecheck's hazards as a GPU
// would have them: against the last writer and the readers of each byte since the block's last
// __syncthreads (shared memory, and global memory per block) -- two threads, one of them
// writing, are a hazard unless a __syncwarp covering both (same warp) came between; atomics are
// not accesses here -- and between the blocks of one launch, per byte of global memory, unless
// both blocks synchronised (atomic, fence, volatile access) after the first access, or a grid
// barrier came. A store is checked once it has happened (settle_write): one that leaves memory as
// it was is benign, as racecheck reports same-value writes. checks.cpp calls it from
// check_access; sim/checks_internal.h says how the check files share the work.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sim/checks_internal.h"

namespace blockscope::sim::exec {
namespace {

constexpr size_t kShadowPagesKept = 1024;  // 4 MiB of global memory tracked at once

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

}  // namespace

void race_check(const BlockRun& b, const SimThread& t, RaceCell* cells, RacePcs* pcs, size_t n, bool write,
                const void* pc, uintptr_t address, uint32_t epoch) {
  const uint16_t me = static_cast<uint16_t>(t.linear + 1);
  const unsigned w = t.state.warp, bit = 1u << t.state.lane;
  const Warp& warp = b.warps[w];
  const uint16_t gen = static_cast<uint16_t>(warp.sync_gen);
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

namespace {

// Shadow pages no grid uses, kept for the next (guarded by the grid mutex, as every grid's run).
// Making a page costs more than the accesses it serves in many kernels: 224 KiB the kernel must
// zero on first touch, and malloc gives pages that large back to it when freed.
std::vector<std::unique_ptr<ShadowPage>>& spare_pages() {
  static std::vector<std::unique_ptr<ShadowPage>> pages;
  return pages;
}

// Epochs and stamps are never 0 (a new page's cells have 0) and never repeat within 2^32: a
// cell of an older one is empty. After 2^32 a spare page's cell could name a current one, so the
// spares go. (A grid running that long keeps its own pages and its blocks' shared-memory
// shadows: that stays a limit.) Both counters are guarded by the grid mutex.
uint32_t advance(uint32_t& counter) {
  if (++counter == 0) {
    spare_pages().clear();
    ++counter;
  }
  return counter;
}

uint32_t next_epoch() {
  static uint32_t epochs = 0;
  return advance(epochs);
}

uint32_t next_stamp() {
  static uint32_t stamps = 0;
  return advance(stamps);
}

void drop_pages(GridRun& g) {
  auto& spare = spare_pages();
  for (auto& entry : g.shadow_pages) {
    if (spare.size() < kShadowPagesKept) spare.push_back(std::move(entry.second));
  }
  g.shadow_pages.clear();
}

// The shadow cells of global byte `a` and the rest of its page (a thread keeps its last page).
RaceCell* global_cells(GridRun& g, SimThread& t, uintptr_t a) {
  const uintptr_t key = a / kShadowPageBytes;
  if (t.shadow_key != key || t.shadow_generation != g.shadow_generation) {
    auto it = g.shadow_pages.find(key);
    if (it == g.shadow_pages.end()) {
      if (g.shadow_pages.size() >= kShadowPagesKept) {
        // Forget older records (later hazards on them go unseen). The pages come back at once,
        // under new epochs and a new stamp, so what they held of this grid reads as empty.
        drop_pages(g);
        ++g.shadow_generation;
        for (auto& slot : g.slots) slot->global_epoch = next_epoch();
        if (!g.block_synced.empty()) g.block_stamp = next_stamp();
      }
      auto& spare = spare_pages();
      std::unique_ptr<ShadowPage> page;
      if (spare.empty()) {
        page = std::make_unique<ShadowPage>();
      } else {
        page = std::move(spare.back());
        spare.pop_back();
      }
      it = g.shadow_pages.emplace(key, std::move(page)).first;
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
    if (c.stamp != g.block_stamp) c = BlockCell{g.block_stamp};  // another launch's: empty
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

}  // namespace

void global_race_check(GridRun& g, const BlockRun& b, SimThread& t, uintptr_t a, size_t n, bool write,
                       const void* pc) {
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, kShadowPageBytes - a % kShadowPageBytes);
    RaceCell* cells = global_cells(g, t, a);
    race_check(b, t, cells, nullptr, chunk, write, pc, a, b.global_epoch);
    if (!g.block_synced.empty() && !t.sync_access) {
      cross_block_check(g, b, t, t.shadow_page->blocks + a % kShadowPageBytes, chunk, write, pc, a);
    }
    a += chunk;
    n -= chunk;
  }
}

void race_check_begin_grid(GridRun& g) {
  if (!g.block_synced.empty()) g.block_stamp = next_stamp();
}

void race_check_end_grid(GridRun& g) { drop_pages(g); }

void new_epoch(BlockRun& block) { block.epoch = block.global_epoch = next_epoch(); }

void check_async_write(SimThread& t, const void* destination, const void* incoming, size_t n, const void* pc) {
  settle_write(t);
  BlockRun& b = *t.block;
  if (!b.grid->hooks || !b.grid->checks.race || b.shadow.empty()) return;
  if (std::memcmp(destination, incoming, n) == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(destination);
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], n, true, pc, a, b.epoch);
}

namespace {

// Race-checks store `w` as it has happened (nothing when it left memory as it was).
void check_store(SimThread& t, SimThread::PendingWrite& w) {
  w.active = false;
  if (std::memcmp(w.old, reinterpret_cast<const void*>(w.address), w.bytes) == 0) return;  // a silent store
  BlockRun& b = *t.block;
  const uintptr_t offset = w.address - reinterpret_cast<uintptr_t>(b.smem);
  if (offset < b.smem_capacity) {
    race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], w.bytes, true, w.pc, w.address, b.epoch);
  } else {
    t.sync_access = w.sync;
    global_race_check(*b.grid, b, t, w.address, w.bytes, true, w.pc);
    t.sync_access = false;
  }
}

}  // namespace

void settle_write(SimThread& t) {
  if (t.unseen_write.active) check_store(t, t.unseen_write);
  if (t.pending_write.active) check_store(t, t.pending_write);
}

void settle_write_at_access(SimThread& t) {
  if (t.unseen_write.active) check_store(t, t.unseen_write);
  SimThread::PendingWrite& w = t.pending_write;
  if (!w.active) return;
  if (std::memcmp(w.old, reinterpret_cast<const void*>(w.address), w.bytes) == 0) {
    t.unseen_write = w;  // not happened yet, or silent: the access after tells
    w.active = false;
    return;
  }
  check_store(t, w);
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

}  // namespace blockscope::sim::exec
