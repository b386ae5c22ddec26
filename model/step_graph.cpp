#include "model/step_graph.h"

#include "profiler/scope.h"
#include "runtime/error.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_graph.h"
#endif

namespace blockscope {

#ifdef BLOCKSCOPE_WITH_CUDA
struct StepGraph::Captured {
  CudaGraph graph;
};
#else
struct StepGraph::Captured {};
#endif

StepGraph::StepGraph() = default;
StepGraph::~StepGraph() = default;

bool StepGraph::captured() const { return captured_ != nullptr; }

size_t StepGraph::nodes() const {
#ifdef BLOCKSCOPE_WITH_CUDA
  return captured_ ? captured_->graph.node_count() : 0;
#else
  return 0;
#endif
}

void StepGraph::run(Context& ctx, const std::function<void()>& work) {
  BS_CHECK_INPUT(ctx.device().is_cuda(), "a step graph needs a CUDA context, not ", ctx.device().str());
#ifdef BLOCKSCOPE_WITH_CUDA
  if (!captured_) {
    auto fresh = std::make_unique<Captured>();
    {
      profiler::RecorderAttachment restore(ctx);
      ctx.set_recorder(nullptr);  // a capture runs nothing, so there is nothing to record
      fresh->graph.capture(ctx, work);
    }
    captured_ = std::move(fresh);
  }
  profiler::KernelScope launch(ctx, "cuda_graph_launch");
  captured_->graph.replay();
  ++launches_;
#else
  (void)work;
  throw Error(ErrorKind::runtime, "a step graph needs CUDA, which this build does not have");
#endif
}

}  // namespace blockscope
