// The verdicts a performance engineer draws from a profile, computed once for the text tables,
// the JSON and the HTML report alike:
//   - per op: the roofline's — compute-bound, memory-bound, or latency-bound (more than
//     kBelowRoofs times slower than both roofs allow: launch overhead, too little work to fill
//     the device, a slow kernel);
//   - per step: host-bound (the device idles most of the step waiting for work), or what
//     bounds the busy device — with the launches, the gaps and where the device time went.
// Numbers only; turning them into text tables, lines and charts is the callers'.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "profiler/session.h"

namespace blockscope::profiler {

enum class Bound { unknown, compute, memory, latency };
// "compute", "memory", "latency"; "" for unknown (no peaks, no cost, no time).
const char* bound_name(Bound bound);

// Slower than both roofs by more than this factor: latency-bound.
constexpr double kBelowRoofs = 3.0;
// A step whose device is busy less than this fraction of it is host-bound.
constexpr double kHostBoundBusy = 0.5;
// Idle stretches between kernels shorter than this are not counted as gaps (the timestamps'
// own resolution and the back-to-back launch of a queue).
constexpr double kGapUs = 1.0;

// The roofline's lower bound on the time of `flops` and `bytes` of work under `peaks`:
// max(flops / peak FLOP/s, bytes / peak bandwidth), in microseconds; 0 when the peaks are
// unknown (the simulated GPU) or there is no work.
double roofline_min_time_us(double flops, double bytes, const Peaks& peaks);
// The verdict for that work done in `time_us`: latency when time > kBelowRoofs × the bound,
// else the roof whose term is larger (compute when flops / peak FLOP/s ≥ bytes / bandwidth).
Bound roofline_bound(double flops, double bytes, double time_us, const Peaks& peaks);

// What the device did during one kept step.
struct StepActivity {
  int step = 0;
  double start_us = 0, end_us = 0;  // on the device clock: the region's start, and its end or its last kernel's
  double span_us = 0;   // the step's device-clock span ("step N" region's device end - start)
  double busy_us = 0;   // the union of its kernels' intervals
  double cpu_us = 0;    // the step's CPU time (entry to exit of the region)
  int kernels = 0;
  double launch_cpu_us = 0;  // CPU time in the launch calls, summed
  int gaps = 0;              // idle stretches of kGapUs or more between its kernels (and the span's ends)
  double largest_gap_us = 0;
  double busy_fraction() const { return span_us > 0 ? busy_us / span_us : 0.0; }
};
// One per "step N" region, in kept_steps order.
std::vector<StepActivity> step_activity(const Profile& profile);

struct StepVerdict {
  // "host-bound" (the device is busy less than kHostBoundBusy of the step); else, by the ops
  // holding most of the device time, "latency-bound" (half of it or more in latency-bound
  // ops), "compute-bound" or "memory-bound" (whichever holds more), "device-bound" (no peaks
  // known); "" when no verdict can be drawn (the simulated GPU, no steps). `line` says it in
  // one sentence either way.
  std::string kind;
  std::string line;
  StepActivity typical;  // the step with the median busy fraction
  // The device time of the kept steps by the verdict of the op that launched it (its own
  // kernels: a composite op's children count under theirs), in microseconds.
  double compute_us = 0, memory_us = 0, latency_us = 0, unknown_us = 0;
};
StepVerdict step_verdict(const Profile& profile);
// The verdict and its figures as the JSON outputs carry them: kind, line, the typical step's
// activity and the device time by op verdict.
nlohmann::json step_verdict_json(const StepVerdict& verdict);

}  // namespace blockscope::profiler
