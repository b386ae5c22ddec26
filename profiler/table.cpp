#include "profiler/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"
#include "runtime/error.h"

namespace blockscope::profiler {

namespace {

// Under every table of a profile measured on the simulated GPU.
constexpr const char* kSimulatedNote =
    "SIMULATED GPU: device times are the simulator's (kernels run as fibers on the CPU), not GPU times; "
    "registers and occupancy from the simulator (no register counts)\n";

// A column of the text tables, whose cells are formatted here.
Column text_column(const char* title, bool left_aligned = false) { return Column{"", title, left_aligned, ""}; }

std::string number(double value) { return fmt::format("{}", value); }
std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.2f}%", 100.0 * part / whole) : std::string("-");
}

// ---- Op table -------------------------------------------------------------------------------

// Derived figures of one row; the time the rates use is the device time when the op launched
// any kernel (work items on CPU), else its CPU time.
struct OpRow {
  OpStats stats;
  double tflops = 0, gbps = 0;
  double pct_peak_flops = -1, pct_peak_bandwidth = -1;  // -1: unknown
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

std::string op_table(const Profile& profile, const TableOptions& options, Format format) {
  std::vector<OpRow> rows;
  for (const OpStats& stats : op_stats(profile, options.group_by_shape)) rows.push_back(derive(stats, profile.peaks));
  sort_rows(&rows, options.sort_by);
  if (options.row_limit > 0 && rows.size() > static_cast<size_t>(options.row_limit)) rows.resize(options.row_limit);

  const double self_cpu_total = total_self_cpu_us(profile);
  const double self_device_total = total_kernel_us(profile);

  if (format == Format::json) {
    nlohmann::json out;
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
    out["rows"] = nlohmann::json::array();
    for (const OpRow& row : rows) {
      const OpStats& s = row.stats;
      nlohmann::json item = {
          {"name", s.name},
          {"path", s.path},
          {"is_region", s.is_region},
          {"self_cpu_us", s.self_cpu_us},
          {"self_cpu_pct", self_cpu_total > 0 ? 100.0 * s.self_cpu_us / self_cpu_total : 0.0},
          {"cpu_total_us", s.cpu_total_us},
          {"cpu_avg_us", s.cpu_total_us / s.calls},
          {"self_device_us", s.self_device_us},
          {"self_device_pct", self_device_total > 0 ? 100.0 * s.self_device_us / self_device_total : 0.0},
          {"device_total_us", s.device_total_us},
          {"device_avg_us", s.device_total_us / s.calls},
          {"calls", s.calls},
          {"input_shapes", s.shapes},
          {"flops", s.flops},
          {"bytes", s.bytes},
          {"tflops", row.tflops},
          {"gbps", row.gbps},
          {"pct_peak_flops", row.pct_peak_flops >= 0 ? nlohmann::json(row.pct_peak_flops) : nlohmann::json()},
          {"pct_peak_bandwidth", row.pct_peak_bandwidth >= 0 ? nlohmann::json(row.pct_peak_bandwidth) : nlohmann::json()},
          {"bytes_allocated", s.bytes_allocated},
      };
      out["rows"].push_back(item);
    }
    return out.dump(2) + "\n";
  }

  if (format == Format::csv) {
    std::string out = csv_line({"name", "path", "self_cpu_pct", "self_cpu_us", "cpu_total_us", "cpu_avg_us",
                                "self_device_us", "self_device_pct", "device_total_us", "device_avg_us", "calls",
                                "input_shapes", "flops", "bytes", "tflops", "gbps", "pct_peak_flops",
                                "pct_peak_bandwidth", "bytes_allocated"});
    for (const OpRow& row : rows) {
      const OpStats& s = row.stats;
      out += csv_line({s.name, s.path, number(self_cpu_total > 0 ? 100.0 * s.self_cpu_us / self_cpu_total : 0.0),
                       number(s.self_cpu_us), number(s.cpu_total_us), number(s.cpu_total_us / s.calls),
                       number(s.self_device_us),
                       number(self_device_total > 0 ? 100.0 * s.self_device_us / self_device_total : 0.0),
                       number(s.device_total_us), number(s.device_total_us / s.calls), std::to_string(s.calls),
                       s.shapes, number(s.flops), number(s.bytes), number(row.tflops), number(row.gbps),
                       row.pct_peak_flops >= 0 ? number(row.pct_peak_flops) : "",
                       row.pct_peak_bandwidth >= 0 ? number(row.pct_peak_bandwidth) : "",
                       std::to_string(s.bytes_allocated)});
    }
    return out;
  }

  const std::vector<Column> columns = {
      text_column("Name", true),    text_column("Path", true),     text_column("Self CPU %"),    text_column("Self CPU"),      text_column("CPU total"),
      text_column("CPU avg"),       text_column("Self Device"),    text_column("Self Device %"), text_column("Device total"),  text_column("Device avg"),
      text_column("# of Calls"),    text_column("FLOPs"),          text_column("Bytes"),         text_column("TFLOP/s"),       text_column("GB/s"),
      text_column("% Peak FLOP/s"), text_column("% Peak GB/s"),    text_column("Mem Alloc"),     text_column("Input Shapes", true),
  };
  std::vector<std::vector<std::string>> cells;
  for (const OpRow& row : rows) {
    const OpStats& s = row.stats;
    const bool has_work = s.flops > 0 || s.bytes > 0;
    cells.push_back({
        s.name,
        s.path,
        percent(s.self_cpu_us, self_cpu_total),
        format_time_us(s.self_cpu_us),
        format_time_us(s.cpu_total_us),
        format_time_us(s.cpu_total_us / s.calls),
        format_time_us(s.self_device_us),
        percent(s.self_device_us, self_device_total),
        format_time_us(s.device_total_us),
        format_time_us(s.device_total_us / s.calls),
        std::to_string(s.calls),
        cell_or_dash(s.flops > 0, format_si(s.flops)),
        cell_or_dash(s.bytes > 0, format_bytes(s.bytes)),
        cell_or_dash(has_work && s.flops > 0, fmt::format("{:.3f}", row.tflops)),
        cell_or_dash(has_work && s.bytes > 0, fmt::format("{:.1f}", row.gbps)),
        cell_or_dash(row.pct_peak_flops >= 0, fmt::format("{:.1f}%", row.pct_peak_flops)),
        cell_or_dash(row.pct_peak_bandwidth >= 0, fmt::format("{:.1f}%", row.pct_peak_bandwidth)),
        s.bytes_allocated != 0 ? format_bytes(static_cast<double>(s.bytes_allocated)) : std::string("-"),
        s.shapes,
    });
  }
  std::string out = render_text_table(columns, cells);
  if (profile.simulated) out += kSimulatedNote;
  out += fmt::format("Self CPU time total: {}\n", format_time_us(self_cpu_total));
  out += fmt::format("Self device time total: {}\n", format_time_us(self_device_total));
  return out;
}

std::string kernel_table(const Profile& profile, Format format) {
  std::vector<KernelStats> rows = kernel_stats(profile);
  std::stable_sort(rows.begin(), rows.end(), [](const KernelStats& a, const KernelStats& b) { return a.total_us > b.total_us; });
  const double device_total = total_kernel_us(profile);
  const double steps = std::max(1, profile.active_steps);
  const double kernels_per_step = static_cast<double>(profile.kernels.size()) / steps;
  const auto dim3_str = [](const Dim3& d) { return fmt::format("[{}, {}, {}]", d.x, d.y, d.z); };

  if (format == Format::json || format == Format::csv) {
    nlohmann::json items = nlohmann::json::array();
    for (const KernelStats& k : rows) {
      nlohmann::json item = {
          {"name", k.name},
          {"calls", k.calls},
          {"calls_per_step", k.calls / steps},
          {"total_us", k.total_us},
          {"avg_us", k.total_us / k.calls},
          {"device_pct", device_total > 0 ? 100.0 * k.total_us / device_total : 0.0},
          {"grid", k.launch_config_known ? nlohmann::json({k.grid.x, k.grid.y, k.grid.z}) : nlohmann::json()},
          {"block", k.launch_config_known ? nlohmann::json({k.block.x, k.block.y, k.block.z}) : nlohmann::json()},
          {"registers", k.registers > 0 ? nlohmann::json(k.registers) : nlohmann::json()},
          {"shared_memory", k.launch_config_known ? nlohmann::json(k.shared_memory) : nlohmann::json()},
          {"occupancy", k.occupancy > 0 ? nlohmann::json(k.occupancy) : nlohmann::json()},
      };
      items.push_back(item);
    }
    if (format == Format::json) {
      nlohmann::json out = {{"label", profile.label},
                            {"device", profile.device},
                            {"active_steps", profile.active_steps},
                            {"kernels_per_step", kernels_per_step},
                            {"device_time_total_us", device_total},
                            {"rows", items}};
      return out.dump(2) + "\n";
    }
    std::string out = csv_line({"name", "calls", "calls_per_step", "total_us", "avg_us", "device_pct", "grid", "block",
                                "registers", "shared_memory", "occupancy"});
    for (size_t i = 0; i < rows.size(); ++i) {
      const KernelStats& k = rows[i];
      const nlohmann::json& item = items[i];
      out += csv_line({k.name, std::to_string(k.calls), number(k.calls / steps), number(k.total_us),
                       number(k.total_us / k.calls), number(item["device_pct"].get<double>()),
                       k.launch_config_known ? dim3_str(k.grid) : "", k.launch_config_known ? dim3_str(k.block) : "",
                       k.registers > 0 ? std::to_string(k.registers) : "",
                       k.launch_config_known ? std::to_string(k.shared_memory) : "",
                       k.occupancy > 0 ? number(k.occupancy) : ""});
    }
    return out;
  }

  const std::vector<Column> columns = {
      text_column("Kernel", true), text_column("Calls"),     text_column("Per step"), text_column("Total"),    text_column("Avg"),       text_column("% Device"),
      text_column("Grid", true),   text_column("Block", true), text_column("Regs"),   text_column("Shared mem"), text_column("Occupancy"),
  };
  std::vector<std::vector<std::string>> cells;
  for (const KernelStats& k : rows) {
    cells.push_back({
        k.name,
        std::to_string(k.calls),
        fmt::format("{:g}", k.calls / steps),
        format_time_us(k.total_us),
        format_time_us(k.total_us / k.calls),
        percent(k.total_us, device_total),
        k.launch_config_known ? dim3_str(k.grid) + (k.launch_config_varies ? "*" : "") : "",
        k.launch_config_known ? dim3_str(k.block) : "",
        k.registers > 0 ? std::to_string(k.registers) : "",
        k.launch_config_known ? format_bytes(static_cast<double>(k.shared_memory)) : "",
        k.occupancy > 0 ? fmt::format("{:.1f}%", 100.0 * k.occupancy) : "",
    });
  }
  std::string out = render_text_table(columns, cells);
  if (profile.simulated) out += kSimulatedNote;
  out += fmt::format("Kernels per step: {:g} ({} distinct) over {} step(s)\n", kernels_per_step, rows.size(),
                     profile.active_steps);
  out += fmt::format("Device time total: {} ({} per step)\n", format_time_us(device_total),
                     format_time_us(device_total / steps));
  if (std::any_of(rows.begin(), rows.end(), [](const KernelStats& k) { return k.launch_config_varies; })) {
    out += "* launch configuration differs between calls; the first call's is shown\n";
  }
  return out;
}

}  // namespace blockscope::profiler
