#include "model/block.h"

#include <cmath>
#include <string>

#include "ops/activation/activation.h"
#include "ops/all_gather/all_gather.h"
#include "ops/all_reduce/all_reduce.h"
#include "ops/attention/attention.h"
#include "ops/decode_attention/decode_attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/reduce_scatter/reduce_scatter.h"
#include "ops/rope/rope.h"
#include "profiler/scope.h"
#include "runtime/error.h"

namespace blockscope {

Block::Block(Context& ctx, const ModelConfig& model, DType dtype, const WeightSet& weights, int64_t layer,
             int64_t batch, int64_t seq_len, const Block* buffers_of)
    : model_(model), layer_(layer), batch_(batch), seq_(seq_len) {
  const std::string p = layer_prefix(model.family, layer);
  if (model.family == ModelFamily::gpt2) {
    norm1_w_ = weights.at(p + "ln_1.weight");
    norm1_b_ = weights.at(p + "ln_1.bias");
    qkv_w_ = weights.at(p + "attn.c_attn.weight");
    qkv_b_ = weights.at(p + "attn.c_attn.bias");
    o_w_ = weights.at(p + "attn.c_proj.weight");
    o_b_ = weights.at(p + "attn.c_proj.bias");
    norm2_w_ = weights.at(p + "ln_2.weight");
    norm2_b_ = weights.at(p + "ln_2.bias");
    mlp_.gated = false;
    mlp_.activation = ops::Activation::gelu_tanh;
    mlp_.layout = ops::WeightLayout::in_out;  // Conv1D
    mlp_.fc_weight = weights.at(p + "mlp.c_fc.weight");
    mlp_.fc_bias = weights.at(p + "mlp.c_fc.bias");
    mlp_.proj_weight = weights.at(p + "mlp.c_proj.weight");
    mlp_.proj_bias = weights.at(p + "mlp.c_proj.bias");
  } else {
    norm1_w_ = weights.at(p + "input_layernorm.weight");
    norm1_b_ = weights.get(p + "input_layernorm.bias");
    q_w_ = weights.at(p + "self_attn.q_proj.weight");
    k_w_ = weights.at(p + "self_attn.k_proj.weight");
    v_w_ = weights.at(p + "self_attn.v_proj.weight");
    o_w_ = weights.at(p + "self_attn.o_proj.weight");
    q_b_ = weights.get(p + "self_attn.q_proj.bias");
    k_b_ = weights.get(p + "self_attn.k_proj.bias");
    v_b_ = weights.get(p + "self_attn.v_proj.bias");
    o_b_ = weights.get(p + "self_attn.o_proj.bias");
    norm2_w_ = weights.at(p + "post_attention_layernorm.weight");
    norm2_b_ = weights.get(p + "post_attention_layernorm.bias");
    mlp_.gated = model.gated;
    mlp_.activation = model.activation;
    mlp_.layout = ops::WeightLayout::out_in;
    if (model.gated) {
      mlp_.gate_weight = weights.at(p + "mlp.gate_proj.weight");
      mlp_.up_weight = weights.at(p + "mlp.up_proj.weight");
      mlp_.down_weight = weights.at(p + "mlp.down_proj.weight");
    } else {
      mlp_.fc_weight = weights.at(p + "mlp.up_proj.weight");
      mlp_.fc_bias = weights.get(p + "mlp.up_proj.bias");
      mlp_.proj_weight = weights.at(p + "mlp.down_proj.weight");
      mlp_.proj_bias = weights.get(p + "mlp.down_proj.bias");
    }
  }
  if (buffers_of != nullptr) {
    const auto source = const_cast<Block*>(buffers_of)->activation_buffers();  // read only
    const auto target = activation_buffers();
    for (size_t i = 0; i < target.size(); ++i) *target[i].second = *source[i].second;
    return;
  }
  for (const BufferSpec& spec : block_buffer_specs(model, batch, seq_len)) {
    bool found = false;
    for (auto& [name, buffer] : activation_buffers()) {
      if (std::string(name) != spec.name) continue;
      *buffer = ctx.empty(spec.shape, dtype);
      found = true;
    }
    BS_CHECK(found, "block_buffer_specs names '", spec.name, "', which is not a Block buffer");
  }
}

std::vector<BufferSpec> block_buffer_specs(const ModelConfig& model, int64_t batch, int64_t seq_len) {
  const int64_t T = batch * seq_len, d = model.d_model, H = model.n_heads, Hkv = model.n_kv_heads,
                D = model.head_dim;
  std::vector<BufferSpec> specs;
  if (model.family == ModelFamily::gpt2) {
    specs.push_back({"qkv", {T, 3 * H * D}});  // H · D = d, except on a tensor-parallel shard
  } else {
    specs.push_back({"q_lin", {T, H * D}});
    specs.push_back({"k_lin", {T, Hkv * D}});
    specs.push_back({"v_lin", {T, Hkv * D}});
  }
  const std::vector<BufferSpec> common = {
      {"normed", {T, d}},
      {"q", {batch, H, seq_len, D}},
      {"k", {batch, Hkv, seq_len, D}},
      {"v", {batch, Hkv, seq_len, D}},
      {"attn_out", {batch, H, seq_len, D}},
      {"merged", {batch, seq_len, H, D}},
      {"proj", {T, d}},
      {"residual", {T, d}},
      {"mlp_out", {T, d}},
  };
  specs.insert(specs.end(), common.begin(), common.end());
  return specs;
}

std::vector<BufferSpec> stack_buffer_specs(const ModelConfig& model, int64_t n_layers, int64_t batch, int64_t seq_len) {
  std::vector<BufferSpec> specs = block_buffer_specs(model, batch, seq_len);
  if (n_layers > 1) specs.push_back({"ping", {batch, seq_len, model.d_model}});
  if (n_layers > 2) specs.push_back({"pong", {batch, seq_len, model.d_model}});
  return specs;
}

std::array<std::pair<const char*, Tensor*>, 13> Block::activation_buffers() {
  return {{{"normed", &normed_},
           {"qkv", &qkv_},
           {"q_lin", &q_lin_},
           {"k_lin", &k_lin_},
           {"v_lin", &v_lin_},
           {"q", &q_},
           {"k", &k_},
           {"v", &v_},
           {"attn_out", &attn_out_},
           {"merged", &merged_},
           {"proj", &proj_},
           {"residual", &residual_},
           {"mlp_out", &mlp_out_}}};
}

size_t Block::buffer_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : const_cast<Block*>(this)->activation_buffers())  // read only
    if (t->defined()) total += t->nbytes();
  return total;
}

void Block::prepare(Context& ctx, const PathConfig& paths) {
  // An FP8 block's MLP (Fp8Mlp) reads the gate and up weights' own FP8 copies, never the pack.
  if (!fp8_gemms_or_weights() && mlp_.gated && paths.mlp == ops::MlpPath::fused && !mlp_.gate_up_weight.defined()) {
    ops::pack_gate_up(ctx, mlp_);
    mlp_.gate_up_weight.storage()->set_read_only();  // a weight like the others
  }
}

void Block::norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) const {
  const float eps = static_cast<float>(model_.norm_eps);
  if (model_.norm == NormKind::layernorm) {
    ops::layer_norm(ctx, x, weight, bias, eps, y);
  } else {
    ops::rms_norm(ctx, x, weight, eps, y);
  }
}

void Block::check_io(const Tensor& x, const Tensor& y, const PathConfig& paths) const {
  BS_CHECK(x.shape() == Shape({batch_, seq_, model_.d_model}), "block input ", x.str(), " expected [", batch_, ", ",
           seq_, ", ", model_.d_model, "]");
  BS_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(), "block output ", y.str(), " vs input ", x.str());
  BS_CHECK(y.storage() != x.storage(), "block output must not alias its input");
  if (!fp8_gemms_or_weights() && mlp_.gated && paths.mlp == ops::MlpPath::fused) {
    BS_CHECK(mlp_.gate_up_weight.defined(), "fused MLP path without prepare(): gate|up weights not packed");
  }
}

void Block::forward(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths, const CacheWrite* write) {
  check_io(x, y, paths);
  const int64_t T = batch_ * seq_, d = model_.d_model;
  profiler::RegionScope layer(ctx, "block." + std::to_string(layer_));
  const Tensor x2d = x.reshape({T, d});
  {
    profiler::RegionScope part(ctx, "attn");
    attention_part(ctx, x2d, paths, write);
  }
  {
    profiler::RegionScope part(ctx, "mlp");
    Tensor y2d = y.reshape({T, d});
    mlp_part(ctx, y2d, paths);
  }
}

void Block::decode(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths, ops::KvCache& cache,
                   const DecodeStep& step) {
  BS_CHECK(seq_ == 1, "Block::decode on a block built for ", seq_, " tokens per sequence (decode takes 1)");
  BS_CHECK(!sequence_parallel_, "Block::decode: sequence parallelism splits a forward's tokens, not a decode step's");
  BS_CHECK(fp8_ == nullptr, "Block::decode: FP8 GEMM blocks (precision.gemm) run prefill forwards only");
  check_io(x, y, paths);
  const int64_t d = model_.d_model;
  profiler::RegionScope layer(ctx, "block." + std::to_string(layer_));
  const Tensor x2d = x.reshape({batch_, d});
  {
    profiler::RegionScope part(ctx, "attn");
    decode_attention_part(ctx, x2d, paths, cache, step);
  }
  {
    profiler::RegionScope part(ctx, "mlp");
    Tensor y2d = y.reshape({batch_, d});
    mlp_part(ctx, y2d, paths);
  }
}

void Block::split_sequence(Context& ctx, bool gather_output, const Block* rows_of) {
  BS_CHECK(comm_ != nullptr, "split_sequence before set_communicator");
  const int64_t T = batch_ * seq_, ranks = comm_->size();
  BS_CHECK(T % ranks == 0, "sequence parallelism: ", ranks, " ranks do not divide ", T, " tokens");
  sequence_parallel_ = true;
  gather_output_ = gather_output;
  if (rows_of != nullptr) {
    BS_CHECK(rows_of->sequence_parallel_, "split_sequence: the block whose rows to share is not split");
    rows_normed_ = rows_of->rows_normed_;
    rows_sum_ = rows_of->rows_sum_;
    return;
  }
  rows_normed_ = ctx.empty({T / ranks, model_.d_model}, normed_.dtype());
  rows_sum_ = ctx.empty({T / ranks, model_.d_model}, normed_.dtype());
}

Tensor Block::my_rows(const Tensor& t2d) const {
  const int64_t rows = t2d.size(0) / comm_->size();
  return t2d.slice(0, comm_->rank() * rows, (comm_->rank() + 1) * rows);
}

void Block::norm_and_gather(Context& ctx, const Tensor& x_rows, const Tensor& weight, const Tensor& bias) {
  norm(ctx, x_rows, weight, bias, rows_normed_);
  ops::all_gather(ctx, rows_normed_, normed_, *comm_);
}

// The FP8 form of the block's GEMMs: gpt2's fused qkv or the q, k, v projections (reading one
// cast of the normed input), the output projection, the MLP.
struct Block::Fp8Gemms {
  PrecisionConfig precision;
  Fp8Weight qkv, q, k, v, o;
  Fp8Input attention_input, heads;
  Fp8Mlp mlp;
};

void Block::use_fp8(Context& ctx, const PrecisionConfig& precision) {
  BS_CHECK(comm_ == nullptr && !sequence_parallel_, "Block::use_fp8: FP8 blocks run on one rank");
  BS_CHECK(fp8_weights_ == nullptr, "Block::use_fp8 after use_fp8_weights: one form of FP8 weights at a time");
  const int64_t T = batch_ * seq_;
  auto f = std::make_shared<Fp8Gemms>();
  f->precision = precision;
  const bool gpt2 = model_.family == ModelFamily::gpt2;
  const ops::WeightLayout layout = gpt2 ? ops::WeightLayout::in_out : ops::WeightLayout::out_in;
  if (gpt2) {
    f->qkv = Fp8Weight(ctx, qkv_w_, precision, layout);
  } else {
    f->q = Fp8Weight(ctx, q_w_, precision, layout);
    f->k = Fp8Weight(ctx, k_w_, precision, layout);
    f->v = Fp8Weight(ctx, v_w_, precision, layout);
  }
  f->o = Fp8Weight(ctx, o_w_, precision, layout);
  f->attention_input = Fp8Input(ctx, normed_.shape(), precision);
  f->heads = Fp8Input(ctx, {T, model_.n_heads * model_.head_dim}, precision);
  f->mlp = Fp8Mlp(ctx, mlp_, T, normed_.dtype(), precision);
  fp8_ = std::move(f);
}

void Block::add_fp8_saturation(Fp8SaturationCounts& out) const {
  if (fp8_ == nullptr) return;
  const std::string prefix = "block." + std::to_string(layer_) + ".";
  add_saturation(out, prefix + "attention.input", fp8_->attention_input);
  add_saturation(out, prefix + "out_proj.input", fp8_->heads);
  fp8_->mlp.add_saturation_counts(out, prefix + "mlp.");
}

// The weight-only FP8 form of the block's weights (gpt2's fused qkv or q, k, v; o; the MLP's).
struct Block::Fp8WeightGemms {
  Fp8RowWeight qkv, q, k, v, o;
  Fp8WeightMlp mlp;
};

void Block::use_fp8_weights(Context& ctx, DType format, const Block* codes_of) {
  BS_CHECK(comm_ == nullptr && !sequence_parallel_, "Block::use_fp8_weights: weight-only FP8 blocks run on one rank");
  BS_CHECK(fp8_ == nullptr, "Block::use_fp8_weights after use_fp8: one form of FP8 weights at a time");
  auto f = std::make_shared<Fp8WeightGemms>();
  std::vector<Fp8RowWeight> mlp_codes;
  if (codes_of != nullptr) {
    BS_CHECK(codes_of->fp8_weights_ != nullptr, "Block::use_fp8_weights: the block to share codes with has none");
    *f = *codes_of->fp8_weights_;  // the codes (shared storage); the MLP's buffers are made below
    mlp_codes = codes_of->fp8_weights_->mlp.weights();
  } else {
    const std::string p = layer_prefix(model_.family, layer_);
    const auto codes = [&](const Tensor& w, const char* name) {
      const bool gpt2 = model_.family == ModelFamily::gpt2;  // Conv1D: [in, out]
      return Fp8RowWeight(ctx, w, format, gpt2 ? ops::WeightLayout::in_out : ops::WeightLayout::out_in, p + name);
    };
    if (model_.family == ModelFamily::gpt2) {
      f->qkv = codes(qkv_w_, "attn.c_attn.weight");
      f->o = codes(o_w_, "attn.c_proj.weight");
    } else {
      f->q = codes(q_w_, "self_attn.q_proj.weight");
      f->k = codes(k_w_, "self_attn.k_proj.weight");
      f->v = codes(v_w_, "self_attn.v_proj.weight");
      f->o = codes(o_w_, "self_attn.o_proj.weight");
    }
    mlp_codes = fp8_mlp_weights(ctx, mlp_, format, p + "mlp.");
  }
  f->mlp = Fp8WeightMlp(ctx, mlp_, std::move(mlp_codes), batch_ * seq_, normed_.dtype());
  fp8_weights_ = std::move(f);
}

size_t Block::fp8_weight_bytes() const {
  if (fp8_weights_ == nullptr) return 0;
  const Fp8WeightGemms& f = *fp8_weights_;
  size_t total = 0;
  for (const Fp8RowWeight* w : {&f.qkv, &f.q, &f.k, &f.v, &f.o})
    if (w->defined()) total += w->nbytes();
  for (const Fp8RowWeight& w : f.mlp.weights()) total += w.nbytes();
  return total;
}

// The q, k, v projections of the normed input (linear, the FP8 GEMMs after one cast, or the
// weight-only FP8 GEMMs).
void Block::project_qkv(Context& ctx, const PathConfig& paths) {
  if (fp8_weights_ != nullptr) {
    const Fp8WeightGemms& f = *fp8_weights_;
    if (model_.family == ModelFamily::gpt2) {
      fp8_weight_gemm(ctx, normed_, f.qkv, qkv_b_, qkv_);
    } else {
      fp8_weight_gemm(ctx, normed_, f.q, q_b_, q_lin_);
      fp8_weight_gemm(ctx, normed_, f.k, k_b_, k_lin_);
      fp8_weight_gemm(ctx, normed_, f.v, v_b_, v_lin_);
    }
    return;
  }
  if (fp8_ != nullptr) {
    Fp8Gemms& f = *fp8_;
    f.attention_input.quantize(ctx, normed_);
    if (model_.family == ModelFamily::gpt2) {
      fp8_gemm(ctx, f.attention_input, f.qkv, qkv_b_, qkv_, false, f.precision);
    } else {
      fp8_gemm(ctx, f.attention_input, f.q, q_b_, q_lin_, false, f.precision);
      fp8_gemm(ctx, f.attention_input, f.k, k_b_, k_lin_, false, f.precision);
      fp8_gemm(ctx, f.attention_input, f.v, v_b_, v_lin_, false, f.precision);
    }
    f.attention_input.finish_step(ctx);
    return;
  }
  if (model_.family == ModelFamily::gpt2) {
    ops::linear(ctx, normed_, qkv_w_, qkv_b_, qkv_, paths.linear, ops::WeightLayout::in_out);
  } else {
    ops::linear(ctx, normed_, q_w_, q_b_, q_lin_, paths.linear, ops::WeightLayout::out_in);
    ops::linear(ctx, normed_, k_w_, k_b_, k_lin_, paths.linear, ops::WeightLayout::out_in);
    ops::linear(ctx, normed_, v_w_, v_b_, v_lin_, paths.linear, ops::WeightLayout::out_in);
  }
}

void Block::attention_part(Context& ctx, const Tensor& x2d, const PathConfig& paths, const CacheWrite* write) {
  const int64_t B = batch_, S = seq_, H = model_.n_heads, Hkv = model_.n_kv_heads, D = model_.head_dim;
  if (sequence_parallel_) {
    norm_and_gather(ctx, my_rows(x2d), norm1_w_, norm1_b_);
  } else {
    norm(ctx, x2d, norm1_w_, norm1_b_, normed_);
  }
  project_qkv(ctx, paths);
  if (model_.family == ModelFamily::gpt2) {
    // One fused projection [T, 3d]; its columns are q | k | v, each split into H heads of D.
    const Tensor split = qkv_.reshape({B, S, 3, H, D});
    Tensor* targets[3] = {&q_, &k_, &v_};
    for (int64_t i = 0; i < 3; ++i) {
      // [B, S, H, D] strided view -> [B, H, S, D] contiguous.
      ops::copy(ctx, split.select(2, i).permute({0, 2, 1, 3}), *targets[i]);
    }
  } else {
    // [T, heads·D] viewed as [B, S, heads, D], permuted to [B, heads, S, D] (strided).
    const Tensor q_view = q_lin_.reshape({B, S, H, D}).permute({0, 2, 1, 3});
    const Tensor k_view = k_lin_.reshape({B, S, Hkv, D}).permute({0, 2, 1, 3});
    const Tensor v_view = v_lin_.reshape({B, S, Hkv, D}).permute({0, 2, 1, 3});
    if (model_.rope) {
      // RoPE reads the strided view and writes the contiguous head layout: no extra copy.
      const float theta = static_cast<float>(model_.rope_theta);
      ops::rope(ctx, q_view, q_, theta, 0);
      ops::rope(ctx, k_view, k_, theta, 0);
    } else {
      ops::copy(ctx, q_view, q_);
      ops::copy(ctx, k_view, k_);
    }
    ops::copy(ctx, v_view, v_);
  }
  if (write != nullptr) ops::kv_cache_write(ctx, k_, v_, *write->cache, write->starts, write->counts);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  ops::attention(ctx, q_, k_, v_, attn_out_, paths.attention, model_.causal, scale);
  // Heads side by side again: [B, H, S, D] -> [B, S, H, D] contiguous = [T, H·D].
  ops::copy(ctx, attn_out_.permute({0, 2, 1, 3}), merged_);
  const Tensor merged2d = merged_.reshape({B * S, H * D});
  project_and_add(ctx, x2d, merged2d, paths);
}

void Block::project_and_add(Context& ctx, const Tensor& x2d, const Tensor& heads2d, const PathConfig& paths) {
  const ops::WeightLayout layout =
      model_.family == ModelFamily::gpt2 ? ops::WeightLayout::in_out : ops::WeightLayout::out_in;
  if (fp8_ != nullptr) {
    fp8_->heads.quantize(ctx, heads2d);
    fp8_gemm(ctx, fp8_->heads, fp8_->o, o_b_, proj_, false, fp8_->precision);
    fp8_->heads.finish_step(ctx);
  } else if (fp8_weights_ != nullptr) {
    fp8_weight_gemm(ctx, heads2d, fp8_weights_->o, o_b_, proj_);
  } else {
    ops::linear(ctx, heads2d, o_w_, o_b_, proj_, paths.linear, layout);
  }
  if (sequence_parallel_) {  // this rank's rows of the sum of every rank's heads' share
    ops::reduce_scatter(ctx, proj_, rows_sum_, *comm_);
    Tensor residual_rows = my_rows(residual_);
    ops::add(ctx, my_rows(x2d), rows_sum_, residual_rows);
    return;
  }
  if (comm_ != nullptr) ops::all_reduce(ctx, proj_, *comm_);  // row-parallel: each rank's heads' share
  ops::add(ctx, x2d, proj_, residual_);
}

void Block::decode_attention_part(Context& ctx, const Tensor& x2d, const PathConfig& paths, ops::KvCache& cache,
                                  const DecodeStep& step) {
  const int64_t B = batch_, H = model_.n_heads, Hkv = model_.n_kv_heads, D = model_.head_dim;
  norm(ctx, x2d, norm1_w_, norm1_b_, normed_);
  // The new token's q [B, H, 1, D] into q_; its k and v [B, Hkv, 1, D] appended to the cache.
  project_qkv(ctx, paths);
  if (model_.family == ModelFamily::gpt2) {
    const Tensor split = qkv_.reshape({B, 1, 3, H, D});
    ops::copy(ctx, split.select(2, 0).permute({0, 2, 1, 3}), q_);
    ops::kv_cache_write(ctx, split.select(2, 1).permute({0, 2, 1, 3}), split.select(2, 2).permute({0, 2, 1, 3}), cache,
                        step.positions, step.ones);
  } else {
    const Tensor q_view = q_lin_.reshape({B, 1, H, D}).permute({0, 2, 1, 3});
    const Tensor k_view = k_lin_.reshape({B, 1, Hkv, D}).permute({0, 2, 1, 3});
    const Tensor v_view = v_lin_.reshape({B, 1, Hkv, D}).permute({0, 2, 1, 3});
    if (model_.rope) {
      // Each sequence at its own position (a ragged batch).
      const float theta = static_cast<float>(model_.rope_theta);
      ops::rope(ctx, q_view, q_, theta, step.positions);
      ops::rope(ctx, k_view, k_, theta, step.positions);
      ops::kv_cache_write(ctx, k_, v_view, cache, step.positions, step.ones);
    } else {
      ops::copy(ctx, q_view, q_);
      ops::kv_cache_write(ctx, k_view, v_view, cache, step.positions, step.ones);
    }
  }
  // One query per sequence: [B, H, 1, D] is [B, H, D], and the output [B, H, D] is already the
  // heads side by side, [B, H·D], for the output projection (no merge copy).
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor out = attn_out_.reshape({B, H, D});
  ops::decode_attention(ctx, q_.reshape({B, H, D}), cache, step.lengths, out, paths.attention, scale);
  project_and_add(ctx, x2d, attn_out_.reshape({B, H * D}), paths);
}

std::vector<std::pair<std::string, Tensor>> Block::op_tensors() const {
  return {{"attention.q", q_},          {"attention.k", k_},       {"attention.v", v_},
          {"attention.out", attn_out_}, {"out_proj.input", merged_}, {"out_proj.out", proj_},
          {"mlp.input", normed_},       {"mlp.out", mlp_out_}};
}

void Block::mlp_part(Context& ctx, Tensor& y2d, const PathConfig& paths) {
  if (sequence_parallel_) {
    const Tensor residual_rows = my_rows(residual_);
    norm_and_gather(ctx, residual_rows, norm2_w_, norm2_b_);
    ops::mlp(ctx, normed_, mlp_, mlp_out_, paths.mlp);
    ops::reduce_scatter(ctx, mlp_out_, rows_sum_, *comm_);  // this rank's rows of every rank's d_ff share
    if (!gather_output_) {  // the next layer reads only these rows
      Tensor y_rows = my_rows(y2d);
      ops::add(ctx, residual_rows, rows_sum_, y_rows);
      return;
    }
    ops::add(ctx, residual_rows, rows_sum_, rows_normed_);
    ops::all_gather(ctx, rows_normed_, y2d, *comm_);
    return;
  }
  norm(ctx, residual_, norm2_w_, norm2_b_, normed_);
  if (fp8_ != nullptr) {
    fp8_->mlp.forward(ctx, normed_, mlp_out_);
  } else if (fp8_weights_ != nullptr) {
    fp8_weights_->mlp.forward(ctx, normed_, mlp_out_);
  } else {
    ops::mlp(ctx, normed_, mlp_, mlp_out_, paths.mlp);
  }
  if (comm_ != nullptr) ops::all_reduce(ctx, mlp_out_, *comm_);  // row-parallel: each rank's d_ff share
  ops::add(ctx, residual_, mlp_out_, y2d);
}

BlockStack::BlockStack(Context& ctx, const ModelConfig& model, DType dtype, const WeightSet& weights, int64_t n_layers,
                       int64_t batch, int64_t seq_len) {
  BS_CHECK(n_layers >= 1, "a stack needs at least one layer");
  blocks_.reserve(static_cast<size_t>(n_layers));
  for (int64_t i = 0; i < n_layers; ++i) {
    // Layers run one after another: one set of activation buffers (the first's) serves them all
    // (reserved above: the first block does not move).
    blocks_.emplace_back(ctx, model, dtype, weights, i, batch, seq_len, i > 0 ? &blocks_.front() : nullptr);
  }
  for (const BufferSpec& spec : stack_buffer_specs(model, n_layers, batch, seq_len)) {
    if (std::string(spec.name) == "ping") ping_ = ctx.empty(spec.shape, dtype);
    if (std::string(spec.name) == "pong") pong_ = ctx.empty(spec.shape, dtype);
  }
}

void BlockStack::prepare(Context& ctx, const PathConfig& paths) {
  for (Block& block : blocks_) block.prepare(ctx, paths);
}

template <typename Layer>
void BlockStack::each_layer(const Tensor& x, Tensor& y, Layer layer) {
  const Tensor* in = &x;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Tensor& out = i + 1 == blocks_.size() ? y : (i % 2 == 0 ? ping_ : pong_);
    layer(blocks_[i], *in, out, i);
    in = &out;
  }
}

void BlockStack::forward(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths,
                         std::vector<ops::KvCache>* caches, IndexView starts, IndexView counts) {
  BS_CHECK(caches == nullptr || caches->size() == blocks_.size(), "BlockStack: ", caches ? caches->size() : 0,
           " caches for ", blocks_.size(), " layers");
  each_layer(x, y, [&](Block& block, const Tensor& in, Tensor& out, size_t i) {
    if (caches == nullptr) return block.forward(ctx, in, out, paths);
    const CacheWrite write{&(*caches)[i], starts, counts};
    block.forward(ctx, in, out, paths, &write);
  });
}

void BlockStack::decode(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths,
                        std::vector<ops::KvCache>& caches, const DecodeStep& step) {
  BS_CHECK(caches.size() == blocks_.size(), "BlockStack: ", caches.size(), " caches for ", blocks_.size(), " layers");
  each_layer(x, y, [&](Block& block, const Tensor& in, Tensor& out, size_t i) {
    block.decode(ctx, in, out, paths, caches[i], step);
  });
}

size_t BlockStack::buffer_bytes() const {
  size_t total = blocks_.front().buffer_bytes();
  if (ping_.defined()) total += ping_.nbytes();
  if (pong_.defined()) total += pong_.nbytes();
  return total;
}

}  // namespace blockscope
