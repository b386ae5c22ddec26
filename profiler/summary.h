// Per-name statistics of a Profile, shared by the tables and the diff: the arithmetic of
// torch.profiler's key_averages() (self vs total, per op name) on blockscope's events.
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

// Times as torch prints them: "812.000us", "1.955ms", "2.301s".
std::string format_time_us(double us);
// Bytes with binary units: "12.00 MiB".
std::string format_bytes(double bytes);
// Large counts with SI units: "4.29 G".
std::string format_si(double value);

}  // namespace blockscope::profiler
