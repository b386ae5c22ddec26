// Streams and events of the simulated GPU's runtime, and host functions in stream order: the
// handles, their checks and what each call queues (the queue itself: runtime_api.cpp).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_set>
#include <utility>

#include "sim/executor_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"
#include "sim/stream_order.h"

namespace blockscope::sim::detail {

std::unordered_set<CUstream_st*>& live_streams() {
  static std::unordered_set<CUstream_st*> streams;
  return streams;
}

std::unordered_set<CUevent_st*>& live_events() {
  static std::unordered_set<CUevent_st*> events;
  return events;
}

CUstream_st* legacy_stream(int device) {
  static CUstream_st streams[8];
  static bool initialised = [] {
    for (int d = 0; d < 8; ++d) {
      streams[d].device = d;
      streams[d].id = static_cast<uint64_t>(d) + 1;
      streams[d].legacy = true;
    }
    return true;
  }();
  (void)initialised;
  return &streams[device];
}

CUstream_st* resolve_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return legacy_stream(current_device());
  }
  return live_streams().count(stream) ? stream : nullptr;
}

CUevent_st* live_event(cudaEvent_t event) { return live_events().count(event) ? event : nullptr; }

void forget_capture_events(const Capture* capture) {
  for (CUevent_st* e : live_events()) {
    if (e->captured_in == capture) {
      e->captured_in = nullptr;
      e->captured_on = nullptr;
    }
  }
}

namespace {
// A stream waiting for an event whose record op is still queued behind a gate.
class EventRecordGate : public Gate {
 public:
  explicit EventRecordGate(uint64_t record_seq) : record_seq_(record_seq) {}
  bool open() override { return !op_pending(record_seq_); }
  std::string waiting_for() const override { return ""; }  // only for another op: never the one to blame
  std::vector<int> abandon(const std::string&) override { return {}; }

 private:
  uint64_t record_seq_;
};

// Deletes and forgets every handle of `live` that belongs to `device`.
template <class Handle>
void destroy_handles_of(std::unordered_set<Handle*>& live, int device) {
  for (auto it = live.begin(); it != live.end();) {
    if ((*it)->device == device) {
      delete *it;
      it = live.erase(it);
    } else {
      ++it;
    }
  }
}
}  // namespace

void destroy_streams_and_events(int device) {
  destroy_handles_of(live_streams(), device);
  destroy_handles_of(live_events(), device);
}

}  // namespace blockscope::sim::detail

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

// ---- Streams ----------------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  static uint64_t next_id = 16;  // after the legacy streams' 1..8
  auto* s = new CUstream_st;
  s->id = next_id++;
  s->device = current_device();
  s->flags = flags;
  s->priority = std::clamp(priority, kGreatestStreamPriority, kLeastStreamPriority);  // the runtime clamps too
  live_streams().insert(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, kLeastStreamPriority);
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (priority == nullptr) return result(cudaErrorInvalidValue);
  *priority = s->priority;
  return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags == nullptr) return result(cudaErrorInvalidValue);
  *flags = s->flags;
  return cudaSuccess;
}

// The attributes a stream takes (access policy window, synchronisation policy, priority, memory
// synchronisation domains): checked and kept; none changes how the simulator runs the stream.
cudaError_t cudaStreamSetAttribute(cudaStream_t stream, cudaStreamAttrID attr, const cudaStreamAttrValue* value) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr || s->legacy) return result(cudaErrorInvalidResourceHandle);
  if (value == nullptr) return result(cudaErrorInvalidValue);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: {
      const cudaAccessPolicyWindow& w = value->accessPolicyWindow;
      if (w.hitRatio < 0.0f || w.hitRatio > 1.0f || w.num_bytes > kAccessPolicyMaxWindow) return result(cudaErrorInvalidValue);
      break;
    }
    case cudaLaunchAttributePriority:
      s->priority = std::clamp(value->priority, kGreatestStreamPriority, kLeastStreamPriority);
      break;
    case cudaLaunchAttributeSynchronizationPolicy:
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain: break;
    default: return result(cudaErrorInvalidValue);
  }
  s->attributes[attr] = *value;
  return cudaSuccess;
}

cudaError_t cudaStreamGetAttribute(cudaStream_t stream, cudaStreamAttrID attr, cudaStreamAttrValue* value) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (value == nullptr) return result(cudaErrorInvalidValue);
  std::memset(value, 0, sizeof *value);
  auto it = s->attributes.find(attr);
  if (it != s->attributes.end()) *value = it->second;
  if (attr == cudaLaunchAttributePriority) value->priority = s->priority;
  return cudaSuccess;
}

// A host function in stream order: it runs when the queue reaches it, at a synchronising call or
// in the background, whichever comes first (a captured one runs when its graph does).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t error = submit(s, "cudaLaunchHostFunc", [fn, user_data]() { fn(user_data); });
      error != cudaSuccess) {
    return result(error);
  }
  if (s->capture == nullptr) run_in_background_through(s->last_seq);
  return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* user_data,
                                  unsigned int flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (callback == nullptr || flags != 0) return result(cudaErrorInvalidValue);
  if (s->capture != nullptr) {  // not capturable (cudaLaunchHostFunc is)
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = submit(s, "cudaStreamAddCallback",
                                       [stream, callback, user_data]() { callback(stream, cudaSuccess, user_data); });
      error != cudaSuccess) {
    return result(error);
  }
  run_in_background_through(s->last_seq);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr || s->legacy) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) s->capture->invalidated = true;  // the capture loses a stream
  // Queued ops do not refer to the stream (only to their position): it can go at once, as the
  // docs allow ("resources released once the device has completed all work in the stream").
  live_streams().erase(s);
  for (Capture* capture : open_captures()) {
    auto& streams = capture->streams;
    streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
    if (capture->origin == s) capture->origin = nullptr;
  }
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) {
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  return result(run_through(s->last_seq, s->device));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) {
    s->capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  // "May run it": the sim completes what can run now; work behind a collective still waiting for
  // its peers is not ready.
  if (const cudaError_t error = run_ready_through(s->last_seq); error != cudaSuccess) return result(error);
  return op_pending(s->last_seq) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = s->device;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  CUevent_st* e = live_event(event);
  if (s == nullptr || e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags != 0 && flags != cudaEventWaitExternal) return result(cudaErrorInvalidValue);
  // In the FIFO the wait is satisfied by order (the record came first), unless the record still
  // waits behind a gate (a collective's peers): then the stream waits at a gate of its own.
  // During a capture the wait forks a stream into the capture or joins it back (capture.cpp).
  if (e->captured_in == nullptr && s->capture == nullptr && e->record_seq != 0) {
    order_stream_waits_event(s, e->record_seq);  // the streams check: what comes next follows the record
  }
  if (e->captured_in == nullptr && s->capture == nullptr && e->record_seq != 0 && op_pending(e->record_seq)) {
    return result(submit(s, "cudaStreamWaitEvent", [] {}, false, std::make_shared<EventRecordGate>(e->record_seq)));
  }
  if (e->captured_in != nullptr) {
    Capture* capture = e->captured_in;
    if (s->capture == nullptr) {
      s->capture = capture;
      s->capture_nodes = capture->graph->nodes.size();
      s->joined_through = s->capture_nodes;
      capture->streams.push_back(s);
    } else if (s->capture != capture) {
      return result(cudaErrorStreamCaptureMerge);
    }
    if (e->captured_on != nullptr && e->captured_on != s) {
      e->captured_on->joined_through = std::max(e->captured_on->joined_through, e->captured_at);
    }
  } else if (s->capture != nullptr && s->capture->invalidated) {
    return result(cudaErrorStreamCaptureInvalidated);
  }
  return cudaSuccess;
}

// ---- Events -----------------------------------------------------------------------------------
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~known) != 0) return result(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return result(cudaErrorInvalidValue);
  Lock lock(state_mutex());
  auto* e = new CUevent_st;
  e->device = current_device();
  e->flags = flags;
  live_events().insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  live_events().erase(e);
  // A queued record still refers to the event: the last one deletes it when it runs (records are
  // cleanup ops: they run even after a fault dropped the rest of the queue).
  if (e->record_seq != 0 && !e->completed) {
    e->destroyed = true;
  } else {
    delete e;
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  CUstream_st* s = resolve_stream(stream);
  if (e == nullptr || s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->device != s->device) return result(cudaErrorInvalidResourceHandle);  // per the programming guide
  if (s->capture != nullptr) {
    if (s->capture->invalidated) return result(cudaErrorStreamCaptureInvalidated);
    // Inside a capture a record only marks a point of the graph (for forks and joins).
    e->captured_in = s->capture;
    e->captured_on = s;
    e->captured_at = s->capture->graph->nodes.size();
    return cudaSuccess;
  }
  if (const cudaError_t error = check_legacy_use(s); error != cudaSuccess) return result(error);
  e->captured_in = nullptr;
  e->completed = false;
  const uint64_t seq = last_seq() + 1;  // the record op's own position
  e->record_seq = seq;
  return result(submit(
      s, "cudaEventRecord",
      [e, seq]() {
        if (e->record_seq != seq) return;  // re-recorded since: the newer record decides
        e->completed = true;
        e->time = std::chrono::steady_clock::now();
        if (e->destroyed) delete e;
      },
      true));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (flags != cudaEventRecordDefault && flags != cudaEventRecordExternal) return result(cudaErrorInvalidValue);
  return cudaEventRecord(event, stream);  // external or not: the same point of the queue (or graph)
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (e->record_seq == 0) return cudaSuccess;  // never recorded: complete, per the docs
  if (const cudaError_t error = run_ready_through(e->record_seq); error != cudaSuccess) return result(error);
  return e->completed ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Lock lock(state_mutex());
  CUevent_st* e = live_event(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (e->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  if (e->record_seq == 0) return cudaSuccess;
  return result(run_through(e->record_seq, e->device));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lock(state_mutex());
  CUevent_st* a = live_event(start);
  CUevent_st* b = live_event(end);
  if (ms == nullptr) return result(cudaErrorInvalidValue);
  if (a == nullptr || b == nullptr) return result(cudaErrorInvalidResourceHandle);
  if ((a->flags | b->flags) & cudaEventDisableTiming) return result(cudaErrorInvalidResourceHandle);
  if (a->captured_in != nullptr || b->captured_in != nullptr) return result(cudaErrorStreamCaptureUnsupported);
  if (a->record_seq == 0 || b->record_seq == 0) return result(cudaErrorInvalidResourceHandle);
  if (a->device != b->device) return result(cudaErrorInvalidResourceHandle);
  // Does not synchronise: events whose work has not run yet are not ready, as on a GPU.
  if (!a->completed || !b->completed) return result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

}  // extern "C"

// ---- The streams check (BLOCKSCOPE_SIM_CHECKS streams) ---------------------------------------------
// The sim runs every stream's ops in one FIFO, so work a GPU could overlap never does here; this
// check says when it could. Each op gets a vector clock when queued: its stream's previous ops,
// what the host had waited for (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
// synchronous copies, cudaFree…), events it waits on (cudaEventRecord + cudaStreamWaitEvent) and
// the legacy default stream's implicit synchronisation with blocking streams. What an op touched
// (kernels: every instrumented global access; copies, memsets, cuBLASLt: their ranges) is kept per
// allocation; an op touching bytes another stream's op wrote — or writing bytes it read — that are
// not ordered before it is a cross-stream race, the later op's fault.
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
