// blockscope check: every path mix of the workload on every device against the float64
// reference, under the accuracy rule of reference/accuracy.h.
#include "tools/cli/commands.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "reference/accuracy.h"
#include "reference/block_reference.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope::cli {
namespace {

// Every path mix that applies to the workload, the all-naive one first (the first op's path
// varying fastest), from the path table; MLP paths only where they apply (plain or gated).
std::vector<PathConfig> path_mixes(const WorkloadConfig& config) {
  PathConfig naive = config.paths;
  for (ops::PathOp op : ops::path_ops()) naive.set(op, ops::paths_of(op).front().name);
  std::vector<PathConfig> mixes{naive};
  for (ops::PathOp op : path_ops_for(config.kind)) {
    std::vector<PathConfig> grown;
    for (const ops::PathInfo& row : ops::paths_of(op)) {
      if (op == ops::PathOp::mlp && !(config.model.gated ? row.gated_mlp : row.plain_mlp)) continue;
      for (PathConfig mix : mixes) {
        mix.set(op, row.name);
        grown.push_back(mix);
      }
    }
    mixes = grown;
  }
  return mixes;
}

}  // namespace

int check_command(Session& session) {
  const Options& options = session.options;
  const profiler::Format format = session.format();
  const WorkloadConfig config = session.load_config();
  session.check_outputs(config, false);
  std::vector<Device> devices;
  if (!options.device.empty() && options.device != "auto") {
    devices.push_back(resolve_device(options.device));
  } else {
    devices.push_back(Device::cpu());
    if (cuda_available())
      for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device::cuda(i));
  }
  const std::vector<PathConfig> mixes = path_mixes(config);

  struct Row {
    std::string device, paths;
    double error, bound;
    bool ok;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  std::vector<double> reference_output;
  for (const Device& device : devices) {
    Context ctx(device);
    session.apply_run_settings(ctx, config);
    Workload workload(ctx, config, mixes);
    if (reference_output.empty()) {
      // Inputs and weights are identical on every device (seeded init), so one reference serves all.
      reference::blockref::Named named;
      for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = reference::from_tensor(tensor);
      reference_output = reference::blockref::workload_output(config, named).data;
    }
    double naive_error = 0;
    for (size_t i = 0; i < mixes.size(); ++i) {
      session.set_activity("checking " + paths_str(mixes[i], config.kind) + " on " + device.str());
      check_interrupted("between path mixes");
      workload.set_paths(mixes[i]);
      Tensor out = workload.output();
      fill_nan(out);  // an element the path forgets to write shows up as NaN
      workload.forward();
      ctx.synchronize();
      const double error = reference::max_relative_error(to_floats(workload.output()), reference_output);
      double bound;
      if (i == 0) {
        naive_error = error;
        bound = reference::naive_workload_bound(config.dtype);
      } else {
        bound = reference::accuracy_bound(naive_error, config.dtype);
      }
      const bool ok = std::isfinite(error) && error <= bound;
      all_ok = all_ok && ok;
      rows.push_back({device.str(), paths_str(mixes[i], config.kind), error, bound, ok});
    }
    if (!options.dump.empty() && device == devices.front()) session.write_dump(ctx, workload, options.dump);
  }

  profiler::Rows table;
  table.columns = {{"device", "device", true, ""},
                   {"paths", "paths", true, ""},
                   {"max_rel_error", "max rel error", false, "%.3e"},
                   {"bound", "bound", false, "%.3e"},
                   {"ok", "result", true, ""}};
  for (const Row& r : rows) table.rows.push_back({r.device, r.paths, r.error, r.bound, r.ok});
  if (format == profiler::Format::json) {
    nlohmann::json out;
    out["workload"] = config.name.empty() ? config.source : config.name;
    out["dtype"] = dtype_name(config.dtype);
    out["ok"] = all_ok;
    out["results"] = profiler::rows_json(table);
    std::cout << out.dump(2) << "\n";
  } else if (format == profiler::Format::csv) {
    std::cout << profiler::render(table, format);
  } else {
    for (profiler::Row& row : table.rows) row[4] = row[4].get<bool>() ? "ok" : "FAIL";
    std::cout << "check " << (config.name.empty() ? config.source : config.name) << " ("
              << workload_kind_name(config.kind) << ", " << dtype_name(config.dtype)
              << ") against the float64 reference\n";
    std::cout << "rule: naive error <= " << reference::naive_workload_bound(config.dtype)
              << "; every other path <= 2 x naive + " << reference::accuracy_floor(config.dtype)
              << " (max |out - ref| / max |ref|)\n\n";
    std::cout << profiler::render(table, format);
    if (devices.size() == 1 && devices[0].is_cpu() && options.device.empty()) {
      std::printf("\n(no CUDA GPU available: checked the CPU only)\n");
    }
    std::printf("\n%s\n", all_ok ? "all paths within the accuracy rule" : "some paths break the accuracy rule");
  }
  return all_ok ? 0 : 1;
}

}  // namespace blockscope::cli
