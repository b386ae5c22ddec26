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
// varying fastest), from the path table; MLP paths only where they apply (plain or gated). An
// FP8 GEMM (precision.gemm or .weights) has one path, the config's: with FP8, only attention paths vary.
std::vector<PathConfig> path_mixes(const WorkloadConfig& config) {
  const auto varies = [&](ops::PathOp op) { return !config.precision.fixes_path(op); };
  PathConfig naive = config.paths;
  for (ops::PathOp op : ops::path_ops())
    if (varies(op)) naive.set(op, ops::paths_of(op).front().name);
  std::vector<PathConfig> mixes{naive};
  for (ops::PathOp op : path_ops_for(config.kind)) {
    if (!varies(op)) continue;
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

// One row of check's table: a path mix on a device, its error and bound per measure.
struct CheckRow {
  std::string device, paths;
  std::vector<double> errors, bounds;  // per measure
  bool ok;
};

// blockscope check as named steps: the devices, the plan (mixes, measures, runs, order), every
// mix on every device against the float64 reference, then the table.
class CheckRun {
 public:
  explicit CheckRun(Session& session)
      : session_(session), options_(session.options), format_(session.format()), config_(session.load_config()) {}

  int run() {
    session_.check_outputs(config_, false);
    choose_devices();
    plan();
    Progress progress("check", mixes_.size() * devices_.size() * runs_.size());
    progress_ = &progress;
    for (const Device& device : devices_) {
      for (const WorkloadConfig& run : runs_) {
        for_each_local_rank(run, device, [&](Context& ctx, Communicator* group) { check_on(ctx, device, run, group); });
      }
    }
    if (per_op_)
      progress.note(fmt::format("float64 last-layer op references: {} computed, {} reused (the same inputs, bit for bit)",
                                computed_, reused_));
    print_results();
    return all_ok_ ? 0 : 1;
  }

 private:
  // Tensor parallelism: under mpirun the CPU ranks, one process each; otherwise the GPUs of this
  // process as one group (run_on_gpus: cuda:0 .. cuda:N-1, a thread each).
  void choose_devices() {
    ranks_ = config_.parallel.tensor;
    gpu_group_ = ranks_are_local_gpus(config_);
    if (!options_.device.empty() && options_.device != "auto") {
      devices_.push_back(resolve_device(options_.device));
    } else if (gpu_group_) {
      const int gpus = cuda_available() ? cuda_device_count() : 0;
      BS_CHECK_INPUT(gpus >= ranks_, "parallel.tensor = ", ranks_, " needs ", ranks_,
                     " ranks: one process each (mpirun -np ", ranks_, " blockscope check ... --device cpu) or ", ranks_,
                     " GPUs in this process (", gpus, " present)");
      devices_.push_back(Device::cuda(0));
    } else {
      devices_.push_back(Device::cpu());
      if (cuda_available() && ranks_ == 1)
        for (int i = 0; i < cuda_device_count(); ++i) devices_.push_back(Device::cuda(i));
    }
    // On a GPU a path mix's forward is queued whole: a signal is answered when it ends.
    if (std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.is_cuda(); }))
      set_interrupt_point("after this path mix");
  }

  // A row's device: the GPU group's range, or the one device.
  std::string device_label(const Device& device) const {
    return gpu_group_ && device.is_cuda() ? "cuda:0-" + std::to_string(ranks_ - 1) : device.str();
  }

  void plan() {
    mixes_ = path_mixes(config_);
    // The float64 reference runs on every core this process may use (--threads caps it): it
    // runs between the forwards, never beside them. The forwards too: check measures errors,
    // not times, so no core is kept free for steady steps.
    reference::set_reference_threads(options_.threads);
    if (options_.threads == 0) cpu::set_thread_count(reference::reference_threads());
    check_host_memory(config_, mixes_);
    // The naive path's bound, derived from the workload's shapes and dtype (reference/error_model.h).
    naive_bound_ = reference::workload_error_bound(config_);
    // Blocks and stacks are also measured at each path op of the last layer, on the inputs the
    // run gave it: at the output the rounding of every op before hides a path's own error, at
    // the op where the path differs nothing does. Each measure's name is the path op's. (Not
    // under tensor parallelism: a rank's op tensors are its shard, the reference's the whole.)
    // Nor with FP8 GEMMs: the op measures' bounds are for GEMMs in the run's dtype. (Weight-only
    // FP8 keeps them: the reference computes with the values of its codes.)
    per_op_ = (config_.kind == WorkloadKind::block || config_.kind == WorkloadKind::stack) &&
              config_.parallel.tensor == 1 && !config_.precision.fp8();
    measures_ = {"output"};
    if (per_op_)
      for (const auto& [measure, tensor] : kOpOutputs) measures_.push_back(measure);
    // decode: every path mix on both KV cache layouts (the same seeded inputs and weights, so
    // one reference serves both).
    runs_ = {config_};
    if (config_.kind == WorkloadKind::decode) {
      runs_.clear();
      for (ops::KvLayout layout : {ops::KvLayout::contiguous, ops::KvLayout::paged}) {
        WorkloadConfig run = config_;
        run.decode.kv_cache.layout = layout;
        runs_.push_back(run);
      }
    }
    // The order mixes are run in: the path op that feeds the others varies slowest (linear,
    // then attention, then mlp), so consecutive mixes give the last layer's later ops the same
    // inputs and each float64 op reference is computed once per distinct input (its key: a
    // hash of the inputs' bits). Rows are still reported in `mixes_` order, all-naive first.
    order_.resize(mixes_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    if (!per_op_) return;
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      const auto key = [&](size_t i) {
        return std::make_pair(path_index(ops::PathOp::linear, mixes_[i]), path_index(ops::PathOp::attention, mixes_[i]));
      };
      return key(a) < key(b);
    });
  }

  // One device's (or GPU group's) run of every mix on one rank: `group` its tensor-parallel
  // group (for_each_local_rank); only rank 0 measures and reports, the others run the forwards.
  void check_on(Context& ctx, const Device& device, const WorkloadConfig& run, Communicator* group) {
    const bool reports = group == nullptr || group->rank() == 0;
    if (group != nullptr && reports) engine_ = group->engine();
    session_.apply_run_settings(ctx, run);
    const bool first_run = &device == &devices_.front() && &run == &runs_.front();
    if (first_run && reports) announce_large_workload("check", run);
    Workload workload(ctx, run, mixes_, group);
    const std::string layout =
        run.kind == WorkloadKind::decode ? std::string(",kv_cache=") + ops::kv_layout_name(run.decode.kv_cache.layout) : "";
    if (reports && expected_output_.empty()) compute_reference(workload);
    std::vector<CheckRow> mix_rows(mixes_.size());
    for (size_t i : order_) {
      const std::string label = paths_str(mixes_[i], config_.kind) + layout;
      if (reports) session_.set_activity("checking " + paths_str(mixes_[i], config_.kind) + " on " + device_label(device));
      check_interrupted("between path mixes");
      progress_->start(progress_index_++, device_label(device) + " " + label);
      workload.set_paths(mixes_[i]);
      Tensor out = workload.output();
      fill_nan(out);  // an element the path forgets to write shows up as NaN
      workload.forward();
      ctx.synchronize();
      if (!reports) continue;
      progress_->step(1, per_op_ ? 2 : 1, "forward done; float64 ops");
      mix_rows[i] = measure_mix(workload, device_label(device), label);
      progress_->done(fmt::format("output error {:.3e}", mix_rows[i].errors.front()));
    }
    if (reports) add_bounded_rows(mix_rows);
    if (!options_.dump.empty() && first_run) session_.write_dump(ctx, workload, options_.dump, reports);
  }

  void compute_reference(Workload& workload) {
    for (const auto& [name, tensor] : workload.inputs_and_weights()) named_[name] = reference::from_tensor(tensor);
    reference::blockref::dequantize_fp8_weights(config_, named_);  // weight-only FP8: what the codes stand for
    session_.set_activity("computing the float64 reference of " + std::string(workload_kind_name(config_.kind)));
    const auto started = std::chrono::steady_clock::now();
    progress_->note("computing the float64 reference output (" + std::to_string(reference::reference_threads()) +
                    " threads)");
    expected_output_ = reference::blockref::workload_output(config_, named_).data;
    progress_->note(fmt::format("float64 reference output done in {:.1f} s",
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
  }

  // The errors of the forward just run: at the output, and (blocks, stacks) at each of the last
  // layer's path ops, against float64 op references kept per distinct input.
  CheckRow measure_mix(Workload& workload, const std::string& device, const std::string& label) {
    CheckRow row{device, label, {}, {}, true};
    row.errors.push_back(reference::max_relative_error(to_floats(workload.output()), expected_output_));
    if (!per_op_) return row;
    std::map<std::string, Tensor> ran;  // the last layer's op inputs and outputs, as run
    for (const auto& [name, tensor] : workload.intermediates()) ran[name] = tensor;
    for (const auto& [measure, tensor] : kOpOutputs) {
      reference::blockref::Named op_inputs;
      std::pair<uint64_t, uint64_t> key{0, 0};
      for (const std::string& input : reference::blockref::last_layer_op_inputs(tensor)) {
        op_inputs[input] = reference::from_tensor(ran.at(input));
        key = hash_values(op_inputs[input].data, key);
      }
      std::deque<CachedOp>& cache = op_cache_[tensor];
      auto hit = std::find_if(cache.begin(), cache.end(), [&](const CachedOp& c) { return c.key == key; });
      if (hit == cache.end()) {
        if (cache.size() == kCachedPerOp) cache.pop_front();
        cache.push_back({key, reference::blockref::last_layer_op(config_, named_, op_inputs, tensor)});
        hit = cache.end() - 1;
        ++computed_;
      } else {
        ++reused_;
      }
      row.errors.push_back(reference::max_relative_error(to_floats(ran.at(tensor)), hit->value.data));
    }
    return row;
  }

  // The bounds: the naive mix's from the error model, every other's from the naive errors.
  void add_bounded_rows(std::vector<CheckRow>& mix_rows) {
    const std::vector<double> naive_errors = mix_rows.front().errors;
    for (size_t i = 0; i < mixes_.size(); ++i) {
      CheckRow& row = mix_rows[i];
      for (size_t m = 0; m < measures_.size(); ++m) {
        const double bound = i == 0 ? naive_bound_ : reference::accuracy_bound(naive_errors[m], config_.dtype);
        row.bounds.push_back(bound);
        row.ok = row.ok && std::isfinite(row.errors[m]) && row.errors[m] <= bound;
      }
      all_ok_ = all_ok_ && row.ok;
      rows_.push_back(row);
    }
  }

  profiler::Rows result_table() const {
    profiler::Rows table;
    table.columns = {{"device", "device", true, ""}, {"paths", "paths", true, ""}};
    for (const std::string& measure : measures_) {
      // The first measure keeps the keys check has always printed (scripts read them).
      const std::string prefix = measure == "output" ? "" : measure + "_";
      table.columns.push_back({prefix + "max_rel_error", measure + " error", false, "%.3e"});
      table.columns.push_back({prefix + "bound", "bound", false, "%.3e"});
    }
    table.columns.push_back({"ok", "result", true, ""});
    // Too wide for COLUMNS: the bounds go first (the result says whether each held), then the
    // per-op errors from the last; the output's error stays.
    for (const std::string& measure : measures_)
      table.drop_order.push_back((measure == "output" ? "" : measure + "_") + "bound");
    for (size_t m = measures_.size(); m-- > 1;) table.drop_order.push_back(measures_[m] + "_max_rel_error");
    for (const CheckRow& r : rows_) {
      profiler::Row line{r.device, r.paths};
      for (size_t m = 0; m < measures_.size(); ++m) {
        line.push_back(r.errors[m]);
        line.push_back(r.bounds[m]);
      }
      line.push_back(r.ok);
      table.rows.push_back(line);
    }
    return table;
  }

  void print_results() const {
    profiler::Rows table = result_table();
    if (format_ == profiler::Format::json) {
      nlohmann::json out;
      out["workload"] = config_.name.empty() ? config_.source : config_.name;
      out["dtype"] = dtype_name(config_.dtype);
      out["ok"] = all_ok_;
      out["measures"] = measures_;
      out["results"] = profiler::rows_json(table);
      std::cout << out.dump(2) << "\n";
    } else if (format_ == profiler::Format::csv) {
      std::cout << profiler::render(table, format_);
    } else {
      print_text(table);
    }
  }

  void print_text(profiler::Rows& table) const {
    const size_t ok_column = table.columns.size() - 1;
    for (profiler::Row& row : table.rows) row[ok_column] = row[ok_column].get<bool>() ? "ok" : "FAIL";
    const size_t width = profiler::terminal_width();
    std::ostringstream head;
    head << "check " << (config_.name.empty() ? config_.source : config_.name) << " ("
         << workload_kind_name(config_.kind) << ", " << dtype_name(config_.dtype) << ") against the float64 reference\n";
    head << "rule: naive error <= " << naive_bound_ << " (derived from the workload's sums and "
         << "roundings); every other path <= 2 x naive + " << reference::accuracy_floor(config_.dtype)
         << " (max |out - ref| / max |ref|)\n";
    if (per_op_) {
      head << "measured at the output and at the last layer's attention, linear (its output projection) and mlp ops, "
              "each recomputed in float64 from the inputs the run gave it\n";
    }
    if (config_.parallel.tensor > 1) {
      head << "tensor parallel over " << config_.parallel.tensor << " ranks"
           << (config_.parallel.sequence_parallel ? " with sequence parallelism" : "") << " (" << engine_
           << "): the output rank 0 holds after the last all-reduce against the unsplit block\n";
    }
    profiler::TextLayout layout;
    layout.max_width = width;
    layout.show_all = "a wider COLUMNS shows them";
    std::cout << profiler::wrap_text(head.str(), width) << "\n" << profiler::render(table, format_, layout);
    if (devices_.size() == 1 && devices_[0].is_cpu() && options_.device.empty() && ranks_ == 1) {
      std::printf("\n(no CUDA GPU available: checked the CPU only)\n");
    }
    std::printf("\n%s\n", all_ok_ ? "all paths within the accuracy rule" : "some paths break the accuracy rule");
  }

  struct CachedOp {
    std::pair<uint64_t, uint64_t> key;
    reference::RefTensor value;
  };
  // The last layer's path ops measured in blocks and stacks: measure name, output tensor.
  inline static const std::vector<std::pair<std::string, std::string>> kOpOutputs = {
      {"attention", "attention.out"}, {"linear", "out_proj.out"}, {"mlp", "mlp.out"}};

  Session& session_;
  const Options& options_;
  const profiler::Format format_;
  const WorkloadConfig config_;
  int64_t ranks_ = 1;
  bool gpu_group_ = false;
  std::vector<Device> devices_;
  std::vector<PathConfig> mixes_;
  std::vector<size_t> order_;
  std::vector<WorkloadConfig> runs_;
  bool per_op_ = false;
  std::vector<std::string> measures_;
  double naive_bound_ = 0;
  std::string engine_;  // of the tensor-parallel group, for the header
  reference::blockref::Named named_;  // inputs and weights (identical on every device: seeded init)
  std::vector<double> expected_output_;
  std::map<std::string, std::deque<CachedOp>> op_cache_;  // per op output: the last kCachedPerOp computed
  int reused_ = 0, computed_ = 0;
  Progress* progress_ = nullptr;
  size_t progress_index_ = 0;
  std::vector<CheckRow> rows_;
  bool all_ok_ = true;
};

}  // namespace

int check_command(Session& session) { return CheckRun(session).run(); }

}  // namespace blockscope::cli
