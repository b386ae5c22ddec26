#include "profiler/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "runtime/interrupt.h"

namespace blockscope::profiler {

double kernel_duration_us(const KernelEvent& kernel) {
  return std::max(0.0, kernel.device_end_us - kernel.device_start_us);
}

EventTimes event_times(const Profile& profile) {
  const size_t n = profile.ops.size();
  EventTimes times;
  times.self_cpu_us.assign(n, 0.0);
  times.self_device_us.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    const OpEvent& event = profile.ops[i];
    times.self_cpu_us[i] += event.cpu_end_us - event.cpu_start_us;
    if (event.parent >= 0 && static_cast<size_t>(event.parent) < n) {
      times.self_cpu_us[event.parent] -= event.cpu_end_us - event.cpu_start_us;
    }
  }
  for (const KernelEvent& kernel : profile.kernels) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    if (kernel.op >= 0 && static_cast<size_t>(kernel.op) < n) times.self_device_us[kernel.op] += kernel_duration_us(kernel);
  }
  // Children come after their parent in recording order, so one backwards pass sums subtrees.
  times.device_total_us = times.self_device_us;
  for (size_t i = n; i-- > 0;) {
    const int parent = profile.ops[i].parent;
    if (parent >= 0 && static_cast<size_t>(parent) < i) times.device_total_us[parent] += times.device_total_us[i];
  }
  // Clock granularity can make a parent a hair shorter than its children: never below zero.
  for (double& t : times.self_cpu_us) t = std::max(0.0, t);
  return times;
}

Spread spread_of(std::vector<double> samples) {
  Spread s;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / static_cast<double>(n);
  if (n > 1) {
    double square = 0;
    for (double v : samples) square += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(square / static_cast<double>(n - 1));
  }
  return s;
}

bool is_step_region(const OpEvent& event) { return event.is_region && event.parent < 0 && event.name.rfind("step ", 0) == 0; }

std::vector<int> kept_steps(const Profile& profile) {
  std::vector<int> steps;
  for (const OpEvent& event : profile.ops)
    if (is_step_region(event)) steps.push_back(event.step);
  return steps;
}

std::vector<double> step_times_us(const Profile& profile) {
  const EventTimes times = event_times(profile);
  std::vector<double> out;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const OpEvent& event = profile.ops[i];
    if (!is_step_region(event)) continue;
    out.push_back(times.device_total_us[i] > 0 ? times.device_total_us[i] : event.cpu_end_us - event.cpu_start_us);
  }
  return out;
}

std::vector<double> region_times_us(const Profile& profile, const std::string& region) {
  const EventTimes times = event_times(profile);
  std::vector<double> out;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const OpEvent& event = profile.ops[i];
    if (!event.is_region || event.name != region) continue;
    out.push_back(times.device_total_us[i] > 0 ? times.device_total_us[i] : event.cpu_end_us - event.cpu_start_us);
  }
  return out;
}

Profile phase_profile(const Profile& profile, const std::string& region) {
  Profile out = profile;
  out.ops.clear();
  out.kernels.clear();
  out.label = profile.label + " / " + region;
  // Parents come before their children, so one pass decides: kept[i] is the new index.
  std::vector<int> kept(profile.ops.size(), -1);
  std::vector<bool> inside(profile.ops.size(), false);
  std::vector<bool> spanned;  // per kept event: a step whose span is already its phase's
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const OpEvent& event = profile.ops[i];
    const bool is_phase = event.is_region && event.name == region;
    inside[i] = is_phase || (event.parent >= 0 && inside[static_cast<size_t>(event.parent)]);
    if (!inside[i] && !is_step_region(event)) continue;
    OpEvent copy = event;
    copy.parent = event.parent >= 0 ? kept[static_cast<size_t>(event.parent)] : -1;
    if (is_phase && copy.parent >= 0) {
      // The step now spans its phase: from the first phase region's start to the last's end.
      OpEvent& step = out.ops[static_cast<size_t>(copy.parent)];
      if (!spanned[static_cast<size_t>(copy.parent)]) {
        step.cpu_start_us = event.cpu_start_us;
        step.device_start_us = event.device_start_us;
        step.start_bytes = event.start_bytes;
        step.peak_bytes = event.peak_bytes;
        spanned[static_cast<size_t>(copy.parent)] = true;
      }
      step.cpu_end_us = event.cpu_end_us;
      step.device_end_us = event.device_end_us;
      step.peak_bytes = std::max(step.peak_bytes, event.peak_bytes);
    }
    kept[i] = static_cast<int>(out.ops.size());
    out.ops.push_back(copy);
    spanned.push_back(false);
  }
  for (const KernelEvent& kernel : profile.kernels) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    if (kernel.op < 0 || !inside[static_cast<size_t>(kernel.op)]) continue;
    KernelEvent copy = kernel;
    copy.op = kept[static_cast<size_t>(kernel.op)];
    out.kernels.push_back(copy);
  }
  return out;
}

std::string row_name(const OpEvent& event) {
  const std::string& name = event.name;
  if (event.is_region && name.size() > 5 && name.compare(0, 5, "step ") == 0 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos) {
    return "step *";
  }
  return name;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string out = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i) out += ", ";
    out += shape_str(shapes[i]);
  }
  return out + "]";
}

std::vector<OpStats> op_stats(const Profile& profile, bool group_by_shape) {
  const EventTimes times = event_times(profile);
  std::vector<OpStats> rows;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;  // (name, path, shapes) -> row
  std::vector<bool> shapes_differ;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const OpEvent& event = profile.ops[i];
    const std::string name = row_name(event);
    const std::string shapes = event.input_shapes.empty() ? "" : shapes_str(event.input_shapes);
    const auto key = std::make_tuple(name, event.path, group_by_shape ? shapes : std::string());
    auto found = index.find(key);
    if (found == index.end()) {
      OpStats row;
      row.name = name;
      row.path = event.path;
      row.shapes = shapes;
      row.shape_list = event.input_shapes;
      row.is_region = event.is_region;
      row.first_event = static_cast<int>(i);
      found = index.emplace(key, rows.size()).first;
      rows.push_back(row);
      shapes_differ.push_back(false);
    }
    OpStats& row = rows[found->second];
    if (row.shapes != shapes) shapes_differ[found->second] = true;
    row.calls += 1;
    row.self_cpu_us += times.self_cpu_us[i];
    row.cpu_total_us += event.cpu_end_us - event.cpu_start_us;
    row.self_device_us += times.self_device_us[i];
    row.device_total_us += times.device_total_us[i];
    row.flops += event.flops;
    row.bytes += event.bytes;
    row.bytes_allocated += event.bytes_allocated;
    row.peak_extra_bytes = std::max(row.peak_extra_bytes, event.peak_bytes - event.start_bytes);
    row.self_peak_extra_bytes = std::max(row.self_peak_extra_bytes, event.self_peak_bytes - event.start_bytes);
  }
  // Without grouping, shapes are shown only when every call had the same ones.
  for (size_t r = 0; r < rows.size(); ++r) {
    if (shapes_differ[r]) {
      rows[r].shapes.clear();
      rows[r].shape_list.clear();
    }
  }
  return rows;
}

std::vector<KernelStats> kernel_stats(const Profile& profile) {
  std::vector<KernelStats> rows;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const KernelEvent& kernel = profile.kernels[i];
    const bool known = kernel.registers > 0 || kernel.block.x * kernel.block.y * kernel.block.z > 1;
    auto found = index.find(kernel.name);
    if (found == index.end()) {
      KernelStats row;
      row.name = kernel.name;
      row.grid = kernel.grid;
      row.block = kernel.block;
      row.launch_config_known = known;
      row.registers = kernel.registers;
      row.shared_memory = kernel.static_smem + kernel.dynamic_smem;
      row.occupancy = kernel.occupancy;
      row.first_kernel = static_cast<int>(i);
      found = index.emplace(kernel.name, rows.size()).first;
      rows.push_back(row);
    }
    KernelStats& row = rows[found->second];
    const auto same = [](const Dim3& a, const Dim3& b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
    if (!same(row.grid, kernel.grid) || !same(row.block, kernel.block)) row.launch_config_varies = true;
    row.calls += 1;
    row.total_us += kernel_duration_us(kernel);
    if (!kernel.implementation.empty() && (" | " + row.implementation + " | ").find(" | " + kernel.implementation + " | ") == std::string::npos) {
      row.implementation += (row.implementation.empty() ? "" : " | ") + kernel.implementation;
    }
  }
  return rows;
}

double total_kernel_us(const Profile& profile) {
  double total = 0;
  for (const KernelEvent& kernel : profile.kernels) total += kernel_duration_us(kernel);
  return total;
}

double total_self_cpu_us(const Profile& profile) {
  double total = 0;
  for (double t : event_times(profile).self_cpu_us) total += t;
  return total;
}

}  // namespace blockscope::profiler
