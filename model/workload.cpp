#include "model/workload.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "ops/softmax/softmax.h"
#include "runtime/error.h"
#include "model/init.h"
#include "model/safetensors.h"

namespace blockscope {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

namespace {

// The [B, H, Sq, Sk] score buffers a path allocates (the path table's count).
double score_copies(ops::AttentionPath path) { return ops::path_info(path).score_buffers; }

bool any_fused_gated(const ModelConfig& model, const std::vector<PathConfig>& paths) {
  if (!model.gated) return false;
  for (const PathConfig& p : paths)
    if (p.mlp == ops::MlpPath::fused) return true;
  return false;
}

}  // namespace

MemoryEstimate estimate_memory(const WorkloadConfig& config, const std::vector<PathConfig>& paths) {
  MemoryEstimate estimate;
  const double es = static_cast<double>(dtype_size(config.dtype));
  const ModelConfig& m = config.model;
  const double B = static_cast<double>(config.input.batch), S = static_cast<double>(config.input.seq_len);
  const double T = B * S, d = static_cast<double>(m.d_model), f = static_cast<double>(m.d_ff);
  const double H = static_cast<double>(m.n_heads), Hkv = static_cast<double>(m.n_kv_heads),
               D = static_cast<double>(m.head_dim);
  double worst_score_copies = 0;
  for (const PathConfig& p : paths) worst_score_copies = std::max(worst_score_copies, score_copies(p.attention));
  const double packed = any_fused_gated(m, paths) ? 2.0 * f * d : 0.0;

  double weights = 0, activations = 0, scores = 0;
  switch (config.kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: {
      const double layers = config.kind == WorkloadKind::stack ? static_cast<double>(m.n_layers) : 1.0;
      double per_layer = 0;
      for (const WeightSpec& spec : block_weight_specs(m, 0)) per_layer += static_cast<double>(shape_numel(spec.shape));
      weights = layers * (per_layer + packed);
      // input, output, ping/pong, then the block buffers (block.h) and the MLP's intermediates
      // (at most three [T, d_ff] tensors: gate, up and their product).
      const double buffers = T * d * 5 + T * (H + 2 * Hkv) * D * 2 + T * H * D * 2;
      activations = T * d * 4 + buffers + 3 * T * f;
      scores = worst_score_copies * B * H * S * S;
      break;
    }
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear: {
      const double M = static_cast<double>(config.shape.m), N = static_cast<double>(config.shape.n),
                   K = static_cast<double>(config.shape.k);
      weights = K * N + N;
      activations = M * K + 2 * M * N;
      break;
    }
    case WorkloadKind::mlp:
      weights = (m.gated ? 3 : 2) * f * d + (m.bias ? f + d : 0) + packed;
      activations = 2 * T * d + 3 * T * f;
      break;
    case WorkloadKind::attention:
      activations = 2 * B * H * S * D + 2 * B * Hkv * S * D;
      scores = worst_score_copies * B * H * S * S;
      break;
    case WorkloadKind::softmax:
      activations = 2.0 * static_cast<double>(config.shape.m) * static_cast<double>(config.shape.n);
      break;
  }
  estimate.weights = static_cast<size_t>(weights * es);
  estimate.activations = static_cast<size_t>(activations * es);
  estimate.scores = static_cast<size_t>(scores * es);
  return estimate;
}

namespace {

// Replaces the seeded input with the tensor "input" of a safetensors file (same shape).
void load_input(Tensor& input, const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  const SafetensorsEntry* entry = file.find("input");
  if (entry == nullptr) throw InputError(path + ": input.file has no tensor named 'input'");
  if (entry->shape != input.shape()) {
    throw InputError(path + ": tensor 'input' has shape " + shape_str(entry->shape) + ", but the workload's input is " +
                     shape_str(input.shape()) + " (check input.batch, input.seq_len and model.d_model)");
  }
  Context host(Device::cpu());
  from_floats(input, to_floats(tensor_from_entry(host, *entry)));
}

}  // namespace

Workload::Workload(Context& ctx, const WorkloadConfig& config, const std::vector<PathConfig>& paths)
    : ctx_(ctx), config_(config), paths_(config.paths) {
  std::vector<PathConfig> all = paths;
  if (all.empty()) all.push_back(config.paths);
  memory_ = estimate_memory(config, all);
  const size_t available = ctx.backend().memory_available();
  if (memory_.total() > available) {
    std::string advice;
    const bool materialises = memory_.scores > 0;
    if (materialises) {
      advice = "; the attention scores [B, H, S, S] alone take " + format_bytes(static_cast<double>(memory_.scores)) +
               ": use paths.attention: flash (it keeps no S x S matrix) and drop naive variants from compare, or";
    }
    throw InputError("workload '" + (config.name.empty() ? config.source : config.name) + "' needs about " +
                     format_bytes(static_cast<double>(memory_.total())) + " (weights " +
                     format_bytes(static_cast<double>(memory_.weights)) + ", activations " +
                     format_bytes(static_cast<double>(memory_.activations)) + ", attention scores " +
                     format_bytes(static_cast<double>(memory_.scores)) + ") but " + ctx.device().str() + " has only " +
                     format_bytes(static_cast<double>(available)) + " available" + advice +
                     (materialises ? " " : "; ") + "reduce input.batch / input.seq_len (or the model size)");
  }

  const DType dtype = config.dtype;
  const uint64_t seed = config.seed;
  const ModelConfig& m = config.model;
  // Inputs use their own streams ("input", "a", ...), so they never repeat a weight's numbers.
  switch (config.kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: {
      const int64_t layers = config.kind == WorkloadKind::stack ? m.n_layers : 1;
      std::vector<WeightSpec> specs;
      for (int64_t i = 0; i < layers; ++i) {
        std::vector<WeightSpec> layer = block_weight_specs(m, i);
        specs.insert(specs.end(), layer.begin(), layer.end());
      }
      if (config.weights.init == WeightInit::file) {
        load_weights(ctx, specs, m, dtype, config.weights.file, config.weights.layer, weights_);
      } else {
        init_weights(ctx, specs, dtype, seed, config.weights.init, weights_);
      }
      const Shape shape{config.input.batch, config.input.seq_len, m.d_model};
      input_ = init::normal_tensor(ctx, "input", shape, dtype, seed, 0.0f, 1.0f);
      output_ = ctx.empty(shape, dtype);
      stack_ = std::make_unique<BlockStack>(ctx, m, dtype, weights_, layers, config.input.batch, config.input.seq_len);
      for (const PathConfig& p : all) stack_->prepare(ctx, p);
      named_.emplace_back("input", input_);
      for (const auto& item : weights_.items()) named_.push_back(item);
      break;
    }
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear: {
      const int64_t M = config.shape.m, N = config.shape.n, K = config.shape.k;
      const bool linear = config.kind == WorkloadKind::linear;
      // Weights N(0, 1/K) keep outputs of order one; inputs N(0, 1) as torch.randn.
      const float w_std = 1.0f / std::sqrt(static_cast<float>(K));
      a_ = init::normal_tensor(ctx, linear ? "input" : "a", {M, K}, dtype, seed, 0.0f, 1.0f);
      b_ = init::normal_tensor(ctx, linear ? "weight" : "b", linear ? Shape{N, K} : Shape{K, N}, dtype, seed, 0.0f, w_std);
      c_ = init::normal_tensor(ctx, linear ? "bias" : "c", {N}, dtype, seed, 0.0f, 1.0f);
      output_ = ctx.empty({M, N}, dtype);
      named_ = {{linear ? "input" : "a", a_}, {linear ? "weight" : "b", b_}, {linear ? "bias" : "c", c_}};
      break;
    }
    case WorkloadKind::mlp: {
      const int64_t T = config.input.batch * config.input.seq_len, d = m.d_model, f = m.d_ff;
      input_ = init::normal_tensor(ctx, "input", {T, d}, dtype, seed, 0.0f, 1.0f);
      output_ = ctx.empty({T, d}, dtype);
      const float std_in = 1.0f / std::sqrt(static_cast<float>(d)), std_out = 1.0f / std::sqrt(static_cast<float>(f));
      mlp_.gated = m.gated;
      mlp_.activation = m.activation;
      mlp_.layout = ops::WeightLayout::out_in;
      named_.emplace_back("input", input_);
      auto add = [&](const std::string& name, Tensor& slot, const Shape& shape, float std) {
        slot = init::normal_tensor(ctx, name, shape, dtype, seed, 0.0f, std);
        named_.emplace_back(name, slot);
      };
      if (m.gated) {
        add("mlp.gate_proj.weight", mlp_.gate_weight, {f, d}, std_in);
        add("mlp.up_proj.weight", mlp_.up_weight, {f, d}, std_in);
        add("mlp.down_proj.weight", mlp_.down_weight, {d, f}, std_out);
        if (any_fused_gated(m, all)) ops::pack_gate_up(ctx, mlp_);
      } else {
        add("mlp.up_proj.weight", mlp_.fc_weight, {f, d}, std_in);
        if (m.bias) add("mlp.up_proj.bias", mlp_.fc_bias, {f}, 0.02f);
        add("mlp.down_proj.weight", mlp_.proj_weight, {d, f}, std_out);
        if (m.bias) add("mlp.down_proj.bias", mlp_.proj_bias, {d}, 0.02f);
      }
      break;
    }
    case WorkloadKind::attention: {
      const int64_t B = config.input.batch, S = config.input.seq_len;
      q_ = init::normal_tensor(ctx, "q", {B, m.n_heads, S, m.head_dim}, dtype, seed, 0.0f, 1.0f);
      k_ = init::normal_tensor(ctx, "k", {B, m.n_kv_heads, S, m.head_dim}, dtype, seed, 0.0f, 1.0f);
      v_ = init::normal_tensor(ctx, "v", {B, m.n_kv_heads, S, m.head_dim}, dtype, seed, 0.0f, 1.0f);
      output_ = ctx.empty({B, m.n_heads, S, m.head_dim}, dtype);
      named_ = {{"q", q_}, {"k", k_}, {"v", v_}};
      break;
    }
    case WorkloadKind::softmax: {
      // Logits of attention-like spread (std 2), so the max subtraction matters.
      input_ = init::normal_tensor(ctx, "input", {config.shape.m, config.shape.n}, dtype, seed, 0.0f, 2.0f);
      output_ = ctx.empty({config.shape.m, config.shape.n}, dtype);
      named_ = {{"input", input_}};
      break;
    }
  }
  if (!config.input.file.empty()) load_input(input_, config.input.file);
}

void Workload::set_paths(const PathConfig& paths) {
  if (stack_) stack_->prepare(ctx_, paths);
  if (config_.kind == WorkloadKind::mlp && mlp_.gated && paths.mlp == ops::MlpPath::fused &&
      !mlp_.gate_up_weight.defined())
    ops::pack_gate_up(ctx_, mlp_);
  paths_ = paths;
}

void Workload::forward() {
  switch (config_.kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: stack_->forward(ctx_, input_, output_, paths_); break;
    case WorkloadKind::matmul_add: ops::matmul_add(ctx_, a_, b_, c_, output_, paths_.linear); break;
    case WorkloadKind::linear: ops::linear(ctx_, a_, b_, c_, output_, paths_.linear, ops::WeightLayout::out_in); break;
    case WorkloadKind::mlp: ops::mlp(ctx_, input_, mlp_, output_, paths_.mlp); break;
    case WorkloadKind::attention: {
      const float scale = 1.0f / std::sqrt(static_cast<float>(config_.model.head_dim));
      ops::attention(ctx_, q_, k_, v_, output_, paths_.attention, config_.model.causal, scale);
      break;
    }
    case WorkloadKind::softmax: ops::softmax(ctx_, input_, output_); break;
  }
}

std::vector<std::pair<std::string, Tensor>> Workload::dump_tensors() const {
  std::vector<std::pair<std::string, Tensor>> tensors = named_;
  tensors.emplace_back("output", output_);
  return tensors;
}

std::map<std::string, std::string> Workload::dump_metadata() const {
  const ModelConfig& m = config_.model;
  nlohmann::json meta;
  meta["workload"] = workload_kind_name(config_.kind);
  meta["family"] = family_name(m.family);
  meta["d_model"] = m.d_model;
  meta["n_heads"] = m.n_heads;
  meta["n_kv_heads"] = m.n_kv_heads;
  meta["head_dim"] = m.head_dim;
  meta["d_ff"] = m.d_ff;
  // Layers actually run (a block runs one, whatever the model's depth).
  meta["n_layers"] = config_.kind == WorkloadKind::stack ? m.n_layers : 1;
  meta["norm_eps"] = m.norm_eps;
  meta["rope_theta"] = m.rope_theta;
  meta["norm"] = norm_name(m.norm);
  meta["activation"] = ops::activation_name(m.activation);
  meta["gated"] = m.gated;
  meta["bias"] = m.bias;
  meta["rope"] = m.rope;
  meta["causal"] = m.causal;
  meta["dtype"] = dtype_name(config_.dtype);
  meta["batch"] = config_.input.batch;
  meta["seq_len"] = config_.input.seq_len;
  meta["paths"] = paths_str(paths_);
  if (!is_block_workload(config_.kind)) {
    meta["m"] = config_.shape.m;
    meta["n"] = config_.shape.n;
    meta["k"] = config_.shape.k;
  }
  return {{"blockscope", meta.dump()}};
}

double Workload::flops_per_forward() const {
  const ModelConfig& m = config_.model;
  const double B = static_cast<double>(config_.input.batch), S = static_cast<double>(config_.input.seq_len);
  const double T = B * S, d = static_cast<double>(m.d_model), f = static_cast<double>(m.d_ff),
               HD = static_cast<double>(m.n_heads * m.head_dim), KVD = static_cast<double>(m.n_kv_heads * m.head_dim);
  // Attention FLOPs as ops::attention_flops counts them: 4·B·H·S²·D, halved when causal.
  const double attention = 4.0 * B * static_cast<double>(m.n_heads) * S * S * static_cast<double>(m.head_dim) *
                           (m.causal ? 0.5 : 1.0);
  switch (config_.kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: {
      const double layers = config_.kind == WorkloadKind::stack ? static_cast<double>(m.n_layers) : 1.0;
      const double projections = 2.0 * T * d * (HD + 2 * KVD) + 2.0 * T * HD * d;
      const double mlp = 2.0 * T * d * f * (m.gated ? 3 : 2);
      return layers * (projections + attention + mlp);
    }
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear:
      return 2.0 * static_cast<double>(config_.shape.m) * static_cast<double>(config_.shape.n) *
             static_cast<double>(config_.shape.k);
    case WorkloadKind::mlp: return 2.0 * T * d * f * (m.gated ? 3 : 2);
    case WorkloadKind::attention: return attention;
    case WorkloadKind::softmax: return 0;
  }
  return 0;
}

}  // namespace blockscope
