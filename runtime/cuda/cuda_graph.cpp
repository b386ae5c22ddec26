#include "runtime/cuda/cuda_graph.h"

#include <string>

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace blockscope {

CudaGraph::~CudaGraph() { release(); }

void CudaGraph::release() {
  // Also called from the destructor: errors are ignored on purpose.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  node_count_ = 0;
}

void CudaGraph::capture(Context& ctx, const std::function<void()>& forward) {
  BS_CHECK_INPUT(ctx.device().is_cuda(), "CUDA graph capture needs a CUDA context, not ", ctx.device().str());
  CudaBackend& backend = cuda_backend(ctx);
  BS_CHECK(!backend.capturing(), "a CUDA graph capture is already open on the stream of ", ctx.device().str());
  // The recorder's device marks are events recorded on the stream; inside a capture they time
  // nothing and cudaEventElapsedTime on them would fail when the recorder resolves the step.
  // Refuse before the capture opens (CudaBackend::mark also refuses during a capture).
  BS_CHECK_INPUT(ctx.recorder() == nullptr,
                 "CUDA graph capture with a profiler recorder attached: device times cannot be measured while "
                 "capturing; detach the recorder for the capture and profile the replays instead");
  release();
  stream_ = backend.stream();
  device_ = backend.device().index;
  BS_CUDA_CHECK(cudaSetDevice(device_));
  // Work queued before the capture must not be mistaken for part of it, and an earlier
  // asynchronous error must not be blamed on the capture.
  BS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  BS_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));

  cudaGraph_t graph = nullptr;
  try {
    forward();
  } catch (const Error& error) {
    cudaStreamEndCapture(stream_, &graph);  // closes the capture; the partial graph is dropped
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(error.kind(), std::string("CUDA graph capture failed: the forward raised an error while being "
                                          "captured (a synchronising call, a host copy or an allocation outside "
                                          "the stream-ordered pool cannot be captured): ") +
                                  error.what());
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }

  const cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  if (status != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(ErrorKind::runtime,
                std::string("CUDA graph capture failed: ") + cudaGetErrorName(status) + " (" +
                    cudaGetErrorString(status) +
                    "); something in the forward could not be captured (a synchronising call, a host copy, or "
                    "work on another stream that was not joined back)");
  }
  graph_ = graph;
  size_t nodes = 0;
  BS_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes));
  node_count_ = nodes;
  BS_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  // Upload now so that the first replay costs what every later one does.
  BS_CUDA_CHECK(cudaGraphUpload(exec_, stream_));
}

void CudaGraph::replay() {
  BS_CHECK(exec_ != nullptr, "CudaGraph::replay() called before a successful capture()");
  BS_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t status = cudaGraphLaunch(exec_, stream_);
  if (status != cudaSuccess) {
    cudaGetLastError();  // reported here; the next launch check must not report it again
    throw Error(ErrorKind::runtime, std::string("CUDA graph replay (") + std::to_string(node_count_) +
                                        " nodes) failed: " + cudaGetErrorName(status) + " (" +
                                        cudaGetErrorString(status) + ")");
  }
}

}  // namespace blockscope
