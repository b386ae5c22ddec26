// Stream capture on the simulated GPU. A capture records each op enqueued on its streams as a
// node, in enqueue order (one sequence: the sim runs everything in order anyway); the graph it
// ends with is graph.cpp's to instantiate and launch.
//
// What the runtime refuses during a capture is refused here too (CUDA Runtime API,
// cudaStreamBeginCapture / cudaStreamCaptureMode): synchronising or querying a capturing stream,
// cudaDeviceSynchronize, potentially unsafe calls (cudaMalloc, synchronous copies, event
// synchronisation) from a thread a non-relaxed capture forbids them, and legacy-stream work that
// would depend on a capturing blocking stream. Each invalidates the capture, so that
// cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated.
//
// Stream-ordered allocations made while capturing become graph memory: allocated (and their
// address fixed) at capture time, owned by the graph and its executable graphs, poisoned with
// 0xFF by the allocation node at every launch and again by the free node, released when the last
// graph or executable graph holding them is destroyed.
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "sim/runtime_state.h"

namespace blockscope::sim::detail {

struct GraphMemory {
  std::vector<void*> blocks;
  ~GraphMemory() {
    Lock lock(state_mutex());
    for (void* p : blocks) untrack_and_free(p);
  }
};

std::vector<Capture*>& open_captures() {
  static std::vector<Capture*> captures;
  return captures;
}

cudaError_t check_unsafe_call() {
  bool refused = false;
  for (Capture* capture : open_captures()) {
    if (capture->mode == cudaStreamCaptureModeRelaxed) continue;
    const bool mine = capture->thread == std::this_thread::get_id();
    if (mine || capture->mode == cudaStreamCaptureModeGlobal) {
      capture->invalidated = true;
      refused = true;
    }
  }
  return refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t check_legacy_use(const CUstream_st* stream) {
  if (!stream->legacy) return cudaSuccess;
  bool refused = false;
  for (Capture* capture : open_captures()) {
    for (const CUstream_st* s : capture->streams) {
      if (s->device == stream->device && (s->flags & cudaStreamNonBlocking) == 0) {
        capture->invalidated = true;
        refused = true;
      }
    }
  }
  return refused ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

GraphMemory& capture_memory(Capture& capture) {
  if (!capture.graph->memory) capture.graph->memory = std::make_shared<GraphMemory>();
  return *capture.graph->memory;
}

void graph_memory_add(GraphMemory& memory, void* ptr) { memory.blocks.push_back(ptr); }

namespace {

unsigned long long g_capture_ids = 0;

// Ends the capture of `capture`: its streams record no more, its events mark nothing.
void close_capture(Capture* capture) {
  auto& open = open_captures();
  open.erase(std::remove(open.begin(), open.end(), capture), open.end());
  for (CUstream_st* s : capture->streams) s->capture = nullptr;
  forget_capture_events(capture);
}

}  // namespace
}  // namespace blockscope::sim::detail

using namespace blockscope::sim::detail;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return result(cudaErrorInvalidValue);
  }
  if (s->legacy) return result(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  if (s->capture != nullptr) return result(cudaErrorIllegalState);
  auto* capture = new Capture;
  capture->graph = new CUgraph_st;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->origin = s;
  capture->streams.push_back(s);
  capture->id = ++g_capture_ids;
  s->capture = capture;
  s->capture_nodes = 0;
  s->joined_through = 0;
  open_captures().push_back(capture);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Lock lock(state_mutex());
  if (graph == nullptr) return result(cudaErrorInvalidValue);
  *graph = nullptr;
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  Capture* capture = s->capture;
  if (capture == nullptr) return result(cudaErrorIllegalState);
  if (capture->origin != s) return result(cudaErrorStreamCaptureUnmatched);
  if (capture->mode != cudaStreamCaptureModeRelaxed && capture->thread != std::this_thread::get_id()) {
    return result(cudaErrorStreamCaptureWrongThread);
  }
  bool unjoined = false;
  for (const CUstream_st* forked : capture->streams) {
    if (forked != s && forked->capture_nodes > forked->joined_through) unjoined = true;
  }
  close_capture(capture);
  std::unique_ptr<CUgraph_st> built(capture->graph);
  const bool invalidated = capture->invalidated;
  delete capture;
  if (invalidated) return result(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return result(cudaErrorStreamCaptureUnjoined);
  *graph = built.release();
  add_graph(*graph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (status == nullptr) return result(cudaErrorInvalidValue);
  if (s->legacy) {
    for (const Capture* capture : open_captures())
      for (const CUstream_st* c : capture->streams)
        if (c->device == s->device && (c->flags & cudaStreamNonBlocking) == 0) return result(cudaErrorStreamCaptureImplicit);
  }
  *status = s->capture == nullptr ? cudaStreamCaptureStatusNone
            : s->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edge_data,
                                     size_t* dependency_count) {
  Lock lock(state_mutex());
  const cudaError_t error = cudaStreamIsCapturing(stream, status);
  if (error != cudaSuccess) return error;
  const Capture* capture = resolve_stream(stream)->capture;
  if (id != nullptr && capture != nullptr) *id = capture->id;
  if (graph != nullptr) *graph = capture != nullptr ? capture->graph : nullptr;
  // Nodes form one sequence here: the last node is the only dependency of the next.
  if (dependencies != nullptr) *dependencies = nullptr;
  if (edge_data != nullptr) *edge_data = nullptr;
  if (dependency_count != nullptr) *dependency_count = 0;
  return cudaSuccess;
}

}  // extern "C"
