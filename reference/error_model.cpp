#include "reference/error_model.h"

#include <cmath>

namespace blockscope::reference {

double error_bound(const RoundingCount& count, DType dtype) {
  const double u32 = dtype_epsilon(DType::f32), ud = dtype_epsilon(dtype), u8 = dtype_epsilon(DType::fp8_e4m3);
  return kErrorMargin * std::sqrt(u32 * u32 * static_cast<double>(count.f32_terms) +
                                  ud * ud * static_cast<double>(count.stored) + u8 * u8 * static_cast<double>(count.fp8));
}

RoundingCount gemm_roundings(int64_t k, int64_t epilogue_stores) { return {k, 1 + epilogue_stores}; }

RoundingCount softmax_roundings(int64_t n) { return {n + kEvaluationRoundings, 1}; }

RoundingCount attention_roundings(int64_t head_dim, int64_t keys, double largest_score) {
  const auto score_gain = static_cast<int64_t>(std::ceil(largest_score * largest_score));
  RoundingCount count;
  count.f32_terms = head_dim * (1 + score_gain);  // q·k, its error magnified by exp
  count.stored = 1 + score_gain;                  // the stored score, magnified too
  count += softmax_roundings(keys);               // the probabilities (stored once)
  count.f32_terms += keys;                        // Σ p·v
  count.stored += 1;                              // the output
  return count;
}

RoundingCount mlp_roundings(const ModelConfig& m) {
  const int64_t biases = m.bias ? 1 : 0;
  RoundingCount count = gemm_roundings(m.d_model, biases);  // fc, or gate
  if (m.gated) count += gemm_roundings(m.d_model, 1);       // up, and the product with act(gate)
  count += {kEvaluationRoundings, 1};                       // the activation
  count += gemm_roundings(m.d_ff, biases);                  // proj / down
  return count;
}

RoundingCount block_layer_roundings(const ModelConfig& m, int64_t keys) {
  const int64_t d = m.d_model;
  const int64_t norm_terms = (m.norm == NormKind::layernorm ? 2 : 1) * d;  // mean and variance, or the mean square
  const int64_t biases = m.bias ? 1 : 0;
  RoundingCount count;
  count += {norm_terms, 1};                                // input norm
  count += {3 * d, 3 + 3 * biases};                        // q, k and v (an output depends on all three)
  if (m.rope) count += {2 * kEvaluationRoundings, 2};      // rotated q and k (cos and sin in f32)
  count += attention_roundings(m.head_dim, keys);
  count += gemm_roundings(m.n_heads * m.head_dim, biases); // output projection
  count += {0, 1};                                         // residual add
  count += {norm_terms, 1};                                // post-attention norm
  count += mlp_roundings(m);
  count += {0, 1};                                         // residual add
  return count;
}

RoundingCount workload_roundings(const WorkloadConfig& config) {
  const ModelConfig& m = config.model;
  // An FP8 layer: its longest path's four GEMMs (q/k/v, the output projection, the MLP's two),
  // two quantized operands each.
  const int64_t fp8_per_layer = config.precision.fp8() ? 8 : 0;
  switch (config.kind) {
    case WorkloadKind::block: {
      RoundingCount layer = block_layer_roundings(m, config.input.seq_len);
      layer.fp8 = fp8_per_layer;
      return layer;
    }
    case WorkloadKind::stack: {
      const RoundingCount layer = block_layer_roundings(m, config.input.seq_len);
      return {layer.f32_terms * m.n_layers, layer.stored * m.n_layers, fp8_per_layer * m.n_layers};
    }
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear: {  // the GEMM and its bias; an FP8 GEMM's operands quantized
      RoundingCount count = gemm_roundings(config.shape.k, 1);
      if (config.precision.fp8()) count.fp8 = 2;
      return count;
    }
    case WorkloadKind::mlp: {  // FP8: each of the two GEMMs' (gated: of the longest path's) operands
      RoundingCount count = mlp_roundings(m);
      if (config.precision.fp8()) count.fp8 = 4;
      return count;
    }
    case WorkloadKind::attention: return attention_roundings(m.head_dim, config.input.seq_len);
    case WorkloadKind::softmax: return softmax_roundings(config.shape.n);
    case WorkloadKind::decode: {
      // The last step's keys: the longest prompt and every new token.
      const RoundingCount layer =
          block_layer_roundings(m, config.decode.longest_prompt() + config.decode.new_tokens);
      return {layer.f32_terms * m.n_layers, layer.stored * m.n_layers};
    }
  }
  return {};
}

double workload_error_bound(const WorkloadConfig& config) { return error_bound(workload_roundings(config), config.dtype); }

}  // namespace blockscope::reference
