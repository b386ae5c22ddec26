// Tables in torch.profiler's shape: ops (self/total CPU and device time, calls, shapes, FLOPs,
// bytes, rates, % of peak, memory) and kernels (per forward, time, launch config, occupancy).
#pragma once

#include <map>
#include <string>

#include "profiler/render.h"
#include "profiler/session.h"

namespace blockscope::profiler {


struct TableOptions {
  std::string sort_by = "self_device";  // any column key: self_cpu, cpu_total, self_device, device_total, calls, flops, ...
  int row_limit = 20;                   // 0 or negative: all rows
  bool group_by_shape = false;          // one row per (name, input shapes)
  TextLayout layout;                    // the text table's width and columns
};

// Every sort key op_table accepts, mapped to its column key: the column keys themselves,
// torch.profiler's spellings (self_cuda_time_total, cpu_time_total, ...) and "gpu" words.
const std::map<std::string, std::string>& sort_key_aliases();

// Op table with a footer: "Self CPU time total" and "Self device time total".
std::string op_table(const Profile& profile, const TableOptions& options, Format format);
// Kernel table: kernels per step (forward), total/avg time, grid, block, registers, smem, occupancy.
std::string kernel_table(const Profile& profile, Format format, const TextLayout& layout = {});

}  // namespace blockscope::profiler
