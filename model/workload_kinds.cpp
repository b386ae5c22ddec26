// One class per workload kind: memory estimate, FLOPs, allocation (seeded init: each tensor
// has its own stream, so inputs never repeat a weight's numbers) and the forward.
#include <algorithm>
#include <cmath>
#include <map>

#include "model/fp8_layer.h"
#include "model/init.h"
#include "model/step_graph.h"
#include "model/tensor_parallel.h"
#include "model/workload.h"
#include "ops/attention/attention.h"
#include "ops/decode_attention/decode_attention.h"
#include "ops/decode_step/decode_step.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/common/flops.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "ops/softmax/softmax.h"
#include "profiler/scope.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope {
namespace {

bool any_fused_gated(const ModelConfig& model, const std::vector<PathConfig>& paths) {
  if (!model.gated) return false;
  for (const PathConfig& p : paths)
    if (p.mlp == ops::MlpPath::fused) return true;
  return false;
}

// The [B, H, S, S] score buffers of the worst attention path among `paths` (the path table).
double worst_score_elements(const WorkloadConfig& config, const std::vector<PathConfig>& paths) {
  double buffers = 0;
  for (const PathConfig& p : paths) buffers = std::max(buffers, double(ops::path_info(p.attention).score_buffers));
  const double B = double(config.input.batch), S = double(config.input.seq_len), H = double(config.model.n_heads);
  return buffers * B * H * S * S;
}

// The largest MLP scratch of `paths` (ops::mlp_scratch_elements).
double worst_mlp_scratch(const ModelConfig& m, int64_t rows, const std::vector<PathConfig>& paths) {
  double worst = 0;
  for (const PathConfig& p : paths) worst = std::max(worst, double(ops::mlp_scratch_elements(rows, m.d_ff, m.gated, p.mlp)));
  return worst;
}

double shape_elements(const std::vector<BufferSpec>& specs) {
  double total = 0;
  for (const BufferSpec& spec : specs) total += static_cast<double>(shape_numel(spec.shape));
  return total;
}

MemoryEstimate in_bytes(const WorkloadConfig& config, double weights, double activations, double scores) {
  const double es = static_cast<double>(dtype_size(config.dtype));
  return MemoryEstimate{static_cast<size_t>(weights * es), static_cast<size_t>(activations * es),
                        static_cast<size_t>(scores * es)};
}

// The weights of `layers` transformer layers, seeded or from the config's file.
void load_layer_weights(Context& ctx, const WorkloadConfig& config, int64_t layers, WeightSet& weights) {
  std::vector<WeightSpec> specs;
  for (int64_t i = 0; i < layers; ++i) {
    std::vector<WeightSpec> layer = block_weight_specs(config.model, i);
    specs.insert(specs.end(), layer.begin(), layer.end());
  }
  if (config.weights.init == WeightInit::file) {
    load_weights(ctx, specs, config.model, config.dtype, config.weights.file, config.weights.layer, weights);
  } else {
    init_weights(ctx, specs, config.dtype, config.seed, config.weights.init, weights);
  }
  // Loaded: read-only from here, so a GEMM library may keep a packed copy of each.
  for (const auto& [name, weight] : weights.items()) weight.storage()->set_read_only();
}

// The FP8 copies `layers` blocks make, in bytes (0 without FP8): each 2-D weight's codes (1 byte
// each) and its scales -- one f32 per output row for weight-only FP8 (precision.weights), one per
// tensor for FP8 GEMMs (precision.gemm), which also keep each GEMM input's codes for `tokens`
// rows (the normed input, the heads, the MLP's input and hidden activation).
double fp8_copy_bytes(const WorkloadConfig& config, int64_t layers, int64_t tokens) {
  const PrecisionConfig& p = config.precision;
  if (!p.fp8() && !p.weight_only()) return 0.0;
  const ModelConfig& m = config.model;
  const bool in_out = m.family == ModelFamily::gpt2;  // Conv1D weights are [in, out]
  double per_layer = 0;
  for (const WeightSpec& spec : block_weight_specs(m, 0)) {
    if (spec.shape.size() != 2) continue;
    const double out_rows = double(spec.shape[in_out ? 1 : 0]);
    per_layer += double(spec.shape[0]) * double(spec.shape[1]) + 4.0 * (p.weight_only() ? out_rows : 1.0);
  }
  if (p.fp8()) per_layer += double(tokens) * double(2 * m.d_model + m.n_heads * m.head_dim + m.d_ff);
  return double(layers) * per_layer;
}

// block and stack: n_layers transformer blocks (model/block.h).
class BlockRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  int64_t layers() const { return config_.kind == WorkloadKind::stack ? config_.model.n_layers : 1; }
  int64_t tokens() const { return config_.input.batch * config_.input.seq_len; }

  MemoryEstimate memory(const std::vector<PathConfig>& paths) const override {
    const ModelConfig& m = config_.model;
    const double per_layer = layer_parameters(m);
    const double packed = any_fused_gated(m, paths) ? 2.0 * double(m.d_ff) * double(m.d_model) : 0.0;
    // input and output, the stack's own buffers, the MLP's scratch.
    const double io = 2.0 * double(tokens()) * double(m.d_model);
    const double buffers = shape_elements(stack_buffer_specs(m, layers(), config_.input.batch, config_.input.seq_len));
    // Tensor parallelism: every rank keeps the whole weights (the oracle's) and its shard;
    // sequence parallelism adds the layers' two shared [T/N, d] row buffers (Block::split_sequence).
    const double ranks = double(config_.parallel.tensor);
    const double weights = double(layers()) * (per_layer + packed) * (ranks > 1 ? 1.0 + 1.0 / ranks : 1.0);
    const double rows = config_.parallel.sequence_parallel ? 2.0 * double(tokens()) / ranks * double(m.d_model) : 0.0;
    MemoryEstimate estimate = in_bytes(config_, weights, io + buffers + rows + worst_mlp_scratch(m, tokens(), paths),
                                       worst_score_elements(config_, paths));
    estimate.weights += static_cast<size_t>(fp8_copy_bytes(config_, layers(), tokens()));
    return estimate;
  }

  size_t packable_weight_bytes(const std::vector<PathConfig>& paths) const override {
    const ModelConfig& m = config_.model;
    const auto padded = [](int64_t n) { return static_cast<double>((n + 63) / 64 * 64); };
    double per_layer = 0;
    for (const WeightSpec& spec : block_weight_specs(m, 0))
      if (spec.shape.size() == 2) per_layer += padded(spec.shape[0]) * padded(spec.shape[1]);
    if (any_fused_gated(m, paths)) per_layer += padded(2 * m.d_ff) * padded(m.d_model);
    return static_cast<size_t>(double(layers()) * per_layer * static_cast<double>(dtype_size(config_.dtype)));
  }

  double flops() const override {
    const ModelConfig& m = config_.model;
    const int64_t T = tokens(), d = m.d_model, HD = m.n_heads * m.head_dim, KVD = m.n_kv_heads * m.head_dim;
    const double projections = ops::gemm_flops(T, HD + 2 * KVD, d) + ops::gemm_flops(T, d, HD);
    const double attention = ops::attention_flops(config_.input.batch, m.n_heads, config_.input.seq_len,
                                                  config_.input.seq_len, m.head_dim, m.causal);
    // Tensor parallelism: one rank's share (every term splits by heads or d_ff).
    return double(layers()) * (projections + attention + ops::mlp_flops(T, d, m.d_ff, m.gated)) /
           double(config_.parallel.tensor);
  }

  void allocate(Context& ctx, const std::vector<PathConfig>& paths) override {
    const ModelConfig& m = config_.model;
    load_layer_weights(ctx, config_, layers(), weights_);
    const Shape shape{config_.input.batch, config_.input.seq_len, m.d_model};
    input_ = init::normal_tensor(ctx, "input", shape, config_.dtype, config_.seed, 0.0f, 1.0f);
    output_ = ctx.empty(shape, config_.dtype);
    const int ranks = static_cast<int>(config_.parallel.tensor);
    if (ranks > 1) {
      Communicator& group = group_ != nullptr ? *group_ : tensor_parallel_group(ranks);
      BS_CHECK_INPUT(group.size() == ranks, "parallel.tensor = ", ranks, " but the group has ", group.size(), " ranks");
      // This rank's shard of every layer (the whole weights stay the workload's named inputs:
      // the oracle computes the unsplit block).
      shard_weights(ctx, m, layers(), weights_, group.rank(), ranks, shard_);
      stack_ = std::make_unique<BlockStack>(ctx, shard_model(m, ranks), config_.dtype, shard_, layers(),
                                            config_.input.batch, config_.input.seq_len);
      stack_->set_communicator(&group);
      if (config_.parallel.sequence_parallel) stack_->split_sequence(ctx);
    } else {
      stack_ = std::make_unique<BlockStack>(ctx, m, config_.dtype, weights_, layers(), config_.input.batch,
                                            config_.input.seq_len);
      if (config_.precision.fp8()) stack_->use_fp8(ctx, config_.precision);
      if (config_.precision.weight_only()) stack_->use_fp8_weights(ctx, config_.precision.weights);
    }
    for (const PathConfig& p : paths) stack_->prepare(ctx, p);
    named_.emplace_back("input", input_);
    for (const auto& item : weights_.items()) named_.push_back(item);
  }

  void prepare(Context& ctx, const PathConfig& paths) override { stack_->prepare(ctx, paths); }
  void forward(Context& ctx, const PathConfig& paths) override { stack_->forward(ctx, input_, output_, paths); }
  Fp8SaturationCounts fp8_saturation() const override { return stack_->fp8_saturation(); }
  std::vector<std::pair<std::string, Tensor>> intermediates() const override {
    std::vector<std::pair<std::string, Tensor>> out = {{"layer_input", stack_->last_input(input_)},
                                                       {"residual", stack_->last_residual()}};
    for (auto& item : stack_->last_op_tensors()) out.push_back(std::move(item));
    return out;
  }

 private:
  WeightSet weights_;
  WeightSet shard_;  // parallel.tensor > 1: this rank's share of weights_
  std::unique_ptr<BlockStack> stack_;
};

// matmul_add (a [M, K] x b [K, N] + c [N]) and linear (x [M, K], weight [N, K], bias [N]).
class GemmRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  bool is_linear() const { return config_.kind == WorkloadKind::linear; }

  MemoryEstimate memory(const std::vector<PathConfig>&) const override {
    const double M = double(config_.shape.m), N = double(config_.shape.n), K = double(config_.shape.k);
    MemoryEstimate estimate = in_bytes(config_, K * N + N, M * K + 2 * M * N, 0);
    if (config_.precision.fp8()) {  // the FP8 copies: the weight, the input (1 byte each)
      estimate.weights += static_cast<size_t>(K * N);
      estimate.activations += static_cast<size_t>(M * K);
    }
    return estimate;
  }

  double flops() const override { return ops::gemm_flops(config_.shape.m, config_.shape.n, config_.shape.k); }

  void allocate(Context& ctx, const std::vector<PathConfig>&) override {
    const int64_t M = config_.shape.m, N = config_.shape.n, K = config_.shape.k;
    const DType dtype = config_.dtype;
    const uint64_t seed = config_.seed;
    // Weights N(0, 1/K) keep outputs of order one; inputs N(0, 1) as torch.randn.
    const float w_std = 1.0f / std::sqrt(static_cast<float>(K));
    const char* names[3] = {is_linear() ? "input" : "a", is_linear() ? "weight" : "b", is_linear() ? "bias" : "c"};
    a_ = init::normal_tensor(ctx, names[0], {M, K}, dtype, seed, 0.0f, 1.0f);
    b_ = init::normal_tensor(ctx, names[1], is_linear() ? Shape{N, K} : Shape{K, N}, dtype, seed, 0.0f, w_std);
    c_ = init::normal_tensor(ctx, names[2], {N}, dtype, seed, 0.0f, 1.0f);
    output_ = ctx.empty({M, N}, dtype);
    named_ = {{names[0], a_}, {names[1], b_}, {names[2], c_}};
    if (config_.precision.fp8()) fp8_ = Fp8Layer(ctx, b_, M, config_.precision);
  }

  void forward(Context& ctx, const PathConfig& paths) override {
    if (fp8_.defined()) {
      fp8_.forward(ctx, a_, c_, output_);
    } else if (is_linear()) {
      ops::linear(ctx, a_, b_, c_, output_, paths.linear, ops::WeightLayout::out_in);
    } else {
      ops::matmul_add(ctx, a_, b_, c_, output_, paths.linear);
    }
  }

  Fp8SaturationCounts fp8_saturation() const override {
    Fp8SaturationCounts out;
    if (fp8_.defined()) fp8_.add_saturation_counts(out);
    return out;
  }

 private:
  Tensor a_, b_, c_;
  Fp8Layer fp8_;  // precision.gemm FP8 (model/fp8_layer.h)
};

// mlp: one MLP on [T, d_model] tokens, Hugging Face Llama-style names.
class MlpRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  int64_t tokens() const { return config_.input.batch * config_.input.seq_len; }

  MemoryEstimate memory(const std::vector<PathConfig>& paths) const override {
    const ModelConfig& m = config_.model;
    const double d = double(m.d_model), f = double(m.d_ff), T = double(tokens());
    if (config_.precision.fp8()) {  // FP8 copies of the weights and the GEMMs' inputs; gate, up, hidden
      const double weights = (m.gated ? 3 : 2) * f * d;
      MemoryEstimate estimate = in_bytes(config_, weights + (m.bias ? f + d : 0), 2 * T * d + (m.gated ? 3 : 1) * T * f, 0);
      estimate.weights += static_cast<size_t>(weights);
      estimate.activations += static_cast<size_t>((m.gated ? 2 : 1) * T * d + T * f);
      return estimate;
    }
    const double packed = any_fused_gated(m, paths) ? 2.0 * f * d : 0.0;
    return in_bytes(config_, (m.gated ? 3 : 2) * f * d + (m.bias ? f + d : 0) + packed,
                    2 * T * d + worst_mlp_scratch(m, tokens(), paths), 0);
  }

  double flops() const override {
    return ops::mlp_flops(tokens(), config_.model.d_model, config_.model.d_ff, config_.model.gated);
  }

  void allocate(Context& ctx, const std::vector<PathConfig>& paths) override {
    const ModelConfig& m = config_.model;
    const int64_t T = tokens(), d = m.d_model, f = m.d_ff;
    const bool fp8 = config_.precision.fp8();
    const DType dtype = config_.dtype;
    input_ = init::normal_tensor(ctx, "input", {T, d}, dtype, config_.seed, 0.0f, 1.0f);
    output_ = ctx.empty({T, d}, dtype);
    const float std_in = 1.0f / std::sqrt(static_cast<float>(d)), std_out = 1.0f / std::sqrt(static_cast<float>(f));
    mlp_.gated = m.gated;
    mlp_.activation = m.activation;
    mlp_.layout = ops::WeightLayout::out_in;
    named_.emplace_back("input", input_);
    auto add = [&](const std::string& name, Tensor& slot, const Shape& shape, float std) {
      slot = init::normal_tensor(ctx, name, shape, dtype, config_.seed, 0.0f, std);
      named_.emplace_back(name, slot);
    };
    if (m.gated) {
      add("mlp.gate_proj.weight", mlp_.gate_weight, {f, d}, std_in);
      add("mlp.up_proj.weight", mlp_.up_weight, {f, d}, std_in);
      add("mlp.down_proj.weight", mlp_.down_weight, {d, f}, std_out);
      if (any_fused_gated(m, paths) && !fp8) ops::pack_gate_up(ctx, mlp_);
    } else {
      add("mlp.up_proj.weight", mlp_.fc_weight, {f, d}, std_in);
      if (m.bias) add("mlp.up_proj.bias", mlp_.fc_bias, {f}, 0.02f);
      add("mlp.down_proj.weight", mlp_.proj_weight, {d, f}, std_out);
      if (m.bias) add("mlp.down_proj.bias", mlp_.proj_bias, {d}, 0.02f);
    }
    if (fp8) fp8_ = Fp8Mlp(ctx, mlp_, T, dtype, config_.precision);
  }

  void prepare(Context& ctx, const PathConfig& paths) override {
    if (config_.precision.fp8()) return;
    if (mlp_.gated && paths.mlp == ops::MlpPath::fused && !mlp_.gate_up_weight.defined()) ops::pack_gate_up(ctx, mlp_);
  }

  void forward(Context& ctx, const PathConfig& paths) override {
    if (fp8_.defined()) {
      fp8_.forward(ctx, input_, output_);
    } else {
      ops::mlp(ctx, input_, mlp_, output_, paths.mlp);
    }
  }

  Fp8SaturationCounts fp8_saturation() const override {
    Fp8SaturationCounts out;
    if (fp8_.defined()) fp8_.add_saturation_counts(out, "mlp.");
    return out;
  }

 private:
  ops::MlpWeights mlp_;
  Fp8Mlp fp8_;  // precision.gemm FP8 (model/fp8_layer.h)
};

// attention: q [B, H, S, D], k and v [B, Hkv, S, D] seeded N(0, 1).
class AttentionRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  MemoryEstimate memory(const std::vector<PathConfig>& paths) const override {
    const ModelConfig& m = config_.model;
    const double BSD = double(config_.input.batch) * double(config_.input.seq_len) * double(m.head_dim);
    return in_bytes(config_, 0, 2 * double(m.n_heads) * BSD + 2 * double(m.n_kv_heads) * BSD,
                    worst_score_elements(config_, paths));
  }

  double flops() const override {
    const ModelConfig& m = config_.model;
    return ops::attention_flops(config_.input.batch, m.n_heads, config_.input.seq_len, config_.input.seq_len,
                                m.head_dim, m.causal);
  }

  void allocate(Context& ctx, const std::vector<PathConfig>&) override {
    const ModelConfig& m = config_.model;
    const int64_t B = config_.input.batch, S = config_.input.seq_len;
    const DType dtype = config_.dtype;
    q_ = init::normal_tensor(ctx, "q", {B, m.n_heads, S, m.head_dim}, dtype, config_.seed, 0.0f, 1.0f);
    k_ = init::normal_tensor(ctx, "k", {B, m.n_kv_heads, S, m.head_dim}, dtype, config_.seed, 0.0f, 1.0f);
    v_ = init::normal_tensor(ctx, "v", {B, m.n_kv_heads, S, m.head_dim}, dtype, config_.seed, 0.0f, 1.0f);
    output_ = ctx.empty({B, m.n_heads, S, m.head_dim}, dtype);
    named_ = {{"q", q_}, {"k", k_}, {"v", v_}};
  }

  void forward(Context& ctx, const PathConfig& paths) override {
    const float scale = 1.0f / std::sqrt(static_cast<float>(config_.model.head_dim));
    ops::attention(ctx, q_, k_, v_, output_, paths.attention, config_.model.causal, scale);
  }

 private:
  Tensor q_, k_, v_;
};

// softmax over the rows of an [m, n] matrix of attention-like logits.
class SoftmaxRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  MemoryEstimate memory(const std::vector<PathConfig>&) const override {
    return in_bytes(config_, 0, 2.0 * double(config_.shape.m) * double(config_.shape.n), 0);
  }

  double flops() const override { return 0; }

  void allocate(Context& ctx, const std::vector<PathConfig>&) override {
    // Logits of attention-like spread (std 2), so the max subtraction matters.
    const Shape shape{config_.shape.m, config_.shape.n};
    input_ = init::normal_tensor(ctx, "input", shape, config_.dtype, config_.seed, 0.0f, 2.0f);
    output_ = ctx.empty(shape, config_.dtype);
    named_ = {{"input", input_}};
  }

  void forward(Context& ctx, const PathConfig&) override { ops::softmax(ctx, input_, output_); }
};

// decode: the prompts prefilled into a KV cache per layer, then new_tokens steps of one token
// per sequence. The generated tokens' inputs are seeded hidden states ("decode_input"): there
// is no embedding or LM head to choose tokens, and the blocks' cost does not depend on them.
// A ragged batch is prefilled padded to the longest prompt (each sequence's padding rows are
// computed but neither written to the cache nor attended to: causal masking keeps them out of
// the real rows); each decode step then runs every sequence at its own position.
class DecodeRunner final : public WorkloadKindRunner {
 public:
  using WorkloadKindRunner::WorkloadKindRunner;

  const DecodeConfig& decode() const { return config_.decode; }
  int64_t layers() const { return config_.model.n_layers; }
  int64_t batch() const { return decode().batch(); }
  int64_t prompt() const { return decode().longest_prompt(); }
  int64_t steps() const { return decode().new_tokens; }

  ops::KvCacheShape cache_shape() const { return decode_cache_shape(config_); }

  MemoryEstimate memory(const std::vector<PathConfig>& paths) const override {
    const ModelConfig& m = config_.model;
    const double B = double(batch()), P = double(prompt()), T = double(steps()), d = double(m.d_model);
    const double per_layer = layer_parameters(m);
    const double packed = any_fused_gated(m, paths) ? 2.0 * double(m.d_ff) * d : 0.0;
    // Prompts and their prefill output, the step inputs and outputs, both stacks' buffers.
    const double io = 2.0 * B * P * d + 2.0 * T * B * d;
    const double buffers = shape_elements(stack_buffer_specs(m, layers(), batch(), prompt())) +
                           shape_elements(stack_buffer_specs(m, layers(), batch(), 1));
    const double scratch = worst_mlp_scratch(m, batch() * prompt(), paths);
    // The prefill's score buffers, and the naive decode path's [B, H, max_len] scores.
    double decode_scores = 0;
    for (const PathConfig& p : paths)
      if (p.attention == ops::AttentionPath::naive) decode_scores = B * double(m.n_heads) * double(decode().kv_cache.max_len);
    MemoryEstimate estimate = in_bytes(config_, double(layers()) * (per_layer + packed), io + buffers + scratch,
                                       worst_score_elements(config_, paths) + decode_scores);
    estimate.kv_cache = static_cast<size_t>(double(layers()) * cache_shape().bytes(config_.dtype));
    estimate.weights += static_cast<size_t>(fp8_copy_bytes(config_, layers(), batch() * prompt()));  // shared by both stacks
    return estimate;
  }

  double flops() const override {
    const ModelConfig& m = config_.model;
    const int64_t d = m.d_model, HD = m.n_heads * m.head_dim, KVD = m.n_kv_heads * m.head_dim;
    const auto dense = [&](int64_t tokens) {
      return ops::gemm_flops(tokens, HD + 2 * KVD, d) + ops::gemm_flops(tokens, d, HD) +
             ops::mlp_flops(tokens, d, m.d_ff, m.gated);
    };
    // The prefill as run (padded to the longest prompt), then every step.
    double total = dense(batch() * prompt()) +
                   ops::attention_flops(batch(), m.n_heads, prompt(), prompt(), m.head_dim, /*causal=*/true);
    for (int64_t t = 0; t < steps(); ++t) {
      total += dense(batch()) + ops::decode_attention_flops(m.n_heads, m.head_dim, decode().attended(t));
    }
    return double(layers()) * total;
  }

  size_t packable_weight_bytes(const std::vector<PathConfig>& paths) const override {
    WorkloadConfig as_stack = config_;
    as_stack.kind = WorkloadKind::stack;
    return make_workload_runner(as_stack)->packable_weight_bytes(paths);
  }

  void allocate(Context& ctx, const std::vector<PathConfig>& paths) override {
    const ModelConfig& m = config_.model;
    load_layer_weights(ctx, config_, layers(), weights_);
    const int64_t B = batch(), P = prompt(), T = steps(), d = m.d_model;
    input_ = init::normal_tensor(ctx, "input", {B, P, d}, config_.dtype, config_.seed, 0.0f, 1.0f);
    step_input_ = init::normal_tensor(ctx, "decode_input", {T, B, 1, d}, config_.dtype, config_.seed, 0.0f, 1.0f);
    prefill_output_ = ctx.empty({B, P, d}, config_.dtype);
    output_ = ctx.empty({T, B, 1, d}, config_.dtype);
    prefill_ = std::make_unique<BlockStack>(ctx, m, config_.dtype, weights_, layers(), B, P);
    step_ = std::make_unique<BlockStack>(ctx, m, config_.dtype, weights_, layers(), B, 1);
    if (config_.precision.weight_only()) {  // the codes made once, the steps reading the prefill's
      prefill_->use_fp8_weights(ctx, config_.precision.weights);
      step_->use_fp8_weights(ctx, config_.precision.weights, prefill_.get());
    }
    for (const PathConfig& p : paths) prepare(ctx, p);
    // Paged caches hand their pages out in a seeded random order, as an allocator leaves them
    // after sequences come and go: the kernels must follow the block table.
    const ops::KvCacheShape shape = cache_shape();
    const bool paged = shape.layout == ops::KvLayout::paged;
    for (int64_t i = 0; i < layers(); ++i)
      caches_.push_back(ops::make_kv_cache(ctx, shape, config_.dtype, paged ? config_.seed * 1000003 + uint64_t(i) + 1 : 0));
    // Per-sequence indices, uploaded once: prefill starts and counts, then per step t the
    // positions (prompt + t) and lengths attended (prompt + t + 1).
    std::vector<int32_t> prompts, positions, lengths;
    for (int64_t b = 0; b < B; ++b) prompts.push_back(static_cast<int32_t>(decode().prompt_lens[static_cast<size_t>(b)]));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t b = 0; b < B; ++b) {
        positions.push_back(prompts[static_cast<size_t>(b)] + static_cast<int32_t>(t));
        lengths.push_back(prompts[static_cast<size_t>(b)] + static_cast<int32_t>(t) + 1);
      }
    }
    zeros_ = IndexTable(ctx, std::vector<int32_t>(static_cast<size_t>(B), 0), 1, B);
    ones_ = IndexTable(ctx, std::vector<int32_t>(static_cast<size_t>(B), 1), 1, B);
    prompt_lens_ = IndexTable(ctx, prompts, 1, B);
    positions_ = IndexTable(ctx, positions, T, B);
    lengths_ = IndexTable(ctx, lengths, T, B);
    if (uses_step_graph(ctx)) {
      // The step graph's own inputs: the step counter, the step's positions and lengths (bounded
      // by the first and last step's), its input and output rows.
      const auto row = [](const std::vector<int32_t>& all, int64_t t, int64_t cols) {
        return std::vector<int32_t>(all.begin() + t * cols, all.begin() + (t + 1) * cols);
      };
      step_at_ = IndexTable(ctx, {0}, 1, 1);
      step_positions_ = IndexTable::bounded(ctx, row(positions, 0, B), row(positions, T - 1, B), 1, B);
      step_lengths_ = IndexTable::bounded(ctx, row(lengths, 0, B), row(lengths, T - 1, B), 1, B);
      step_x_ = ctx.empty({B, 1, d}, config_.dtype);
      step_y_ = ctx.empty({B, 1, d}, config_.dtype);
    }
    named_.emplace_back("input", input_);
    named_.emplace_back("decode_input", step_input_);
    for (const auto& item : weights_.items()) named_.push_back(item);
  }

  void prepare(Context& ctx, const PathConfig& paths) override {
    prefill_->prepare(ctx, paths);
    step_->prepare(ctx, paths);
  }

  // Regions: "prefill" (time to first token), then "decode" holding one "decode_step" per new
  // token, so the op table's decode_step row is the per-token time. With decode.cuda_graph on a
  // CUDA device each step is one launch of a graph captured on the first step (per paths).
  void forward(Context& ctx, const PathConfig& paths) override {
    {
      profiler::RegionScope phase(ctx, kPrefillRegion);
      prefill_->forward(ctx, input_, prefill_output_, paths, &caches_, zeros_.row(0), prompt_lens_.row(0));
    }
    profiler::RegionScope phase(ctx, kDecodeRegion);
    if (uses_step_graph(ctx)) ops::decode_step_reset(ctx, step_at_);
    for (int64_t t = 0; t < steps(); ++t) {
      // A generation of thousands of tokens is one profiled step: Ctrl-C is answered between tokens.
      if (interrupt_signal() != 0) check_interrupted(("before decode token " + std::to_string(t)).c_str());
      profiler::RegionScope step(ctx, kDecodeStepRegion);
      profiler::NvtxRange nvtx("decode/step." + std::to_string(t));
      if (uses_step_graph(ctx)) {
        StepGraph& graph = step_graph(paths);
        if (!graph.captured()) {
          // Once, eagerly, before the capture: what a capture cannot do happens here — the RoPE
          // table for the bounds' positions is uploaded, GEMMs are planned (and autotuned).
          // Step 0 then runs again from the graph, with the same result.
          graph_step(ctx, paths);
          ops::decode_step_reset(ctx, step_at_);
        }
        graph.run(ctx, [&] { graph_step(ctx, paths); });
        continue;
      }
      Tensor out = output_.select(0, t);
      step_->decode(ctx, step_input_.select(0, t), out, paths, caches_,
                    DecodeStep{positions_.row(t), lengths_.row(t), ones_.row(0)});
    }
  }

  bool uses_step_graph(const Context& ctx) const { return decode().cuda_graph && ctx.device().is_cuda(); }

  // The captured step: its index, positions, lengths and input row picked on the device, every
  // layer, its output row stored and the index advanced.
  void graph_step(Context& ctx, const PathConfig& paths) {
    ops::decode_step_select(ctx, step_at_, positions_, lengths_, step_input_, step_positions_, step_lengths_, step_x_);
    step_->decode(ctx, step_x_, step_y_, paths, caches_,
                  DecodeStep{step_positions_.row(0), step_lengths_.row(0), ones_.row(0)});
    ops::decode_step_commit(ctx, step_at_, step_y_, output_);
  }

  StepGraph& step_graph(const PathConfig& paths) {
    std::unique_ptr<StepGraph>& graph = graphs_[paths_str(paths)];
    if (!graph) graph = std::make_unique<StepGraph>();
    return *graph;
  }

  std::vector<std::pair<std::string, Tensor>> intermediates() const override {
    return {{"prefill_output", prefill_output_}};
  }

 private:
  WeightSet weights_;
  Tensor step_input_;      // [T, B, 1, d]: the new tokens' hidden states, step-major
  Tensor prefill_output_;  // [B, P, d] (rows past a sequence's prompt are padding)
  std::unique_ptr<BlockStack> prefill_, step_;
  std::vector<ops::KvCache> caches_;  // one per layer
  IndexTable zeros_, ones_, prompt_lens_, positions_, lengths_;
  // decode.cuda_graph on CUDA: the step counter (ops/decode_step), the step's bounded positions
  // and lengths, its input and output rows [B, 1, d], and one graph per paths.
  IndexTable step_at_, step_positions_, step_lengths_;
  Tensor step_x_, step_y_;
  std::map<std::string, std::unique_ptr<StepGraph>> graphs_;
};

}  // namespace

ops::KvCacheShape decode_cache_shape(const WorkloadConfig& config) {
  const DecodeConfig& decode = config.decode;
  ops::KvCacheShape shape;
  shape.layout = decode.kv_cache.layout;
  shape.kv_heads = config.model.n_kv_heads;
  shape.head_dim = config.model.head_dim;
  const bool paged = shape.layout == ops::KvLayout::paged;
  shape.page_size = paged ? decode.kv_cache.page_size : decode.kv_cache.max_len;
  // A contiguous sequence holds max_len positions; a paged one the pages that cover max_len when
  // it is given (each sequence's reservation), else those its prompt and new tokens need.
  for (int64_t b = 0; b < decode.batch(); ++b)
    shape.positions.push_back(!paged ? shape.page_size
                                     : decode.kv_cache.max_len_given ? decode.kv_cache.max_len : decode.positions(b));
  return shape;
}

std::unique_ptr<WorkloadKindRunner> make_workload_runner(const WorkloadConfig& config) {
  switch (config.kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: return std::make_unique<BlockRunner>(config);
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear: return std::make_unique<GemmRunner>(config);
    case WorkloadKind::mlp: return std::make_unique<MlpRunner>(config);
    case WorkloadKind::attention: return std::make_unique<AttentionRunner>(config);
    case WorkloadKind::softmax: return std::make_unique<SoftmaxRunner>(config);
    case WorkloadKind::decode: return std::make_unique<DecodeRunner>(config);
  }
  throw Error(ErrorKind::runtime, "make_workload_runner: unknown workload kind");
}

}  // namespace blockscope
