// Profiling a workload: a schedule of steps (wait / warmup / active, as torch.profiler's),
// the recorder attached for the active steps, and the resolved events as a Profile.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "profiler/recorder.h"
#include "profiler/scope.h"
#include "runtime/context.h"

namespace blockscope::profiler {

struct Schedule {
  int wait = 1;     // steps run with the recorder detached
  int warmup = 1;   // steps recorded and then dropped (warm caches, cuBLASLt heuristics)
  int active = 3;   // steps kept
  bool keep_cold_step = false;  // also keep step 0 (the cold first step) in the profile
};

// Peak figures for the % of peak columns: from device properties on CUDA, measured or
// configured on CPU. Zero means unknown (the column then shows "-").
struct Peaks {
  double tflops = 0;  // dense, in the profiled dtype
  double gbps = 0;    // memory bandwidth, GB/s
  std::string source;  // where they come from ("nominal: ...", "measured on this machine, cached in ...")
  bool cached = false;  // from a cache of an earlier measurement (may be stale: see Backend::remeasure_peaks)
};

struct Profile {
  std::string label;        // "attention=naive", a variant name, or a file's label
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // "NVIDIA H200", "cpu (2 threads, openblas)"
  std::string dtype;
  // What was measured ("tiny-gpt2: block gpt2 d_model=64 ... f32 on cpu"), set by the caller
  // (the CLI): diff warns when two profiles measured different workloads.
  std::string workload;
  // Measured on the simulated GPU (BLOCKSCOPE_CUDA=SIM): device times are the simulator's
  // (kernels run as CPU fibers), never GPU times; tables say so and % of peak is not shown.
  bool simulated = false;
  int cpu_threads = 0;  // the CPU backend's threads (0: a device, or not recorded)
  // A GPU's properties (none on the CPU, or in profiles saved before they were kept): traces
  // carry them for Holistic Trace Analysis.
  std::optional<DeviceProperties> device_properties;
  // Tensor parallelism: the rank this profile was recorded on, of `ranks` (1: not split).
  int rank = 0, ranks = 1;
  Peaks peaks;
  int active_steps = 0;     // steps kept (averages per step divide by this)
  std::optional<Schedule> schedule;  // how the steps were run (absent in profiles saved before it was)
  std::vector<OpEvent> ops;  // of the kept steps, in order; parent indices within this vector
  std::vector<KernelEvent> kernels;  // op indices within `ops`
  // profile --predict: one step as the GPU performance model predicts it (the CLI's JSON:
  // target, model_version, step_us, device_us, host_us, launches, bound, ops); null when none.
  // Saved with the profile; diff compares two predictions of the same target.
  nlohmann::json prediction;
  // Config keys that had no effect on this device ("decode.cuda_graph: true has no effect on
  // cpu: ..."), said in the profile's header, saved, and repeated by every diff of it.
  std::vector<std::string> notes;
  // A PyTorch CPU trace (profiler/torch_trace.h): ops on the host clock only, no kernels or work
  // items, so it has no device time to compare: diff compares CPU time against it and the
  // verdict says why there is none. Never saved (it is read from the trace each time).
  bool host_ops_only = false;
};

// Runs step(0), step(1), ... wait + warmup + active times (plus one cold step first when
// schedule.keep_cold_step), with a RegionScope "step N" around each, and returns the
// recorded, resolved events of the kept steps.
// `on_step(done, total)`, when given, is called after each step (progress reports).
Profile profile_steps(Context& ctx, const std::string& label, const Schedule& schedule,
                      const std::function<void(int step)>& step,
                      const std::function<void(int done, int total)>& on_step = nullptr);

Peaks device_peaks(Context& ctx, DType dtype);

// One profiled step around code that is not a function of blockscope's (the Python module's
// `with bs.profile():` block): from construction the recorder is attached and a region "step 0"
// open; finish() closes it, synchronises and returns the profile of that step, as
// profile_steps would with one active step. Destroyed unfinished, it records nothing more and
// puts back whatever recorder was attached before.
class StepRecording {
 public:
  StepRecording(Context& ctx, const std::string& label);
  ~StepRecording();
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;
  Profile finish();

 private:
  Context& ctx_;
  Recorder recorder_;
  Recorder* previous_;
  Profile profile_;
  std::optional<RegionScope> step_;
};

}  // namespace blockscope::profiler
