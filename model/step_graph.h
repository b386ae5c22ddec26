// StepGraph: one piece of work — a decode step — captured once as a CUDA graph on its first
// run and replayed by every later run: one launch instead of one per kernel. The work must take
// whatever changes between runs from device memory (ops/decode_step), since a replay repeats
// the captured launches, arguments and all.
//
//   StepGraph graph;
//   for (...) graph.run(ctx, [&] { select; layers; commit; });   // captures, then replays
//
// The capture runs with the profiler's recorder detached (nothing executes while capturing, so
// nothing is lost); a replay with a recorder attached is one kernel row, "cuda_graph_launch"
// (on a GPU the graph's own kernels show up in Nsight Systems and CUPTI traces). CUDA contexts
// only (runtime/cuda/cuda_graph.h has the rules of capture); without CUDA built in, run() is
// an error.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "runtime/context.h"

namespace blockscope {

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // First call: captures `work` on ctx's stream, then launches the graph. Later calls launch the
  // captured graph (`work` is not called). Throws blockscope::Error where capture fails.
  void run(Context& ctx, const std::function<void()>& work);

  bool captured() const;
  size_t nodes() const;        // kernels and other nodes in the captured graph
  size_t launches() const { return launches_; }  // graph launches so far

 private:
  struct Captured;
  std::unique_ptr<Captured> captured_;
  size_t launches_ = 0;
};

}  // namespace blockscope
