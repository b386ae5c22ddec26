// blockscope check: every path mix of the workload on every device against the float64
// reference, under the accuracy rule of reference/accuracy.h.
#include "tools/cli/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <sstream>

#include "ops/decode_attention/decode_attention.h"
#include "reference/accuracy.h"
#include "reference/block_reference.h"
#include "reference/error_model.h"
#include "reference/gemm64.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/interrupt.h"
#include "tools/cli/progress.h"

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

// Float64 op references kept per op (the last ones computed): enough for the distinct inputs
// the attention paths give the ops after them (naive and inplace agree bit for bit).
constexpr size_t kCachedPerOp = 4;

// The position of `mixes`'s path for `op` in the path table (0: naive).
size_t path_index(ops::PathOp op, const PathConfig& mix) {
  const std::vector<ops::PathInfo>& rows = ops::paths_of(op);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].name == std::string(mix.name(op))) return i;
  return 0;
}

// Two independent 64-bit hashes of the values' bits (FNV-1a and a multiply-xorshift), chained
// from `seed`: the key under which an op reference is reused.
std::pair<uint64_t, uint64_t> hash_values(const std::vector<double>& values, std::pair<uint64_t, uint64_t> seed) {
  uint64_t a = seed.first ^ 0xcbf29ce484222325ull, b = seed.second ^ 0x9e3779b97f4a7c15ull;
  for (const double value : values) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    a = (a ^ bits) * 0x100000001b3ull;
    b = (b + bits) * 0xff51afd7ed558ccdull;
    b ^= b >> 33;
  }
  return {a, b ^ static_cast<uint64_t>(values.size())};
}

// Before any work: the workload (its largest variant) and its float64 reference fit in what
// this process may still use — free RAM and its address-space limit (RLIMIT_AS, `ulimit -v`),
// which a run would otherwise meet as an allocation failure minutes in.
void check_host_memory(const WorkloadConfig& config, const std::vector<PathConfig>& mixes) {
  const MemoryEstimate workload = estimate_memory(config, mixes);
  // The reference holds every input and weight in float64, and a few activations of the same
  // size while it runs (the block's residual, its normed input, the MLP's hidden rows ...).
  const double per_element = 8.0 / static_cast<double>(dtype_size(config.dtype));
  size_t reference_bytes =
      static_cast<size_t>(per_element * static_cast<double>(workload.weights + 4 * workload.activations));
  // Blocks and stacks: the last layer's op references kept for reuse, [tokens, d_model] each.
  if (config.kind == WorkloadKind::block || config.kind == WorkloadKind::stack) {
    reference_bytes += 3 * kCachedPerOp * static_cast<size_t>(config.input.batch * config.input.seq_len *
                                                              config.model.d_model) * sizeof(double);
  }
  const size_t needed = workload.total() + reference_bytes;
  const HostMemory host = host_memory();
  const size_t available = std::min(host.free_ram, host.address_space_left);
  if (needed <= available) return;
  const std::string which =
      host.address_space_left < host.free_ram
          ? "the process's address-space limit (RLIMIT_AS, ulimit -v: " +
                profiler::format_bytes(static_cast<double>(host.address_space_limit)) + ", " +
                profiler::format_bytes(static_cast<double>(host.address_space_left)) + " of it left; free RAM " +
                profiler::format_bytes(static_cast<double>(host.free_ram)) + ")"
          : "free RAM (" + profiler::format_bytes(static_cast<double>(host.free_ram)) + ")";
  throw InputError("check of '" + (config.name.empty() ? config.source : config.name) + "' needs about " +
                   profiler::format_bytes(static_cast<double>(needed)) + " (the workload " +
                   profiler::format_bytes(static_cast<double>(workload.total())) + ", its float64 reference " +
                   profiler::format_bytes(static_cast<double>(reference_bytes)) + ") but only " +
                   profiler::format_bytes(static_cast<double>(available)) + " is available: " + which +
                   "; reduce input.batch / input.seq_len (or the model size), or raise the limit");
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
  // On a GPU a path mix's forward is queued whole: a signal is answered when it ends.
  if (std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); }))
    set_interrupt_point("after this path mix");
  // A row's device: the GPU group's range, or the one device.
  const auto device_label = [&](const Device& device) {
    return gpu_group && device.is_cuda() ? "cuda:0-" + std::to_string(ranks - 1) : device.str();
  };
  std::string engine;  // of the tensor-parallel group, for the header
  const std::vector<PathConfig> mixes = path_mixes(config);
  // The float64 reference runs on every core this process may use (--threads caps it): it runs
  // between the forwards, never beside them.
  reference::set_reference_threads(options.threads);
  // The forwards too: check measures errors, not times, so no core is kept free for steady steps.
  if (options.threads == 0) cpu::set_thread_count(reference::reference_threads());
  check_host_memory(config, mixes);
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
  // The order mixes are run in: the path op that feeds the others varies slowest (linear, then
  // attention, then mlp), so consecutive mixes give the last layer's later ops the same inputs
  // and each float64 op reference is computed once per distinct input (its key: a hash of the
  // inputs' bits). Rows are still reported in `mixes` order, the all-naive one first.
  std::vector<size_t> order(mixes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (per_op) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto key = [&](size_t i) {
        return std::make_pair(path_index(ops::PathOp::linear, mixes[i]), path_index(ops::PathOp::attention, mixes[i]));
      };
      return key(a) < key(b);
    });
  }
  struct CachedOp {
    std::pair<uint64_t, uint64_t> key;
    reference::RefTensor value;
  };
  std::map<std::string, std::deque<CachedOp>> op_cache;  // per op output: the last kCachedPerOp computed
  int reused = 0, computed = 0;
  size_t progress_index = 0;
  const size_t progress_total = mixes.size() * devices.size() * runs.size();
  Progress progress("check", progress_total);
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
      session.set_activity("computing the float64 reference of " + std::string(workload_kind_name(config.kind)));
      const auto started = std::chrono::steady_clock::now();
      if (reports) progress.note("computing the float64 reference output (" + std::to_string(reference::reference_threads()) + " threads)");
      expected_output = reference::blockref::workload_output(config, named).data;
      if (reports)
        progress.note(fmt::format("float64 reference output done in {:.1f} s",
                                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
    }
    std::vector<Row> mix_rows(mixes.size());
    for (size_t i : order) {
      const std::string label = paths_str(mixes[i], config.kind) + layout;
      if (reports) session.set_activity("checking " + paths_str(mixes[i], config.kind) + " on " + device_label(device));
      check_interrupted("between path mixes");
      progress.start(progress_index++, device_label(device) + " " + label);
      workload.set_paths(mixes[i]);
      Tensor out = workload.output();
      fill_nan(out);  // an element the path forgets to write shows up as NaN
      workload.forward();
      ctx.synchronize();
      if (!reports) continue;
      progress.step(1, per_op ? 2 : 1, "forward done; float64 ops");
      const std::vector<float> output = to_floats(workload.output());
      Row row{device_label(device), label, {}, {}, true};
      row.errors.push_back(reference::max_relative_error(output, expected_output));
      if (per_op) {
        std::map<std::string, Tensor> ran;  // the last layer's op inputs and outputs, as run
        for (const auto& [name, tensor] : workload.intermediates()) ran[name] = tensor;
        for (const auto& [measure, tensor] : op_outputs) {
          reference::blockref::Named op_inputs;
          std::pair<uint64_t, uint64_t> key{0, 0};
          for (const std::string& input : reference::blockref::last_layer_op_inputs(tensor)) {
            op_inputs[input] = reference::from_tensor(ran.at(input));
            key = hash_values(op_inputs[input].data, key);
          }
          std::deque<CachedOp>& cache = op_cache[tensor];
          auto hit = std::find_if(cache.begin(), cache.end(), [&](const CachedOp& c) { return c.key == key; });
          if (hit == cache.end()) {
            if (cache.size() == kCachedPerOp) cache.pop_front();
            cache.push_back({key, reference::blockref::last_layer_op(config, named, op_inputs, tensor)});
            hit = cache.end() - 1;
            ++computed;
          } else {
            ++reused;
          }
          const CachedOp& cached = *hit;
          row.errors.push_back(reference::max_relative_error(to_floats(ran.at(tensor)), cached.value.data));
        }
      }
      progress.done(fmt::format("output error {:.3e}", row.errors.front()));
      mix_rows[i] = row;
    }
    if (reports) {
      // The bounds: the naive mix's from the error model, every other's from the naive errors.
      const std::vector<double> naive_errors = mix_rows.front().errors;
      for (size_t i = 0; i < mixes.size(); ++i) {
        Row& row = mix_rows[i];
        for (size_t m = 0; m < measures.size(); ++m) {
          const double bound = i == 0 ? naive_bound : reference::accuracy_bound(naive_errors[m], config.dtype);
          row.bounds.push_back(bound);
          row.ok = row.ok && std::isfinite(row.errors[m]) && row.errors[m] <= bound;
        }
        all_ok = all_ok && row.ok;
        rows.push_back(row);
      }
    }
    if (!options.dump.empty() && device == devices.front() && &run == &runs.front())
      session.write_dump(ctx, workload, options.dump, reports);
  };
  for (const Device& device : devices) {
    for (const WorkloadConfig& run : runs) {
      for_each_local_rank(run, device, [&](Context& ctx, Communicator* group) { check_run(ctx, device, run, group); });
    }
  }
  if (per_op)
    progress.note(fmt::format("float64 last-layer op references: {} computed, {} reused (the same inputs, bit for bit)",
                              computed, reused));

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
