// blockscope check: every path mix of the workload on every device against the float64
// reference, under the accuracy rule of reference/accuracy.h.
#include "tools/cli/commands.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "ops/decode_attention/decode_attention.h"
#include "reference/accuracy.h"
#include "reference/block_reference.h"
#include "reference/error_model.h"
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
      PathConfig probe;
      probe.set(op, row.name);
      // decode runs only the attention paths with a decode form (ops/decode_attention).
      if (op == ops::PathOp::attention && config.kind == WorkloadKind::decode && !ops::has_decode_form(probe.attention))
        continue;
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
  // Tensor parallelism: under mpirun the CPU ranks, one process each; otherwise the GPUs of this
  // process as one group (run_on_gpus: cuda:0 .. cuda:N-1, a thread each).
  const int64_t ranks = config.parallel.tensor;
  const bool gpu_group = ranks > 1 && world_communicator() == nullptr;
  if (!options.device.empty() && options.device != "auto") {
    devices.push_back(resolve_device(options.device));
  } else if (gpu_group) {
    const int gpus = cuda_available() ? cuda_device_count() : 0;
    BS_CHECK_INPUT(gpus >= ranks, "parallel.tensor = ", ranks, " needs ", ranks,
                   " ranks: one process each (mpirun -np ", ranks, " blockscope check ... --device cpu) or ", ranks,
                   " GPUs in this process (", gpus, " present)");
    devices.push_back(Device::cuda(0));
  } else {
    devices.push_back(Device::cpu());
    if (cuda_available() && ranks == 1)
      for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device::cuda(i));
  }
  // A row's device: the GPU group's range, or the one device.
  const auto device_label = [&](const Device& device) {
    return gpu_group && device.is_cuda() ? "cuda:0-" + std::to_string(ranks - 1) : device.str();
  };
  std::string engine;  // of the tensor-parallel group, for the header
  const std::vector<PathConfig> mixes = path_mixes(config);
  // The naive path's bound, derived from the workload's shapes and dtype (reference/error_model.h).
  const double naive_bound = reference::workload_error_bound(config);
  // Blocks and stacks are also measured at each path op of the last layer, on the inputs the
  // run gave it: at the output the rounding of every op before hides a path's own error, at
  // the op where the path differs nothing does. Each measure's name is the path op's.
  // (Not under tensor parallelism: a rank's op tensors are its shard, the reference's the whole.)
  const bool per_op =
      (config.kind == WorkloadKind::block || config.kind == WorkloadKind::stack) && config.parallel.tensor == 1;
  const std::vector<std::pair<std::string, std::string>> op_outputs = {
      {"attention", "attention.out"}, {"linear", "out_proj.out"}, {"mlp", "mlp.out"}};
  std::vector<std::string> measures{"output"};
  if (per_op)
    for (const auto& [measure, tensor] : op_outputs) measures.push_back(measure);

  struct Row {
    std::string device, paths;
    std::vector<double> errors, bounds;  // per measure
    bool ok;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  reference::blockref::Named named;  // inputs and weights (identical on every device: seeded init)
  std::vector<double> expected_output;
  // decode: every path mix on both KV cache layouts (the same seeded inputs and weights, so
  // one reference serves both).
  std::vector<WorkloadConfig> runs{config};
  if (config.kind == WorkloadKind::decode) {
    runs.clear();
    for (ops::KvLayout layout : {ops::KvLayout::contiguous, ops::KvLayout::paged}) {
      WorkloadConfig run = config;
      run.decode.kv_cache.layout = layout;
      runs.push_back(run);
    }
  }
  // One device's (or GPU group's) run of every mix on one rank: `group` its tensor-parallel group
  // (for_each_local_rank); only rank 0 measures and reports, the other ranks run the same forwards.
  const auto check_run = [&](Context& ctx, const Device& device, const WorkloadConfig& run, Communicator* group) {
    const bool reports = group == nullptr || group->rank() == 0;
    if (group != nullptr && reports) engine = group->engine();
    session.apply_run_settings(ctx, run);
    if (&device == &devices.front() && &run == &runs.front() && reports) announce_large_workload("check", run);
    Workload workload(ctx, run, mixes, group);
    const std::string layout =
        run.kind == WorkloadKind::decode ? std::string(",kv_cache=") + ops::kv_layout_name(run.decode.kv_cache.layout) : "";
    if (reports && expected_output.empty()) {
      for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = reference::from_tensor(tensor);
      expected_output = reference::blockref::workload_output(config, named).data;
    }
    std::vector<double> naive_errors;
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (reports) session.set_activity("checking " + paths_str(mixes[i], config.kind) + " on " + device_label(device));
      check_interrupted("between path mixes");
      workload.set_paths(mixes[i]);
      Tensor out = workload.output();
      fill_nan(out);  // an element the path forgets to write shows up as NaN
      workload.forward();
      ctx.synchronize();
      if (!reports) continue;
      const std::vector<float> output = to_floats(workload.output());
      Row row{device_label(device), paths_str(mixes[i], config.kind) + layout, {}, {}, true};
      row.errors.push_back(reference::max_relative_error(output, expected_output));
      if (per_op) {
        std::map<std::string, Tensor> ran;  // the last layer's op inputs and outputs, as run
        reference::blockref::Named op_inputs;
        for (const auto& [name, tensor] : workload.intermediates()) {
          ran[name] = tensor;
          op_inputs[name] = reference::from_tensor(tensor);
        }
        const reference::blockref::Named expected_ops = reference::blockref::last_layer_ops(config, named, op_inputs);
        for (const auto& [measure, tensor] : op_outputs) {
          row.errors.push_back(reference::max_relative_error(to_floats(ran.at(tensor)), expected_ops.at(tensor).data));
        }
      }
      if (i == 0) naive_errors = row.errors;
      for (size_t m = 0; m < measures.size(); ++m) {
        const double bound = i == 0 ? naive_bound
                                    : reference::accuracy_bound(naive_errors[m], config.dtype);
        row.bounds.push_back(bound);
        row.ok = row.ok && std::isfinite(row.errors[m]) && row.errors[m] <= bound;
      }
      all_ok = all_ok && row.ok;
      rows.push_back(row);
    }
    if (!options.dump.empty() && device == devices.front() && &run == &runs.front())
      session.write_dump(ctx, workload, options.dump, reports);
  };
  for (const Device& device : devices) {
    for (const WorkloadConfig& run : runs) {
      for_each_local_rank(run, device, [&](Context& ctx, Communicator* group) { check_run(ctx, device, run, group); });
    }
  }

  profiler::Rows table;
  table.columns = {{"device", "device", true, ""}, {"paths", "paths", true, ""}};
  for (const std::string& measure : measures) {
    // The first measure keeps the keys check has always printed (scripts read them).
    const std::string prefix = measure == "output" ? "" : measure + "_";
    table.columns.push_back({prefix + "max_rel_error", measure + " error", false, "%.3e"});
    table.columns.push_back({prefix + "bound", "bound", false, "%.3e"});
  }
  table.columns.push_back({"ok", "result", true, ""});
  // Too wide for COLUMNS: the bounds go first (the result says whether each held), then the
  // per-op errors from the last; the output's error stays.
  for (const std::string& measure : measures) table.drop_order.push_back((measure == "output" ? "" : measure + "_") + "bound");
  for (size_t m = measures.size(); m-- > 1;) table.drop_order.push_back(measures[m] + "_max_rel_error");
  for (const Row& r : rows) {
    profiler::Row line{r.device, r.paths};
    for (size_t m = 0; m < measures.size(); ++m) {
      line.push_back(r.errors[m]);
      line.push_back(r.bounds[m]);
    }
    line.push_back(r.ok);
    table.rows.push_back(line);
  }
  const size_t ok_column = table.columns.size() - 1;
  if (format == profiler::Format::json) {
    nlohmann::json out;
    out["workload"] = config.name.empty() ? config.source : config.name;
    out["dtype"] = dtype_name(config.dtype);
    out["ok"] = all_ok;
    out["measures"] = measures;
    out["results"] = profiler::rows_json(table);
    std::cout << out.dump(2) << "\n";
  } else if (format == profiler::Format::csv) {
    std::cout << profiler::render(table, format);
  } else {
    for (profiler::Row& row : table.rows) row[ok_column] = row[ok_column].get<bool>() ? "ok" : "FAIL";
    const size_t width = profiler::terminal_width();
    std::ostringstream head;
    head << "check " << (config.name.empty() ? config.source : config.name) << " (" << workload_kind_name(config.kind)
         << ", " << dtype_name(config.dtype) << ") against the float64 reference\n";
    head << "rule: naive error <= " << naive_bound << " (derived from the workload's sums and "
         << "roundings); every other path <= 2 x naive + " << reference::accuracy_floor(config.dtype)
         << " (max |out - ref| / max |ref|)\n";
    if (per_op) {
      head << "measured at the output and at the last layer's attention, linear (its output projection) and mlp ops, "
              "each recomputed in float64 from the inputs the run gave it\n";
    }
    if (config.parallel.tensor > 1) {
      head << "tensor parallel over " << config.parallel.tensor << " ranks"
           << (config.parallel.sequence_parallel ? " with sequence parallelism" : "") << " (" << engine
           << "): the output rank 0 holds after the last all-reduce against the unsplit block\n";
    }
    profiler::TextLayout layout;
    layout.max_width = width;
    layout.show_all = "a wider COLUMNS shows them";
    std::cout << profiler::wrap_text(head.str(), width) << "\n" << profiler::render(table, format, layout);
    if (devices.size() == 1 && devices[0].is_cpu() && options.device.empty() && ranks == 1) {
      std::printf("\n(no CUDA GPU available: checked the CPU only)\n");
    }
    std::printf("\n%s\n", all_ok ? "all paths within the accuracy rule" : "some paths break the accuracy rule");
  }
  return all_ok ? 0 : 1;
}

}  // namespace blockscope::cli
