// The simulated GPU's synchronisation between threads: __syncthreads (a block barrier identified
// by its source line; exited threads count as arrived), the grid barrier of cooperative launches,
// the warp collectives (shuffles, votes, reductions, __syncwarp, mma, ldmatrix: completed by the
// last lane to arrive) and __activemask — everything that blocks a thread until others arrive, and
// what a thread's exit releases; the deadlock message names what they wait at. Apart from
// executor.cpp, which runs the grid and switches the fibers these block and release.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim/executor_internal.h"

namespace blockscope::sim {
namespace exec {
namespace {

// ---- Messages --------------------------------------------------------------------------------
// "thread 31" / "threads 0-15, 17, 20-31" over sorted ids.
std::string id_list(const char* singular, const char* plural, const std::vector<unsigned>& ids) {
  std::string out = ids.size() == 1 ? singular : plural;
  out += ' ';
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned> lanes_of(unsigned mask) {
  std::vector<unsigned> lanes;
  for (unsigned l = 0; l < kWarpSize; ++l)
    if (mask >> l & 1u) lanes.push_back(l);
  return lanes;
}

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

std::string site(const char* what, const char* file, int line) {
  std::string out = what;
  if (file != nullptr) out += std::string(" at ") + file + ":" + std::to_string(line);
  return out;
}

// ---- Lanes blocked and released --------------------------------------------------------------
// A lane stops being runnable (blocks or exits). __activemask waiters are released once no lane
// of their warp can still run: the lanes waiting there together are the active mask.
void lane_blocked(BlockRun& run, unsigned warp_index) {
  Warp& warp = run.warps[warp_index];
  --warp.runnable;
  if (warp.runnable != 0 || warp.at_activemask == 0) return;
  const unsigned base = warp_index * kWarpSize;
  std::vector<unsigned> ids;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((warp.at_activemask >> l & 1u) == 0) continue;
    SimThread& t = run.threads[base + l];
    t.barrier_result = static_cast<int>(warp.at_activemask);
    t.status = Status::ready;
    ids.push_back(base + l);
  }
  release_in_order(*run.grid, run, ids);
  warp.runnable += static_cast<unsigned>(__builtin_popcount(warp.at_activemask));
  warp.at_activemask = 0;
}

void lane_released(BlockRun& run, SimThread& t) {
  t.status = Status::ready;
  ++run.warps[t.state.warp].runnable;
}

// ---- Warp collectives --------------------------------------------------------------------------
// Completes warp `warp_index`'s pending collective number `pending_index`: combine for every lane
// that arrived (exited lanes get nullptr), release them all but `caller` (which goes on itself).
void complete_collective(BlockRun& run, unsigned warp_index, size_t pending_index, const SimThread* caller) {
  Warp& warp = run.warps[warp_index];
  PendingCollective done = warp.pending[pending_index];
  warp.pending[pending_index] = warp.pending.back();
  warp.pending.pop_back();
  const unsigned arrived = done.arrived & ~warp.exited;
  WarpCollectiveArgs args{done.mask, done.in, done.out};
  (*done.combine)(args);
  if (done.what[0] == '_' && std::strcmp(done.what, "__syncwarp") == 0) {
    ++warp.sync_gen;
    warp.sync_masks[warp.sync_gen % kSyncHistory] = done.mask | warp.exited;
  }
  std::vector<unsigned> ids;
  const unsigned base = warp_index * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((arrived >> l & 1u) == 0 || &run.threads[base + l] == caller) continue;
    lane_released(run, run.threads[base + l]);
    ids.push_back(base + l);
  }
  release_in_order(*run.grid, run, ids);
  note_progress(*run.grid);
}

bool collective_complete(const Warp& warp, const PendingCollective& p) {
  return ((p.arrived | warp.exited) & p.mask) == p.mask;
}

// ---- Barriers ----------------------------------------------------------------------------------
void release_block_barrier(BlockRun& run) {
  Barrier& b = run.barrier;
  if (run.grid->checks.strictsync && run.exited > 0) {
    std::vector<unsigned> waiting(b.waiters.begin(), b.waiters.end()), gone;
    std::sort(waiting.begin(), waiting.end());
    for (const SimThread& t : run.threads)
      if (t.status == Status::exited) gone.push_back(t.linear);
    fault_with_code(site(b.what, b.file, b.line) + " completed by " + id_list("thread", "threads", waiting) +
                        " while " + id_list("thread", "threads", gone) +
                        (gone.size() == 1 ? " has" : " have") +
                        " exited without reaching it (strictsync): PTX releases such a barrier (exited threads do "
                        "not hold it up), but __syncthreads is bar.sync.aligned, which the CUDA programming guide "
                        "allows in conditional code only where the condition is the same across the block",
                    cudaErrorLaunchFailure);
  }
  const int result = b.count;
  for (unsigned w : b.waiters) {
    run.threads[w].barrier_result = result;
    lane_released(run, run.threads[w]);
  }
  release_in_order(*run.grid, run, b.waiters);
  b.waiters.clear();
  b.arrived = 0;
  count_block_barrier(run);
  counters_flush_block(run);  // every live lane has passed what came before
  new_epoch(run);
  note_progress(*run.grid);
}

void release_grid_barrier(GridRun& grid) {
  note_grid_barrier(grid);
  std::vector<SimThread*> waiters = grid.grid_waiters;
  if (grid.schedule.order == Order::reverse) std::reverse(waiters.begin(), waiters.end());
  for (SimThread* t : waiters) {
    lane_released(*t->block, *t);
    make_ready(grid, *t);
  }
  grid.grid_waiters.clear();
  grid.grid_arrived = 0;
  for (auto& slot : grid.slots) {
    counters_flush_block(*slot);
    new_epoch(*slot);
  }
  note_progress(grid);
}

}  // namespace

// Why the grid cannot go on: who waits where, who has exited.
std::string deadlock_message(const GridRun& grid) {
  std::vector<std::string> parts;
  for (const auto& slot : grid.slots) {
    const BlockRun& run = *slot;
    if (!run.active) continue;
    std::vector<unsigned> exited, at_barrier, at_grid;
    for (const SimThread& t : run.threads) {
      if (t.status == Status::exited) exited.push_back(t.linear);
      if (t.status == Status::barrier) at_barrier.push_back(t.linear);
      if (t.status == Status::grid_barrier) at_grid.push_back(t.linear);
    }
    if (!at_barrier.empty()) {
      std::string part = site(run.barrier.what, run.barrier.file, run.barrier.line) + " in " + where(run) + ": " +
                         id_list("thread", "threads", at_barrier) + " wait at the barrier";
      if (!exited.empty()) part += ", " + id_list("thread", "threads", exited) + (exited.size() == 1 ? " has" : " have") + " exited";
      parts.push_back(part);
    }
    if (!at_grid.empty()) {
      parts.push_back("this_grid().sync() in " + where(run) + ": " + id_list("thread", "threads", at_grid) +
                      " wait for the other blocks");
    }
    for (size_t w = 0; w < run.warps.size(); ++w) {
      for (const PendingCollective& p : run.warps[w].pending) {
        std::string part = std::string(p.what) + " mask " + hex(p.mask) + " in " + where(run) + ", warp " +
                           std::to_string(w) + ": " + id_list("lane", "lanes", lanes_of(p.arrived)) + " arrived";
        const std::vector<unsigned> elsewhere = lanes_of(p.mask & ~p.arrived & ~run.warps[w].exited);
        if (!elsewhere.empty()) {
          part += ", " + id_list("lane", "lanes", elsewhere) + " wait elsewhere (";
          part += at_barrier.empty() ? "another warp collective" : "__syncthreads or another warp collective";
          part += ")";
        }
        parts.push_back(part);
      }
    }
  }
  std::string message = "deadlock: ";
  for (size_t i = 0; i < parts.size(); ++i) message += (i ? "; " : "") + parts[i];
  if (parts.empty()) message += "kernel " + kernel_label(*grid.launch) + ": threads blocked with nothing to wait for";
  return message;
}

// A thread exits: waiting collectives stop waiting for it, and a barrier it held up is released
// (PTX `exit`: "if the exiting threads are holding up the barrier, the barrier is released").
void lane_exits(BlockRun& run, SimThread& me) {
  Warp& warp = run.warps[me.state.warp];
  const unsigned bit = 1u << me.state.lane;
  warp.exited |= bit;
  lane_blocked(run, me.state.warp);
  for (size_t i = 0; i < warp.pending.size();) {
    PendingCollective& p = warp.pending[i];
    if ((p.mask & bit) == 0) {
      ++i;
      continue;
    }
    if (p.all_lanes) {
      fault_with_code(std::string(p.what) + " waits for lane " + std::to_string(me.state.lane) +
                          ", which exited: the instruction is .aligned (every lane of the warp must execute it)",
                      cudaErrorLaunchFailure);
    }
    if (collective_complete(warp, p)) {
      complete_collective(run, me.state.warp, i, &me);
      continue;  // the vector changed: look at index i again
    }
    ++i;
  }
  if (run.barrier.arrived > 0 && run.barrier.arrived + run.exited == run.threads.size()) release_block_barrier(run);
  GridRun& grid = *run.grid;
  if (grid.launch->cooperative && grid.grid_arrived > 0) {
    unsigned live = 0;
    for (const auto& slot : grid.slots) live += static_cast<unsigned>(slot->threads.size()) - slot->exited;
    if (grid.grid_arrived == live) release_grid_barrier(grid);
  }
}

}  // namespace exec

using namespace exec;

// ---- Public: barriers and collectives ---------------------------------------------------------
int sync_block_at(const char* what, const char* file, int line, int predicate) {
  GridRun& grid = require_grid(what);
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  Barrier& b = run.barrier;
  if (b.arrived == 0) {
    b.what = what;
    b.file = file;
    b.line = line;
    b.count = 0;
  } else {
    const bool same_file = file == nullptr || b.file == nullptr || file == b.file || std::strcmp(file, b.file) == 0;
    const bool same_line = file == nullptr || b.file == nullptr || line == b.line;
    if ((what != b.what && std::strcmp(what, b.what) != 0) || !same_file || !same_line) {
      std::vector<unsigned> waiting(b.waiters.begin(), b.waiters.end());
      std::sort(waiting.begin(), waiting.end());
      fault(("divergent barrier: arrives at " + site(what, file, line) + " while " +
             id_list("thread", "threads", waiting) + " wait at " + site(b.what, b.file, b.line))
                .c_str());
    }
  }
  b.count += predicate != 0;
  ++b.arrived;
  me.status = Status::barrier;
  b.waiters.push_back(me.linear);
  lane_blocked(run, me.state.warp);
  if (b.arrived + run.exited == run.threads.size()) {
    // Last to arrive: release everyone (this thread too, through the queue, so that the
    // schedule decides who goes first).
    release_block_barrier(run);
  }
  suspend(grid, me);
  return me.barrier_result;
}

void sync_block() { sync_block_at("__syncthreads", nullptr, 0, 0); }

bool grid_is_cooperative() { return require_grid("this_grid()").launch->cooperative; }

void sync_grid() {
  GridRun& grid = require_grid("this_grid().sync()");
  if (!grid.launch->cooperative) {
    fault("this_grid().sync() in a grid not launched with cudaLaunchCooperativeKernel: its blocks are not all "
          "resident at once, so the grid barrier could never be met");
  }
  SimThread& me = *t_thread;
  me.status = Status::grid_barrier;
  lane_blocked(*me.block, me.state.warp);
  grid.grid_waiters.push_back(&me);
  unsigned live = 0;
  for (const auto& slot : grid.slots) live += static_cast<unsigned>(slot->threads.size()) - slot->exited;
  if (++grid.grid_arrived == live) release_grid_barrier(grid);
  suspend(grid, me);
}

void warp_collective(const char* what, unsigned mask, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                     CombineStep combine, bool all_lanes) {
  GridRun& grid = require_grid(what);
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  Warp& warp = run.warps[me.state.warp];
  const unsigned lane = me.state.lane, bit = 1u << lane;
  if ((mask & bit) == 0) {
    fault((std::string(what) + " with mask " + hex(mask) + ", which does not include the calling lane " +
           std::to_string(lane))
              .c_str());
  }
  if (all_lanes && (warp.exited & mask) != 0) {
    fault((std::string(what) + " with " + id_list("lane", "lanes", lanes_of(warp.exited & mask)) +
           " of the warp exited or absent: the instruction is .aligned (every lane of the warp must execute it)")
              .c_str());
  }
  size_t index = warp.pending.size();
  for (size_t i = 0; i < warp.pending.size(); ++i) {
    if ((warp.pending[i].mask & mask) != 0) index = i;
  }
  if (index == warp.pending.size()) {
    warp.pending.emplace_back();
    PendingCollective& p = warp.pending.back();
    p.what = what;
    p.mask = mask;
    p.in_bytes = in_bytes;
    p.out_bytes = out_bytes;
    p.all_lanes = all_lanes;
    p.combine = &combine;
  } else {
    const PendingCollective& p = warp.pending[index];
    const bool same_what = p.what == what || std::strcmp(p.what, what) == 0;
    if (p.mask != mask || !same_what || p.in_bytes != in_bytes || p.out_bytes != out_bytes) {
      fault((std::string(what) + " with mask " + hex(mask) + " while " + id_list("lane", "lanes", lanes_of(p.arrived)) +
             " of warp " + std::to_string(me.state.warp) + " wait at " + p.what + " with mask " + hex(p.mask) +
             (p.mask == mask && std::strcmp(p.what, what) == 0 ? " (a different operand type)" : ""))
                .c_str());
    }
  }
  PendingCollective& p = warp.pending[index];
  p.in[lane] = in;
  p.out[lane] = out;
  p.arrived |= bit;
  if (!collective_complete(warp, p)) {
    p.combine = &combine;  // this lane's copy stays alive while it waits
    me.status = Status::warp;
    lane_blocked(run, me.state.warp);
    suspend(grid, me);
    return;
  }
  // Last to arrive: combine for everyone, release the others, go on.
  p.combine = &combine;
  complete_collective(run, me.state.warp, index, &me);
}

unsigned active_lanes() {
  GridRun& grid = require_grid("__activemask");
  SimThread& me = *t_thread;
  BlockRun& run = *me.block;
  run.warps[me.state.warp].at_activemask |= 1u << me.state.lane;
  me.status = Status::activemask;
  lane_blocked(run, me.state.warp);  // may release this lane (and the others) at once
  suspend(grid, me);
  return static_cast<unsigned>(me.barrier_result);
}

unsigned warp_lanes() {
  require_grid("warp_lanes");
  return t_thread->block->warps[t_thread->state.warp].lanes;
}

}  // namespace blockscope::sim
