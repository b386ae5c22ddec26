// The simulated GPU's streams check (BLOCKSCOPE_SIM_CHECKS streams): cross-stream races between
// queued ops, from vector clocks over the streams, events and host waits. Apart from streams.cpp,
// the streams and events whose calls give the check its order (runtime_state.h, stream_order.h).
//
// The sim runs every stream's ops in one FIFO, so work a GPU could overlap never does here; this
// check says when it could. Each op gets a vector clock when queued: its stream's previous ops,
// what the host had waited for (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
// synchronous copies, cudaFree…), events it waits on (cudaEventRecord + cudaStreamWaitEvent) and
// the legacy default stream's implicit synchronisation with blocking streams. What an op touched
// (kernels: every instrumented global access; copies, memsets, cuBLASLt: their ranges) is kept per
// allocation; an op touching bytes another stream's op wrote — or writing bytes it read — that are
// not ordered before it is a cross-stream race, the later op's fault.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "sim/executor_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"
#include "sim/stream_order.h"

namespace blockscope::sim::detail {
namespace {

struct StreamClock {
  Clock clock;
  uint64_t ticks = 0;
  int device = 0;
  bool legacy = false, blocking = false;
};
struct Record {
  std::shared_ptr<const OpOrder> order;
  OpAccesses accesses;
};
constexpr size_t kRecordsPerAllocation = 64;  // older records are forgotten (races with them unseen)
constexpr size_t kClocksKept = 1u << 16;      // op clocks kept for host waits on them

std::unordered_map<uint64_t, StreamClock>& stream_clocks() {
  static auto* clocks = new std::unordered_map<uint64_t, StreamClock>();
  return *clocks;
}
std::map<uint64_t, Clock>& op_clocks() {  // by queue position
  static auto* clocks = new std::map<uint64_t, Clock>();
  return *clocks;
}
std::unordered_map<uintptr_t, std::deque<Record>>& history() {
  static auto* records = new std::unordered_map<uintptr_t, std::deque<Record>>();
  return *records;
}
Clock g_host;             // what the host has waited for
OpLog* g_current = nullptr;

void join(Clock& into, const Clock& from) {
  for (const auto& [stream, tick] : from) {
    uint64_t& mine = into[stream];
    if (tick > mine) mine = tick;
  }
}
bool ordered_before(const OpOrder& earlier, const Clock& later) {
  auto it = later.find(earlier.stream);
  return it != later.end() && it->second >= earlier.tick;
}

std::string stream_label(const OpOrder& o) {
  return o.legacy ? "the legacy default stream of device " + std::to_string(o.device)
                  : "stream " + std::to_string(o.stream) + " of device " + std::to_string(o.device);
}
std::string hex(uintptr_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}
std::string side(const OpOrder& o, const Span& s, bool wrote, uintptr_t base) {
  std::string text = "`" + o.name + "` on " + stream_label(o) + (wrote ? " writes" : " reads") + " [+" +
                     std::to_string(s.lo - base) + ", +" + std::to_string(s.hi - base) + ")";
  if (s.thread != UINT32_MAX) {
    text += " (first by block " + std::to_string(s.block) + " thread " + std::to_string(s.thread);
    const std::string line = exec::source_line(s.pc);
    text += (line.empty() ? std::string() : " at " + line) + ")";
  }
  return text;
}

// The first overlap of `mine` with `theirs`, or false.
bool overlap(const SpanSet& mine, const SpanSet& theirs, const Span** a, const Span** b) {
  for (const Span& x : mine.spans)
    for (const Span& y : theirs.spans)
      if (x.lo < y.hi && y.lo < x.hi) {
        *a = &x, *b = &y;
        return true;
      }
  return false;
}

void check_and_record(OpLog& log) {
  const OpOrder& me = *log.order;
  for (auto& [base, accesses] : log.by_allocation) {
    AllocationInfo info;
    if (!find_allocation(reinterpret_cast<const void*>(base), &info)) continue;
    std::deque<Record>& records = history()[base];
    for (auto it = records.begin(); it != records.end();) {
      const OpOrder& other = *it->order;
      if (ordered_before(other, g_host)) {  // ordered before everything queued from now on
        it = records.erase(it);
        continue;
      }
      if (other.stream != me.stream && !ordered_before(other, me.clock)) {
        const Span *x = nullptr, *y = nullptr;
        const char* kind = nullptr;
        bool i_write = false, they_write = false;
        if (overlap(accesses.reads, it->accesses.writes, &x, &y)) {
          kind = "read after write", they_write = true;
        } else if (overlap(accesses.writes, it->accesses.writes, &x, &y)) {
          kind = "write after write", i_write = they_write = true;
        } else if (overlap(accesses.writes, it->accesses.reads, &x, &y)) {
          kind = "write after read", i_write = true;
        }
        if (kind != nullptr) {
          const uintptr_t lo = std::max(x->lo, y->lo), hi = std::min(x->hi, y->hi);
          throw Fault("cross-stream race (" + std::string(kind) + "): " + side(me, *x, i_write, base) + " of a " +
                      std::to_string(info.size) + "-byte allocation at " + hex(base) + ", bytes [+" +
                      std::to_string(lo - base) + ", +" + std::to_string(hi - base) + ") of which " +
                      side(other, *y, they_write, base) +
                      " before it, and no event (cudaEventRecord + cudaStreamWaitEvent), stream or device "
                      "synchronisation orders the two: on a GPU they may run at the same time "
                      "(BLOCKSCOPE_SIM_CHECKS without `streams` turns this check off)");
        }
      }
      ++it;
    }
    records.push_back(Record{log.order, std::move(accesses)});
    if (records.size() > kRecordsPerAllocation) records.pop_front();
  }
}

}  // namespace

OpLog* current_op_log() { return g_current; }

std::shared_ptr<const OpOrder> order_new_op(const CUstream_st* s, const std::string& name, uint64_t seq) {
  StreamClock& mine = stream_clocks()[s->id];
  mine.device = s->device;
  mine.legacy = s->legacy;
  mine.blocking = !s->legacy && (s->flags & cudaStreamNonBlocking) == 0;
  join(mine.clock, g_host);
  // The legacy default stream waits for the device's blocking streams, and they for it.
  for (const auto& [id, other] : stream_clocks()) {
    if (id == s->id || other.device != s->device) continue;
    if ((mine.legacy && other.blocking) || (mine.blocking && other.legacy)) join(mine.clock, other.clock);
  }
  mine.clock[s->id] = ++mine.ticks;
  auto order = std::make_shared<OpOrder>();
  order->stream = s->id;
  order->tick = mine.ticks;
  order->device = s->device;
  order->legacy = s->legacy;
  order->name = name;
  order->clock = mine.clock;
  op_clocks()[seq] = mine.clock;
  while (op_clocks().size() > kClocksKept) op_clocks().erase(op_clocks().begin());
  return order;
}

std::function<void()> ordered_op(std::shared_ptr<const OpOrder> order, std::function<void()> op) {
  return [order = std::move(order), op = std::move(op)]() {
    OpLog log;
    log.order = order;
    OpLog* outer = std::exchange(g_current, &log);
    struct Restore {
      OpLog* outer;
      ~Restore() { g_current = outer; }
    } restore{outer};
    op();
    g_current = outer;
    check_and_record(log);
  };
}

void order_stream_waits_event(const CUstream_st* s, uint64_t record_seq) {
  auto it = op_clocks().find(record_seq);
  if (it != op_clocks().end()) join(stream_clocks()[s->id].clock, it->second);
}

void order_host_waited(uint64_t seq) {
  if (seq == UINT64_MAX) {
    for (const auto& [id, c] : stream_clocks()) join(g_host, c.clock);
    return;
  }
  auto it = op_clocks().find(seq);
  if (it != op_clocks().end()) join(g_host, it->second);
}

void order_host_waited_device(int device) {
  for (const auto& [id, c] : stream_clocks())
    if (c.device == device) join(g_host, c.clock);
}

void forget_stream_accesses(const void* base) { history().erase(reinterpret_cast<uintptr_t>(base)); }

}  // namespace blockscope::sim::detail

namespace blockscope::sim {
void note_op_access(const void* p, size_t bytes, bool write) {
  detail::OpLog* log = detail::g_current;
  if (log == nullptr || bytes == 0) return;
  AllocationInfo info;
  if (!find_allocation(p, &info)) return;
  const auto base = reinterpret_cast<uintptr_t>(info.base), a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t end = std::min(a + bytes, base + info.size);
  detail::OpAccesses& acc = log->by_allocation[base];
  (write ? acc.writes : acc.reads).add(a, end, nullptr, 0, UINT32_MAX);
}
}  // namespace blockscope::sim
