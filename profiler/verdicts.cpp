#include "profiler/verdicts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "profiler/render.h"
#include "profiler/summary.h"

namespace blockscope::profiler {

const char* bound_name(Bound bound) {
  switch (bound) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::latency: return "latency";
    case Bound::unknown: break;
  }
  return "";
}

double roofline_min_time_us(double flops, double bytes, const Peaks& peaks) {
  if (peaks.tflops <= 0 || peaks.gbps <= 0) return 0;
  const double compute_us = flops / (peaks.tflops * 1e6);  // TFLOP/s = 1e6 FLOP per µs
  const double memory_us = bytes / (peaks.gbps * 1e3);     // GB/s = 1e3 bytes per µs
  return std::max(compute_us, memory_us);
}

Bound roofline_bound(double flops, double bytes, double time_us, const Peaks& peaks) {
  const double bound_us = roofline_min_time_us(flops, bytes, peaks);
  if (bound_us <= 0 || time_us <= 0) return Bound::unknown;
  if (time_us > kBelowRoofs * bound_us) return Bound::latency;
  return flops / (peaks.tflops * 1e6) >= bytes / (peaks.gbps * 1e3) ? Bound::compute : Bound::memory;
}

std::vector<StepActivity> step_activity(const Profile& profile) {
  std::vector<StepActivity> steps;
  std::map<int, size_t> position;  // step number -> index in `steps`
  for (const OpEvent& event : profile.ops) {
    if (!is_step_region(event)) continue;
    StepActivity step;
    step.step = event.step;
    step.start_us = event.device_start_us;
    step.end_us = event.device_end_us;
    step.span_us = std::max(0.0, event.device_end_us - event.device_start_us);
    step.cpu_us = std::max(0.0, event.cpu_end_us - event.cpu_start_us);
    position.emplace(event.step, steps.size());
    steps.push_back(step);
  }
  // Each step's kernels by start time; the union of their intervals is the busy time, and
  // what lies between them (and between them and the span's ends) the idle stretches.
  std::vector<std::vector<std::pair<double, double>>> intervals(steps.size());
  std::vector<double> region_end(steps.size());  // the end marks, before kernels extend them
  for (size_t s = 0; s < steps.size(); ++s) region_end[s] = steps[s].end_us;
  for (const KernelEvent& kernel : profile.kernels) {
    const auto found = position.find(kernel.step);
    if (found == position.end()) continue;
    StepActivity& step = steps[found->second];
    ++step.kernels;
    step.launch_cpu_us += kernel.launch_cpu_us;
    intervals[found->second].emplace_back(kernel.device_start_us, kernel.device_end_us);
    step.end_us = std::max(step.end_us, kernel.device_end_us);
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    auto& list = intervals[s];
    std::sort(list.begin(), list.end());
    StepActivity& step = steps[s];
    double covered_to = step.start_us;
    const auto idle = [&](double from, double to) {
      if (to - from >= kGapUs) {
        ++step.gaps;
        step.largest_gap_us = std::max(step.largest_gap_us, to - from);
      }
    };
    for (const auto& [start, end] : list) {
      if (start > covered_to) idle(covered_to, start);
      const double from = std::max(start, covered_to);
      if (end > from) step.busy_us += end - from;
      covered_to = std::max(covered_to, end);
    }
    if (!list.empty()) idle(covered_to, region_end[s]);
    // A step's kernels can outlast its region's end mark by the marks' resolution.
    step.span_us = std::max(step.span_us, step.busy_us);
  }
  return steps;
}

StepVerdict step_verdict(const Profile& profile) {
  StepVerdict verdict;
  std::vector<StepActivity> steps = step_activity(profile);
  if (steps.empty()) {
    verdict.line = "no verdict: the profile has no steps";
    return verdict;
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepActivity& a, const StepActivity& b) { return a.busy_fraction() < b.busy_fraction(); });
  verdict.typical = steps[steps.size() / 2];
  const StepActivity& t = verdict.typical;

  // The device time by the verdict of the op that launched it.
  const EventTimes times = event_times(profile);
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const OpEvent& event = profile.ops[i];
    if (times.self_device_us[i] <= 0) continue;
    const double time_us = times.device_total_us[i] > 0 ? times.device_total_us[i] : event.cpu_end_us - event.cpu_start_us;
    switch (event.is_region ? Bound::unknown : roofline_bound(event.flops, event.bytes, time_us, profile.peaks)) {
      case Bound::compute: verdict.compute_us += times.self_device_us[i]; break;
      case Bound::memory: verdict.memory_us += times.self_device_us[i]; break;
      case Bound::latency: verdict.latency_us += times.self_device_us[i]; break;
      case Bound::unknown: verdict.unknown_us += times.self_device_us[i]; break;
    }
  }

  if (profile.simulated) {
    verdict.line = "no verdict on the simulated GPU: its device times are the simulator's, not a GPU's";
    return verdict;
  }
  if (profile.host_ops_only) {
    verdict.line = "no verdict: a PyTorch CPU trace records host ops only, no device timeline to split";
    return verdict;
  }
  if (t.kernels == 0 || t.span_us <= 0) {
    verdict.line = "no verdict: the steps launched no device work";
    return verdict;
  }
  const bool cpu = profile.device == "cpu";
  const double busy = t.busy_fraction();
  const std::string share = fmt::format("the device is busy {:.0f}% of the step ({} of {})", 100.0 * busy,
                                        format_time_us(t.busy_us), format_time_us(t.span_us));
  if (busy < kHostBoundBusy) {
    verdict.kind = "host-bound";
    // On the CPU the "launch" is the work item itself: what keeps it idle is the dispatch
    // between work items, so that is what is counted per kernel.
    const std::string per_kernel =
        cpu ? fmt::format("~{} of dispatch outside kernels per kernel", format_time_us((t.span_us - t.busy_us) / t.kernels))
            : fmt::format("~{} of CPU each", format_time_us(t.launch_cpu_us / t.kernels));
    verdict.line = fmt::format("host-bound: {}; {} launch{} at {}; {} gap{}, the longest {}", share, t.kernels,
                               t.kernels == 1 ? "" : "es", per_kernel, t.gaps, t.gaps == 1 ? "" : "s",
                               format_time_us(t.largest_gap_us));
    return verdict;
  }
  // The device is busy: what kept it so is the verdict of the ops holding most of its time.
  const double known = verdict.compute_us + verdict.memory_us + verdict.latency_us;
  const double all = known + verdict.unknown_us;
  if (known <= 0 || all <= 0) {
    verdict.kind = "device-bound";
    verdict.line = "device-bound: " + share + (profile.peaks.tflops <= 0 ? "; no peaks known, so no roofline verdicts" : "");
    return verdict;
  }
  std::string split;
  for (const auto& [us, what] : {std::pair{verdict.compute_us, "compute-bound"}, std::pair{verdict.memory_us, "memory-bound"},
                                 std::pair{verdict.latency_us, "latency-bound"}}) {
    if (us > 0) split += fmt::format("{}{:.0f}% {}", split.empty() ? "" : ", ", 100.0 * us / all, what);
  }
  if (verdict.latency_us >= 0.5 * all) {
    verdict.kind = "latency-bound";
    verdict.line = fmt::format("latency-bound: {}, but most of that time is in ops over {:g}x below both roofs "
                               "(launch or per-call costs, too little parallel work, or kernels far from the "
                               "hardware's limits; device time in {} ops)",
                               share, kBelowRoofs, split);
    return verdict;
  }
  verdict.kind = verdict.compute_us >= verdict.memory_us ? "compute-bound" : "memory-bound";
  verdict.line = fmt::format("{}: {}; device time in {} ops", verdict.kind, share, split);
  return verdict;
}

nlohmann::json step_verdict_json(const StepVerdict& v) {
  const StepActivity& t = v.typical;
  return {{"kind", v.kind},
          {"line", v.line},
          {"typical_step", {{"step", t.step},
                            {"span_us", t.span_us},
                            {"busy_us", t.busy_us},
                            {"busy_fraction", t.busy_fraction()},
                            {"cpu_us", t.cpu_us},
                            {"kernels", t.kernels},
                            {"launch_cpu_us", t.launch_cpu_us},
                            {"gaps", t.gaps},
                            {"largest_gap_us", t.largest_gap_us}}},
          {"device_us_by_bound",
           {{"compute", v.compute_us}, {"memory", v.memory_us}, {"latency", v.latency_us}, {"unknown", v.unknown_us}}}};
}

}  // namespace blockscope::profiler
