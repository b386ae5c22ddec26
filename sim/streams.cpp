// Streams and events of the simulated GPU's runtime, and host functions in stream order: the
// handles, their checks and what each call queues (the queue itself: runtime_api.cpp).
// The streams check, which orders these ops by vector clocks, is streams_check.cpp.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "sim/runtime_state.h"
#include "sim/sim.h"

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
