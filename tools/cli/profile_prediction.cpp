// profile --predict: one measured step onto the GPU performance model (profile_prediction.h).
#include "tools/cli/profile_prediction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "ops/attention/attention.h"
#include "ops/catalogue/catalogue.h"
#include "profiler/gpu_model.h"
#include "tools/cli/cost_prediction.h"

namespace blockscope::cli {

namespace {

namespace predict = profiler::predict;
using profiler::OpEvent;

double numel(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

int64_t round_size(double v) { return static_cast<int64_t>(std::llround(v)); }

// The catalogue's call for an op whose kernels the model prices by shape (GEMMs, attention,
// collectives over the profile's ranks), from what the op recorded: its input shapes and FLOPs.
// Other ops: none (priced by their recorded FLOPs and bytes).
std::optional<ops::OpCall> call_of(const OpEvent& e, int ranks) {
  ops::OpCall c;
  c.path = e.path;
  c.dtype = e.dtype;
  const std::vector<Shape>& in = e.input_shapes;
  // The linears: x [..., K] first, M rows of it; N from the FLOPs (2·M·N·K); the bias [N] at its
  // place in the inputs -- linear (x, w, bias), fp8_linear (x, scale_x_inv, w, scale_w_inv, bias,
  // out_scale), fp8_weight_linear (x, w, w_scale, bias).
  const std::map<std::string, size_t> bias_at = {{"linear", 2}, {"fp8_linear", 4}, {"fp8_weight_linear", 3}};
  if (bias_at.count(e.name) && in.size() >= 2 && !in[0].empty()) {
    const int64_t k = in[0].back(), m = round_size(numel(in[0]) / std::max<int64_t>(k, 1));
    if (m <= 0 || k <= 0) return std::nullopt;
    const int64_t n = round_size(e.flops / (2.0 * static_cast<double>(m) * static_cast<double>(k)));
    c.sizes = {{"M", m}, {"K", k}, {"N", n}};
    const size_t b = bias_at.at(e.name);
    c.flags["bias"] = in.size() > b && in[b] == Shape{n};
    return c;
  }
  if (e.name == "batched_matmul" && in.size() >= 2 && in[0].size() >= 2) {
    // a [..., M, K] (batch over the leading dims), b [..., K, N] (or transposed), group = a's
    // batch over b's.
    const int64_t m = in[0][in[0].size() - 2], k = in[0].back();
    const int64_t batch = round_size(numel(in[0]) / (static_cast<double>(m) * static_cast<double>(k)));
    if (m <= 0 || k <= 0 || batch <= 0) return std::nullopt;
    const int64_t n = round_size(e.flops / (2.0 * static_cast<double>(batch * m) * static_cast<double>(k)));
    const int64_t b_matrices = n > 0 ? round_size(numel(in[1]) / (static_cast<double>(k) * static_cast<double>(n))) : 1;
    c.sizes = {{"batch", batch}, {"M", m}, {"K", k}, {"N", n}, {"G", std::max<int64_t>(1, batch / std::max<int64_t>(b_matrices, 1))}};
    return c;
  }
  if (e.name == "attention" && in.size() >= 2 && in[0].size() == 4 && in[1].size() == 4) {
    // q [B, H, Sq, D], k [B, Hkv, Sk, D]; causal when the FLOPs are nearer the causal count
    // (the pairs the mask keeps) than the full one.
    c.sizes = {{"B", in[0][0]}, {"H", in[0][1]}, {"Hkv", in[1][1]}, {"Sq", in[0][2]}, {"Sk", in[1][2]}, {"D", in[0][3]}};
    const auto flops = [&](bool causal) {
      return ops::attention_flops(in[0][0], in[0][1], in[0][2], in[1][2], in[0][3], causal);
    };
    c.flags["causal"] = std::abs(e.flops - flops(true)) < std::abs(e.flops - flops(false));
    return c;
  }
  if ((e.name == "all_reduce" || e.name == "reduce_scatter" || e.name == "all_gather") && !in.empty() && ranks > 1) {
    // N: the whole tensor's elements (all_reduce's and reduce_scatter's input; all_gather's
    // input is one rank's block of it), over the profile's ranks.
    const double n = numel(in[0]) * (e.name == "all_gather" ? ranks : 1);
    c.sizes = {{"N", round_size(n)}, {"ranks", ranks}};
    return c;
  }
  return std::nullopt;
}

// "layer_norm_kernel<float, true, 0>" → "layer_norm_kernel": a counted launch's name as the
// kernel table records it.
std::string base_name(const std::string& name) { return name.substr(0, name.find('<')); }

double sector_bytes(const KernelCounterRecord& r) {
  double sectors = 0;
  for (const char* m : {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                        "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",
                        "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"}) {
    for (const auto& [key, value] : r.metrics)
      if (key == m) sectors += value;
  }
  return 32.0 * sectors;
}

PredictedOp priced_by_shape(const profiler::GpuSpec& gpu, const OpEvent& e, const ops::OpCall& call) {
  const nlohmann::json p = predict_op_cost(gpu, ops::op_spec(e.name), call);
  PredictedOp op;
  op.compute_us = p["compute_us"].get<double>();
  op.memory_us = p["memory_us"].get<double>();
  op.launch_us = p["launch_us"].get<double>();
  op.predicted_us = p["predicted_us"].get<double>();
  double longest = -1;
  for (const nlohmann::json& k : p["predicted_kernels"]) {
    if (k["predicted_us"].get<double>() > longest) {
      longest = k["predicted_us"].get<double>();
      op.bound = k["bound"].get<std::string>();
    }
  }
  return op;
}

// `kernels` kernels sharing the op's FLOPs (CUDA cores) and bytes evenly.
PredictedOp priced_by_traffic(const profiler::GpuSpec& gpu, double flops, double bytes, int kernels) {
  PredictedOp op;
  double longest = -1;
  for (int i = 0; i < kernels; ++i) {
    predict::KernelWork work;
    work.flops = flops / kernels;
    work.unit = profiler::ComputeUnit::cuda_fp32;
    work.dram_bytes = bytes / kernels;
    const predict::KernelPrediction p = predict::predict_kernel(gpu, work);
    op.compute_us += p.compute_us;
    op.memory_us += p.memory_us;
    op.launch_us += p.launch_us;
    op.predicted_us += p.predicted_us;
    if (p.predicted_us > longest) longest = p.predicted_us, op.bound = p.bound;
  }
  return op;
}

}  // namespace

PredictedStep predict_step(const profiler::GpuSpec& gpu, const profiler::Profile& profile,
                           const std::vector<KernelCounterRecord>& counted, bool graph) {
  PredictedStep step;
  step.graph = graph;
  step.target = gpu.name;
  step.description = gpu.description;
  step.model_version = predict::kModelVersion;
  if (profile.ops.empty()) return step;
  int first_step = profile.ops.front().step;
  for (const OpEvent& e : profile.ops) first_step = std::min(first_step, e.step);
  std::vector<bool> has_child(profile.ops.size(), false);
  for (const OpEvent& e : profile.ops)
    if (e.parent >= 0) has_child[static_cast<size_t>(e.parent)] = true;
  // The step's kernels per op, and the counted launches matched to them in order by name
  // (library GEMMs and copies are not counted: they match nothing and are skipped).
  std::map<int, std::vector<size_t>> kernels_of;
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    if (profile.kernels[i].step == first_step) kernels_of[profile.kernels[i].op].push_back(i);
  }
  std::map<size_t, const KernelCounterRecord*> counters_of;  // kernel event → its counted launch
  size_t next = 0;
  for (const auto& [op, kernels] : kernels_of) {
    for (size_t k : kernels) {
      if (next < counted.size() && base_name(counted[next].name) == profile.kernels[k].name) counters_of[k] = &counted[next++];
    }
  }
  // Bytes read from L2 cost this many DRAM bytes' time: traffic beyond the least traffic is
  // re-reads, served at L2 bandwidth.
  const double l2_discount = (gpu.hbm_tbps * gpu.dram_efficiency) / (gpu.l2_tbps * gpu.l2_efficiency);
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const OpEvent& e = profile.ops[i];
    if (e.step != first_step || e.is_region || has_child[i]) continue;
    const auto found = kernels_of.find(static_cast<int>(i));
    const int kernels = found == kernels_of.end() ? 0 : static_cast<int>(found->second.size());
    if (kernels == 0) continue;  // nothing launched (an empty op, a view)
    PredictedOp op;
    const std::optional<ops::OpCall> call = call_of(e, profile.ranks);
    if (call) {
      op = priced_by_shape(gpu, e, *call);
    } else {
      double counted_bytes = 0;
      for (size_t k : found->second) {
        const auto c = counters_of.find(k);
        if (c != counters_of.end()) counted_bytes += sector_bytes(*c->second);
      }
      op = priced_by_traffic(gpu, e.flops, std::max(e.bytes, counted_bytes * l2_discount), kernels);
      op.counted = counted_bytes * l2_discount > e.bytes;  // the counters raised the op's traffic
    }
    if (graph) {  // each kernel a node of the replayed graph: its gap, not an eager launch's
      const double nodes = kernels * gpu.graph_node_us;
      op.predicted_us += nodes - op.launch_us;
      op.launch_us = nodes;
    }
    op.scope = e.scope;
    op.name = e.name;
    op.path = e.path;
    op.kernels = kernels;
    step.launches += kernels;
    step.device_us += op.predicted_us;
    step.busy_us += op.predicted_us - op.launch_us;
    step.ops.push_back(op);
  }
  step.host_us = graph ? kHostLaunchUs : step.launches * kHostLaunchUs + static_cast<double>(step.ops.size()) * kRuntimeOpUs;
  const double last = step.ops.empty() ? 0 : step.ops.back().predicted_us - step.ops.back().launch_us;
  step.step_us = std::max(step.device_us, step.host_us + last);
  step.bound = step.host_us > step.busy_us ? "host" : "device";
  return step;
}

profiler::Rows predicted_op_rows(const PredictedStep& step) {
  using nlohmann::json;
  struct Group {
    std::string name, path, bound;
    int calls = 0, kernels = 0;
    double compute = 0, memory = 0, launch = 0, predicted = 0;
    bool counted = false;
  };
  std::vector<Group> groups;
  for (const PredictedOp& op : step.ops) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.name == op.name && g.path == op.path; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{op.name, op.path, op.bound});
    it->calls += 1, it->kernels += op.kernels;
    it->compute += op.compute_us, it->memory += op.memory_us, it->launch += op.launch_us, it->predicted += op.predicted_us;
    it->counted = it->counted || op.counted;
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.predicted > b.predicted; });
  const auto time = [](size_t index) {
    return [index](const profiler::Row& r) { return profiler::format_time_us(r[index].get<double>()); };
  };
  profiler::Rows rows;
  rows.columns = {{"name", "Name", true},
                  {"path", "Path", true},
                  {"calls", "Calls"},
                  {"kernels", "Kernels"},
                  {"predicted_us", "Predicted", false, "", time(4)},
                  {"pct", "% Step", false, "", [](const profiler::Row& r) { return fmt::format("{:.1f}%", r[5].get<double>()); }},
                  {"compute_us", "Compute", false, "", time(6)},
                  {"memory_us", "Memory", false, "", time(7)},
                  {"launch_us", "Launch", false, "", time(8)},
                  {"bound", "Bound", true},
                  {"bytes_from", "Bytes from", true}};
  for (const Group& g : groups) {
    rows.rows.push_back({json(g.name), json(g.path), json(g.calls), json(g.kernels), json(g.predicted),
                         json(step.device_us > 0 ? 100.0 * g.predicted / step.device_us : 0.0), json(g.compute),
                         json(g.memory), json(g.launch), json(g.bound), json(g.counted ? "counters" : "op record")});
  }
  return rows;
}

std::string predicted_step_line(const PredictedStep& step) {
  const std::string host = step.graph ? fmt::format("one CUDA graph launch, {:g} µs", kHostLaunchUs)
                                      : fmt::format("{:g} µs a launch, {:g} µs an op", kHostLaunchUs, kRuntimeOpUs);
  return fmt::format("Predicted step on {} ({}): {} — device {} for {} kernel{} (busy {}), host {} to launch them "
                     "({}): {}-bound. Predicted, not measured.",
                     step.target, step.model_version, profiler::format_time_us(step.step_us),
                     profiler::format_time_us(step.device_us), step.launches, step.launches == 1 ? "" : "s",
                     profiler::format_time_us(step.busy_us), profiler::format_time_us(step.host_us), host, step.bound);
}

nlohmann::json predicted_step_json(const PredictedStep& step) {
  return {{"target", step.target},
          {"gpu", step.description},
          {"model_version", step.model_version},
          {"note", "predicted, not measured (docs/PREDICTION.md)"},
          {"step_us", step.step_us},
          {"device_us", step.device_us},
          {"busy_us", step.busy_us},
          {"host_us", step.host_us},
          {"launches", step.launches},
          {"launch_mode", step.graph ? "graph" : "eager"},
          {"bound", step.bound},
          {"ops", profiler::rows_json(predicted_op_rows(step))}};
}

}  // namespace blockscope::cli
