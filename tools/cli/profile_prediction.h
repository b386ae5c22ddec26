// `blockscope profile --predict GPU`: a measured profile's step turned into what the GPU
// performance model (profiler/gpu_model.h) predicts for the CUDA backend on that GPU — every
// time labelled as predicted. Each leaf op of one step (an op with no ops inside it) becomes
// its CUDA kernels: GEMMs (linear, batched_matmul, unfused attention), flash attention and the
// collectives (over the profile's ranks) by their shapes through info --predict's op model
// (cost_prediction.h), every other op by its recorded FLOPs and bytes, one launch per kernel the
// step recorded under it. On the simulated
// GPU's build, the kernels' counted sectors (profile --counters) raise an op's bytes where it
// moves more than its least traffic (re-reads at L2 bandwidth).
//
// The step: the device runs its kernels back to back (each one's launch gap included); the host
// issues every launch at kHostLaunchUs, the driver's cost of an eager cudaLaunchKernel, plus
// kRuntimeOpUs of blockscope's own per op. The step takes the longer of the two, and is
// host-bound when issuing the launches takes longer than the kernels run (the series' 64×64
// matmul + add). With `run.cuda_graph` the forward is one CUDA graph: the host makes one
// cudaGraphLaunch a step, and each kernel costs the GPU's graph-node gap instead of an eager
// launch's (decode.cuda_graph's per-token graphs are priced eagerly: not modelled yet).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/gpu_specs.h"
#include "profiler/render.h"
#include "profiler/session.h"
#include "runtime/backend.h"

namespace blockscope::cli {

// CPU time of one eager kernel launch through the CUDA driver (cudaLaunchKernel): ~3 µs
// (tritonbench issue #1017's measurement of a raw launch; NVIDIA quotes 2–5 µs).
constexpr double kHostLaunchUs = 3.0;
// blockscope's own CPU time per op (scope, recorder, dispatch): ~1.1 µs wall with the recorder
// attached (bench/profiler_bench.cpp, docs/PROFILING.md "Overhead").
constexpr double kRuntimeOpUs = 1.0;

struct PredictedOp {
  std::string scope, name, path;
  int kernels = 0;
  double compute_us = 0, memory_us = 0, launch_us = 0, predicted_us = 0;
  std::string bound;  // "compute", "memory", "latency" (of its longest kernel)
  bool counted = false;  // its bytes came from the simulator's counters
};

struct PredictedStep {
  std::string target, description, model_version;
  bool graph = false;  // the step replays one CUDA graph
  std::vector<PredictedOp> ops;  // one step's leaf ops, in order
  int launches = 0;
  double device_us = 0;     // the kernels back to back, launch gaps included
  double busy_us = 0;       // the kernels alone
  double host_us = 0;       // launches × kHostLaunchUs + ops × kRuntimeOpUs (a graph: one launch)
  double step_us = 0;       // max(device_us, host_us + the last kernel)
  std::string bound;        // "host" or "device"
};

// One step of `profile` (its first active step) on `gpu`. `counted`: one forward's kernel
// counters (empty when not counted), matched to the step's kernels by name and order.
PredictedStep predict_step(const profiler::GpuSpec& gpu, const profiler::Profile& profile,
                           const std::vector<KernelCounterRecord>& counted, bool graph = false);

// The predicted op table (ops grouped by name and path, as the op table groups them), its footer
// line, and the JSON form (what a saved profile keeps and diff compares: profiler::Profile's
// `prediction`).
profiler::Rows predicted_op_rows(const PredictedStep& step);
std::string predicted_step_line(const PredictedStep& step);
nlohmann::json predicted_step_json(const PredictedStep& step);

}  // namespace blockscope::cli
