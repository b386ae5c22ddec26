// Per-name statistics of a Profile, shared by the tables and the diff: the arithmetic of
// torch.profiler's key_averages() (self vs total, per op name) on blockscope's events. Numbers
// only: turning them into text is the tables' and the renderer's (table.h, render.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/session.h"

namespace blockscope::profiler {

// One row of the op table: every call of one op (or region) name, optionally split by
// input shapes.
struct OpStats {
  std::string name;    // "softmax", "block.0", or "step *" for all the step regions
  std::string path;    // implementation path, empty for regions
  std::string shapes;  // "[[8, 16, 1024, 64], [8, 16, 1024, 64]]" when the same for every call
  bool is_region = false;
  int calls = 0;
  double self_cpu_us = 0;      // CPU time minus that of the direct children
  double cpu_total_us = 0;     // CPU time from entry to exit
  double self_device_us = 0;   // device time of the kernels launched directly in the op
  double device_total_us = 0;  // ... and of those launched by its descendants
  double flops = 0, bytes = 0;  // summed over calls, from the ops' own formulas
  int64_t bytes_allocated = 0;  // summed over calls (includes children's allocations)
  // The most device memory above what was in use when a call began, over its calls (its
  // children's included): what the op needed at its peak. A step row's is the step's.
  int64_t peak_extra_bytes = 0;
  // The same while none of its children ran: what the op itself held at its highest (a
  // buffer it allocated, children's outputs it kept), as torch.profiler's "self" columns.
  int64_t self_peak_extra_bytes = 0;
  std::vector<Shape> shape_list;  // the input shapes behind `shapes` (empty when they differ)
  int first_event = 0;          // first call's index in Profile::ops: ties keep first-seen order
};

// One row of the kernel table: every launch of one kernel name.
struct KernelStats {
  std::string name;
  int calls = 0;
  double total_us = 0;
  Dim3 grid, block;  // of the first launch
  bool launch_config_known = false;  // CPU work items and library kernels: no grid/block
  bool launch_config_varies = false;
  int registers = 0;
  int64_t shared_memory = 0;  // static + dynamic, bytes
  double occupancy = 0;       // 0 when unknown
  // The calls' implementations (KernelEvent::implementation), each once in order of first
  // call, joined by " | " (one kernel name may run packed for one shape, plain for another).
  std::string implementation;
  int first_kernel = 0;
};

// Per-event self/total times (vectors indexed like Profile::ops).
struct EventTimes {
  std::vector<double> self_cpu_us, self_device_us, device_total_us;
};
EventTimes event_times(const Profile& profile);

// "step 3" -> "step *" (the per-step regions are one row, as torch's "ProfilerStep*").
std::string row_name(const OpEvent& event);
std::string shapes_str(const std::vector<Shape>& shapes);

std::vector<OpStats> op_stats(const Profile& profile, bool group_by_shape);
std::vector<KernelStats> kernel_stats(const Profile& profile);
double kernel_duration_us(const KernelEvent& kernel);
double total_kernel_us(const Profile& profile);
double total_self_cpu_us(const Profile& profile);

// The spread of per-step samples (times in us): what every reported time comes with.
struct Spread {
  int samples = 0;
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
  // Coefficient of variation, stddev / mean (0 with fewer than two samples).
  double cv() const { return mean > 0 ? stddev / mean : 0.0; }
};
Spread spread_of(std::vector<double> samples);
// Above this coefficient of variation the steps are called noisy (tables warn, diff says
// "within noise" unless the change clears the spread).
constexpr double kNoisyCv = 0.10;

// A "step N" region (profile_steps puts one around each step, at the top level).
bool is_step_region(const OpEvent& event);
// The step numbers kept in a profile, in order (from the "step N" regions).
std::vector<int> kept_steps(const Profile& profile);
// Each kept step's time: its "step N" region's device total, or its CPU total when the step
// launched no device work. In kept_steps order.
std::vector<double> step_times_us(const Profile& profile);

// The time of every event named `region` (a RegionScope), in recording order: its device time
// (its kernels' and its descendants'), or its CPU time where it launched none.
std::vector<double> region_times_us(const Profile& profile, const std::string& region);

// The part of a profile inside the regions named `region` (a decode run's "prefill" or
// "decode"): those regions, their descendants and their kernels, under the step regions, whose
// CPU span becomes the phase's. Its tables, step times and verdicts are the phase's own.
Profile phase_profile(const Profile& profile, const std::string& region);

}  // namespace blockscope::profiler
