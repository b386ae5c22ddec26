// CUDA graphs: capture a whole forward once, replay it with one launch.
//
//   CudaGraph graph;
//   graph.capture(ctx, [&] { block.forward(ctx, x, y); });   // nothing runs yet
//   graph.replay();                                          // runs the captured forward
//
// Capture uses cudaStreamBeginCapture on the context's stream in thread-local mode, so a
// synchronising or otherwise uncapturable call made by this thread during the forward
// (cudaStreamSynchronize, a host copy, a legacy-stream call) is an error at capture time, with
// the reason — never a silent fallback to eager execution.
//
// Memory: allocations inside the forward come from the backend's stream-ordered pool
// (cudaMallocFromPoolAsync / cudaFreeAsync), which is capturable: a temporary allocated and
// freed inside the forward becomes part of the graph. Tensors that must outlive the forward
// (inputs, outputs, weights) must be allocated before capture, and nothing allocated before
// capture may be freed inside it. Replays reuse the captured addresses: write new inputs into
// the same input tensors between replays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "runtime/context.h"

namespace blockscope {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Captures `forward` (which enqueues work on ctx's stream) and instantiates the graph.
  // Replaces any earlier capture. Throws blockscope::Error if capture fails.
  void capture(Context& ctx, const std::function<void()>& forward);
  // Launches the captured graph on the stream it was captured from (asynchronous).
  void replay();

  bool captured() const { return exec_ != nullptr; }
  // Nodes in the captured graph (kernels, copies, memory nodes): launches saved per replay.
  size_t node_count() const { return node_count_; }

 private:
  void release();

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t node_count_ = 0;
};

}  // namespace blockscope
