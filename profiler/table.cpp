#include "profiler/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"
#include "profiler/verdicts.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope::profiler {

namespace {

// Under every table of a profile measured on the simulated GPU.
constexpr const char* kSimulatedNote =
    "SIMULATED GPU: device times are the simulator's (kernels run as fibers on the CPU), not GPU times; "
    "registers and occupancy from the simulator (no register counts)\n";

// ---- Op table -------------------------------------------------------------------------------

// Derived figures of one row; the time the rates use is the device time when the op launched
// any kernel (work items on CPU), else its CPU time.
struct OpRow {
  OpStats stats;
  double tflops = 0, gbps = 0;
  double pct_peak_flops = -1, pct_peak_bandwidth = -1;  // -1: unknown
  Bound bound = Bound::unknown;  // the roofline's verdict (verdicts.h); regions have none
};

OpRow derive(const OpStats& stats, const Peaks& peaks) {
  OpRow row;
  row.stats = stats;
  const double time_us = stats.device_total_us > 0 ? stats.device_total_us : stats.cpu_total_us;
  if (time_us > 0) {
    row.tflops = stats.flops / (time_us * 1e-6) / 1e12;
    row.gbps = stats.bytes / (time_us * 1e-6) / 1e9;
  }
  if (peaks.tflops > 0 && stats.flops > 0) row.pct_peak_flops = 100.0 * row.tflops / peaks.tflops;
  if (peaks.gbps > 0 && stats.bytes > 0) row.pct_peak_bandwidth = 100.0 * row.gbps / peaks.gbps;
  if (!stats.is_region) row.bound = roofline_bound(stats.flops, stats.bytes, time_us, peaks);
  return row;
}

// Sort keys: blockscope's column keys, plus torch.profiler's spellings and the "gpu" words of
// configs written for CUDA. Larger first, except the name.
using RowValue = std::function<double(const OpRow&)>;
const std::vector<std::pair<std::vector<std::string>, RowValue>>& sort_keys() {
  static const std::vector<std::pair<std::vector<std::string>, RowValue>> keys = {
      {{"self_cpu", "self_cpu_time_total"}, [](const OpRow& r) { return r.stats.self_cpu_us; }},
      {{"cpu_total", "cpu_time_total"}, [](const OpRow& r) { return r.stats.cpu_total_us; }},
      {{"cpu_avg", "cpu_time"}, [](const OpRow& r) { return r.stats.cpu_total_us / std::max(1, r.stats.calls); }},
      {{"self_device", "self_gpu", "self_cuda", "self_cuda_time_total", "self_device_time_total"},
       [](const OpRow& r) { return r.stats.self_device_us; }},
      {{"device_total", "gpu_total", "cuda_total", "cuda_time_total", "device_time_total"},
       [](const OpRow& r) { return r.stats.device_total_us; }},
      {{"device_avg", "gpu_avg", "cuda_time", "device_time"},
       [](const OpRow& r) { return r.stats.device_total_us / std::max(1, r.stats.calls); }},
      {{"calls", "count"}, [](const OpRow& r) { return static_cast<double>(r.stats.calls); }},
      {{"flops"}, [](const OpRow& r) { return r.stats.flops; }},
      {{"bytes"}, [](const OpRow& r) { return r.stats.bytes; }},
      {{"tflops"}, [](const OpRow& r) { return r.tflops; }},
      {{"gbps"}, [](const OpRow& r) { return r.gbps; }},
      {{"pct_peak"}, [](const OpRow& r) { return std::max(r.pct_peak_flops, r.pct_peak_bandwidth); }},
      {{"memory", "bytes_allocated", "cpu_memory_usage", "device_memory_usage"},
       [](const OpRow& r) { return static_cast<double>(r.stats.bytes_allocated); }},
      {{"peak_memory"}, [](const OpRow& r) { return static_cast<double>(r.stats.peak_extra_bytes); }},
      {{"self_peak_memory"}, [](const OpRow& r) { return static_cast<double>(r.stats.self_peak_extra_bytes); }},
  };
  return keys;
}

void sort_rows(std::vector<OpRow>* rows, const std::string& key) {
  const auto by_first_seen = [](const OpRow& a, const OpRow& b) { return a.stats.first_event < b.stats.first_event; };
  std::stable_sort(rows->begin(), rows->end(), by_first_seen);
  if (key == "name") {
    std::stable_sort(rows->begin(), rows->end(), [](const OpRow& a, const OpRow& b) { return a.stats.name < b.stats.name; });
    return;
  }
  std::string known = "name";
  for (const auto& [names, value] : sort_keys()) {
    if (std::find(names.begin(), names.end(), key) != names.end()) {
      std::stable_sort(rows->begin(), rows->end(), [&value = value](const OpRow& a, const OpRow& b) { return value(a) > value(b); });
      return;
    }
    known += ", " + names.front();
  }
  throw InputError("unknown sort key '" + key + "' for the op table; valid keys: " + known);
}

std::string cell_or_dash(bool known, const std::string& text) { return known ? text : std::string("-"); }

}  // namespace

const std::map<std::string, std::string>& sort_key_aliases() {
  static const std::map<std::string, std::string> aliases = [] {
    std::map<std::string, std::string> map{{"name", "name"}};
    for (const auto& [names, value] : sort_keys())
      for (const std::string& name : names) map[name] = names.front();
    return map;
  }();
  return aliases;
}

Rows op_table_rows(const Profile& profile, const TableOptions& options, size_t* cut) {
  std::vector<OpRow> rows;
  for (const OpStats& stats : op_stats(profile, options.group_by_shape)) rows.push_back(derive(stats, profile.peaks));
  sort_rows(&rows, options.sort_by);
  size_t cut_rows = 0;
  if (options.row_limit > 0 && rows.size() > static_cast<size_t>(options.row_limit)) {
    cut_rows = rows.size() - static_cast<size_t>(options.row_limit);
    rows.resize(options.row_limit);
  }

  const double self_cpu_total = total_self_cpu_us(profile);
  const double self_device_total = total_kernel_us(profile);

  // One row per op (or op and shapes): every format prints these cells; the text table
  // formats times, sizes and rates for reading and hides the data-only columns.
  using nlohmann::json;
  const auto time_text = [](size_t c) { return [c](const Row& r) { return format_time_us(r[c].get<double>()); }; };
  const auto pct_text = [](size_t c) {
    return [c](const Row& r) { return r[c].is_null() ? std::string("-") : fmt::format("{:.2f}%", r[c].get<double>()); };
  };
  // % of peak: a figure above 100% is marked "!" (the peak is too low for this run; said
  // under the table), never shown as if it were plausible.
  const auto peak_text = [](size_t c) {
    return [c](const Row& r) {
      if (r[c].is_null()) return std::string("-");
      const double pct = r[c].get<double>();
      return fmt::format("{:.1f}%", pct) + (pct > 100.0 ? "!" : "");
    };
  };
  Rows table;
  table.columns = {
      {"name", "Name", true},
      {"path", "Path", true},
      {"self_cpu_pct", "Self CPU %", false, "", pct_text(2)},
      {"self_cpu_us", "Self CPU", false, "", time_text(3)},
      {"cpu_total_us", "CPU total", false, "", time_text(4)},
      {"cpu_avg_us", "CPU avg", false, "", time_text(5)},
      {"self_device_us", "Self Device", false, "", time_text(6)},
      {"self_device_pct", "Self Device %", false, "", pct_text(7)},
      {"device_total_us", "Device total", false, "", time_text(8)},
      {"device_avg_us", "Device avg", false, "", time_text(9)},
      {"calls", "# of Calls"},
      {"flops", "FLOPs", false, "", [](const Row& r) { return cell_or_dash(r[11] > 0, format_si(r[11].get<double>())); }},
      {"bytes", "Bytes", false, "", [](const Row& r) { return cell_or_dash(r[12] > 0, format_bytes(r[12].get<double>())); }},
      {"tflops", "TFLOP/s", false, "",
       [](const Row& r) { return cell_or_dash(r[11] > 0, fmt::format("{:.3f}", r[13].get<double>())); }},
      {"gbps", "GB/s", false, "",
       [](const Row& r) { return cell_or_dash(r[12] > 0, fmt::format("{:.1f}", r[14].get<double>())); }},
      {"pct_peak_flops", "% Peak FLOP/s", false, "", peak_text(15)},
      {"pct_peak_bandwidth", "% Peak GB/s", false, "", peak_text(16)},
      {"bytes_allocated", "Mem Alloc", false, "",
       [](const Row& r) { return cell_or_dash(r[17] != 0, format_bytes(r[17].get<double>())); }},
      {"peak_memory_bytes", "Peak Mem", false, "",
       [](const Row& r) { return cell_or_dash(r[18] > 0, format_bytes(r[18].get<double>())); }},
      {"self_peak_memory_bytes", "Self Peak Mem", false, "",
       [](const Row& r) { return cell_or_dash(r[19] > 0, format_bytes(r[19].get<double>())); }},
      {"bound", "Bound", true, "", [](const Row& r) { return r[20].is_null() ? std::string("-") : r[20].get<std::string>(); }},
      {"input_shapes", "Input Shapes", true, "",
       [](const Row& r) { return r[21].is_null() ? std::string() : shapes_str(r[21].get<std::vector<Shape>>()); }},
      {"is_region", "", false, "", nullptr, false},
  };
  check_columns(options.layout, table.columns);
  // Too wide for the terminal: the shapes first (longest), then the derived rates.
  table.drop_order = {"input_shapes", "pct_peak_bandwidth", "gbps", "pct_peak_flops", "tflops", "bytes",
                      "cpu_avg_us", "device_avg_us", "self_cpu_pct", "cpu_total_us", "bytes_allocated", "self_peak_memory_bytes", "flops",
                      "self_device_pct", "bound"};
  // Grouped by shape, the shapes are what tells the rows apart: dropped last, not first.
  if (options.group_by_shape) {
    table.drop_order.erase(table.drop_order.begin());
    table.drop_order.push_back("input_shapes");
  }
  for (const OpRow& row : rows) {
    const OpStats& s = row.stats;
    table.rows.push_back({
        s.name,
        s.path,
        self_cpu_total > 0 ? 100.0 * s.self_cpu_us / self_cpu_total : 0.0,
        s.self_cpu_us,
        s.cpu_total_us,
        s.cpu_total_us / s.calls,
        s.self_device_us,
        self_device_total > 0 ? 100.0 * s.self_device_us / self_device_total : 0.0,
        s.device_total_us,
        s.device_total_us / s.calls,
        s.calls,
        s.flops,
        s.bytes,
        row.tflops,
        row.gbps,
        row.pct_peak_flops >= 0 ? json(row.pct_peak_flops) : json(),
        row.pct_peak_bandwidth >= 0 ? json(row.pct_peak_bandwidth) : json(),
        s.bytes_allocated,
        s.peak_extra_bytes,
        s.self_peak_extra_bytes,
        row.bound == Bound::unknown ? json() : json(bound_name(row.bound)),
        s.shapes.empty() ? json() : json(s.shape_list),
        s.is_region,
    });
  }
  if (cut != nullptr) *cut = cut_rows;
  return table;
}

std::string op_table(const Profile& profile, const TableOptions& options, Format format) {
  size_t cut_rows = 0;
  const Rows table = op_table_rows(profile, options, &cut_rows);
  const double self_cpu_total = total_self_cpu_us(profile);
  const double self_device_total = total_kernel_us(profile);
  using nlohmann::json;

  if (format == Format::json) {
    json out;
    out["label"] = profile.label;
    out["device"] = profile.device;
    out["device_name"] = profile.device_name;
    out["dtype"] = profile.dtype;
    out["simulated"] = profile.simulated;
    out["active_steps"] = profile.active_steps;
    out["peaks"] = {{"tflops", profile.peaks.tflops}, {"gbps", profile.peaks.gbps}};
    out["sort_by"] = options.sort_by;
    out["self_cpu_time_total_us"] = self_cpu_total;
    out["self_device_time_total_us"] = self_device_total;
    out["peaks"]["source"] = profile.peaks.source;
    out["rows_cut"] = cut_rows;
    const std::vector<double> steps = step_times_us(profile);
    const Spread spread = spread_of(steps);
    out["step_times_us"] = steps;
    out["step_time_us"] = {{"median", spread.median}, {"min", spread.min}, {"max", spread.max},
                           {"mean", spread.mean}, {"stddev", spread.stddev}, {"cv", spread.cv()},
                           {"noisy", spread.cv() > kNoisyCv}};
    out["steps"] = rows_json(step_table_rows(profile));  // per step: times and memory peaks
    out["verdict"] = step_verdict_json(step_verdict(profile));
    out["rows"] = rows_json(select_columns(table, options.layout));
    return out.dump(2) + "\n";
  }
  if (format == Format::csv) return render(table, format, options.layout);
  std::string notes;  // under the table, wrapped to its width
  if (cut_rows > 0) notes += fmt::format("… {} more row{} (--row-limit 0 shows all)\n", cut_rows, cut_rows == 1 ? "" : "s");
  if (profile.simulated) notes += kSimulatedNote;
  const bool over_peak = std::any_of(table.rows.begin(), table.rows.end(), [](const Row& r) {
    return (r[15].is_number() && r[15].get<double>() > 100.0) || (r[16].is_number() && r[16].get<double>() > 100.0);
  });
  if (over_peak) {
    notes += fmt::format("! above 100% of the peak ({:.3g} TFLOP/s, {:.3g} GB/s: {}): the peak is low for this run\n",
                         profile.peaks.tflops, profile.peaks.gbps,
                         profile.peaks.source.empty() ? "unknown source" : profile.peaks.source);
  }
  notes += fmt::format("Self CPU time total: {}\n", format_time_us(self_cpu_total));
  notes += fmt::format("Self device time total: {}\n", format_time_us(self_device_total));
  notes += step_time_lines(profile);
  notes += "Step verdict: " + step_verdict(profile).line + "\n";
  if (std::any_of(table.rows.begin(), table.rows.end(), [](const Row& r) { return r[20].is_string(); })) {
    notes += fmt::format("Bound: the roofline's verdict per op; latency = over {:g}x slower than both roofs allow\n",
                         kBelowRoofs);
  }
  return render(table, format, options.layout) + wrap_text(notes, options.layout.max_width);
}

Rows kernel_table_rows(const Profile& profile) {
  std::vector<KernelStats> rows = kernel_stats(profile);
  std::stable_sort(rows.begin(), rows.end(), [](const KernelStats& a, const KernelStats& b) { return a.total_us > b.total_us; });
  const double device_total = total_kernel_us(profile);
  const double steps = std::max(1, profile.active_steps);

  using nlohmann::json;
  Rows table;
  table.columns = {
      {"name", "Kernel", true},
      {"calls", "Calls"},
      {"calls_per_step", "Per step", false, "", [](const Row& r) { return fmt::format("{:g}", r[2].get<double>()); }},
      {"total_us", "Total", false, "", [](const Row& r) { return format_time_us(r[3].get<double>()); }},
      {"avg_us", "Avg", false, "", [](const Row& r) { return format_time_us(r[4].get<double>()); }},
      {"device_pct", "% Device", false, "", [](const Row& r) { return fmt::format("{:.2f}%", r[5].get<double>()); }},
      {"grid", "Grid", true, "",
       [](const Row& r) {
         if (r[6].is_null()) return std::string();
         return fmt::format("[{}, {}, {}]", r[6][0].get<int>(), r[6][1].get<int>(), r[6][2].get<int>()) +
                (r[11].get<bool>() ? "*" : "");
       }},
      {"block", "Block", true, "",
       [](const Row& r) {
         return r[7].is_null() ? std::string()
                               : fmt::format("[{}, {}, {}]", r[7][0].get<int>(), r[7][1].get<int>(), r[7][2].get<int>());
       }},
      {"registers", "Regs", false, "", [](const Row& r) { return r[8].is_null() ? std::string() : r[8].dump(); }},
      {"shared_memory", "Shared mem", false, "",
       [](const Row& r) { return r[9].is_null() ? std::string() : format_bytes(r[9].get<double>()); }},
      {"occupancy", "Occupancy", false, "",
       [](const Row& r) { return r[10].is_null() ? std::string() : fmt::format("{:.1f}%", 100.0 * r[10].get<double>()); }},
      {"launch_config_varies", "", false, "", nullptr, false},
      {"implementation", "Implementation", true},
  };
  table.drop_order = {"occupancy", "shared_memory", "registers", "block", "grid", "avg_us", "implementation"};
  for (const KernelStats& k : rows) {
    table.rows.push_back({
        k.name,
        k.calls,
        k.calls / steps,
        k.total_us,
        k.total_us / k.calls,
        device_total > 0 ? 100.0 * k.total_us / device_total : 0.0,
        k.launch_config_known ? json({k.grid.x, k.grid.y, k.grid.z}) : json(),
        k.launch_config_known ? json({k.block.x, k.block.y, k.block.z}) : json(),
        k.registers > 0 ? json(k.registers) : json(),
        k.launch_config_known ? json(k.shared_memory) : json(),
        k.occupancy > 0 ? json(k.occupancy) : json(),
        k.launch_config_varies,
        k.implementation,
    });
  }
  return table;
}

std::string kernel_table(const Profile& profile, Format format, const TextLayout& layout) {
  const Rows table = kernel_table_rows(profile);
  const double device_total = total_kernel_us(profile);
  const double steps = std::max(1, profile.active_steps);
  const double kernels_per_step = static_cast<double>(profile.kernels.size()) / steps;
  using nlohmann::json;
  if (format == Format::json) {
    json out = {{"label", profile.label},
                {"device", profile.device},
                {"active_steps", profile.active_steps},
                {"kernels_per_step", kernels_per_step},
                {"device_time_total_us", device_total},
                {"rows", rows_json(table)}};
    return out.dump(2) + "\n";
  }
  if (format == Format::csv) return render(table, format);
  std::string notes;  // under the table, wrapped to its width
  if (profile.simulated) notes += kSimulatedNote;
  notes += fmt::format("Kernels per step: {:g} ({} distinct) over {} step(s)\n", kernels_per_step, table.rows.size(),
                       profile.active_steps);
  notes += fmt::format("Device time total: {} ({} per step)\n", format_time_us(device_total),
                       format_time_us(device_total / steps));
  if (std::any_of(table.rows.begin(), table.rows.end(), [](const Row& r) { return r[11].get<bool>(); })) {
    notes += "* launch configuration differs between calls; the first call's is shown\n";
  }
  return render(table, format, layout) + wrap_text(notes, layout.max_width);
}

Rows step_table_rows(const Profile& profile) {
  Rows table;
  // Memory: the step's peak above what was in use when it began, and the peak in use.
  table.columns = {{"step", "Step"},
                   {"time_us", "Time"},
                   {"device_us", "Device"},
                   {"cpu_us", "CPU"},
                   {"peak_memory_bytes", "Peak Mem", false, "", [](const Row& r) { return format_bytes(r[4].get<double>()); }},
                   {"peak_in_use_bytes", "Peak In Use", false, "", [](const Row& r) { return format_bytes(r[5].get<double>()); }}};
  const EventTimes times = event_times(profile);
  const std::vector<double> step_times = step_times_us(profile);
  size_t n = 0;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    const OpEvent& event = profile.ops[i];
    if (!is_step_region(event)) continue;
    table.rows.push_back({event.step, step_times[n++], times.device_total_us[i], event.cpu_end_us - event.cpu_start_us,
                          event.peak_bytes - event.start_bytes, event.peak_bytes});
  }
  return table;
}

Rows with_first_column(const Rows& rows, const std::string& key, const std::string& title, const std::string& value) {
  Rows out;
  out.columns.push_back(Column(key, title, true));
  for (const Column& column : rows.columns) out.columns.push_back(column);
  for (const Row& row : rows.rows) {
    Row line{value};
    line.insert(line.end(), row.begin(), row.end());
    out.rows.push_back(line);
  }
  return out;
}

Rows with_variant_column(const Rows& rows, const std::string& variant) {
  return with_first_column(rows, "variant", "Variant", variant);
}

std::string step_time_lines(const Profile& profile) {
  const Spread s = spread_of(step_times_us(profile));
  if (s.samples == 0) return "";
  std::string out = fmt::format("Step time: median {} (min {}, max {}, CV {:.1f}%) over {} step{}\n",
                                format_time_us(s.median), format_time_us(s.min), format_time_us(s.max),
                                100.0 * s.cv(), s.samples, s.samples == 1 ? "" : "s");
  if (s.cv() > kNoisyCv) {
    // Fewer threads only helps a run that has more than one.
    out += fmt::format("noisy: CV {:.0f}% between steps — is the machine busy? try {}more steps (profile.active)\n",
                       100.0 * s.cv(), profile.cpu_threads > 1 ? "--threads 1, or " : "");
  }
  int64_t above_start = 0, in_use = 0;
  for (const OpEvent& event : profile.ops) {
    poll_interrupted("while building the tables");  // a profile may hold millions of events
    if (!is_step_region(event)) continue;
    above_start = std::max(above_start, event.peak_bytes - event.start_bytes);
    in_use = std::max(in_use, event.peak_bytes);
  }
  if (in_use > 0) {
    out += fmt::format("Step memory: peak {} above the step's start, {} in use at most\n",
                       format_bytes(static_cast<double>(above_start)), format_bytes(static_cast<double>(in_use)));
  }
  return out;
}

}  // namespace blockscope::profiler
