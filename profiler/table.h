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

// The op table's rows (sorted, limited; `cut` gets the number of rows the limit dropped).
Rows op_table_rows(const Profile& profile, const TableOptions& options, size_t* cut = nullptr);
// Op table with a footer: "Self CPU time total", "Self device time total" and the step time.
std::string op_table(const Profile& profile, const TableOptions& options, Format format);
// The kernel table's rows, by total time.
Rows kernel_table_rows(const Profile& profile);
// Kernel table: kernels per step (forward), total/avg time, grid, block, registers, smem, occupancy.
std::string kernel_table(const Profile& profile, Format format, const TextLayout& layout = {});

// "Step time: median 1.955ms (min 1.901ms, max 2.300ms, CV 4.3%) over 5 steps", then, when the
// CV is above kNoisyCv, a "noisy: ..." line, and the steps' memory peak. Empty for a profile
// without step regions.
std::string step_time_lines(const Profile& profile);

// One row per kept step: step, time_us (device time, or CPU time without device work),
// device_us, cpu_us.
Rows step_table_rows(const Profile& profile);
// `rows` with a first column "variant" holding `variant` on every row: tables of several
// profiles concatenate into one tidy table.
Rows with_variant_column(const Rows& rows, const std::string& variant);
// `rows` with a first column `key` (text-table title `title`) holding `value` on every row.
Rows with_first_column(const Rows& rows, const std::string& key, const std::string& title, const std::string& value);

}  // namespace blockscope::profiler
