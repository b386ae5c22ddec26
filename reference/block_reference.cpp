#include "reference/block_reference.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/attention_reference.h"
#include "reference/families.h"
#include "reference/fp8_reference.h"
#include "reference/ops_reference.h"
#include "model/weights.h"

namespace blockscope::reference::blockref {

namespace {

const RefTensor& need(const Named& named, const std::string& name) {
  auto it = named.find(name);
  if (it == named.end()) throw std::runtime_error("block reference: tensor '" + name + "' missing");
  return it->second;
}
RefTensor optional(const Named& named, const std::string& name) {
  auto it = named.find(name);
  return it == named.end() ? RefTensor() : it->second;
}

// [T, width] columns [col0, col0 + H·D) as [B, H, S, D].
RefTensor split_heads(const RefTensor& x, int64_t B, int64_t S, int64_t H, int64_t D, int64_t col0) {
  const int64_t width = x.shape[1];
  RefTensor out({B, H, S, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e)
          out.data[((b * H + h) * S + s) * D + e] = x.data[(b * S + s) * width + col0 + h * D + e];
  return out;
}

// [B, H, S, D] -> [B·S, H·D].
RefTensor merge_heads(const RefTensor& x) {
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3];
  RefTensor out({B * S, H * D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e)
          out.data[(b * S + s) * H * D + h * D + e] = x.data[((b * H + h) * S + s) * D + e];
  return out;
}

// The per-op references take an optional bias as a pointer; here an absent weight is an empty
// RefTensor (optional() below).
const RefTensor* present(const RefTensor& t) { return t.numel() > 0 ? &t : nullptr; }

RefTensor linear(const RefTensor& x, const RefTensor& w, const RefTensor& bias, bool w_out_in) {
  return reference::linear(x, w, present(bias), w_out_in);
}

// Layer `layer`'s weight-name prefix ("h.0.", "model.layers.0.").
std::string layer_prefix(const ModelConfig& m, int64_t layer) {
  return (m.family == ModelFamily::gpt2 ? "h." : "model.layers.") + std::to_string(layer) + ".";
}

// The attention output projection on merged heads [T, H·D] -> [T, d] (before the residual).
RefTensor out_proj(const ModelConfig& m, const Named& w, const std::string& p, const RefTensor& merged) {
  if (m.family == ModelFamily::gpt2) {
    return linear(merged, need(w, p + "attn.c_proj.weight"), need(w, p + "attn.c_proj.bias"), false);
  }
  return linear(merged, need(w, p + "self_attn.o_proj.weight"), optional(w, p + "self_attn.o_proj.bias"), true);
}

// The MLP on the normed residual [T, d] -> [T, d] (before the residual).
RefTensor mlp_of(const ModelConfig& m, const Named& w, const std::string& p, const RefTensor& h2) {
  if (m.family == ModelFamily::gpt2) {
    return mlp_plain(h2, need(w, p + "mlp.c_fc.weight"), &need(w, p + "mlp.c_fc.bias"), need(w, p + "mlp.c_proj.weight"),
                     &need(w, p + "mlp.c_proj.bias"), ops::Activation::gelu_tanh, false);
  }
  return m.gated ? mlp_gated(h2, need(w, p + "mlp.gate_proj.weight"), need(w, p + "mlp.up_proj.weight"),
                             need(w, p + "mlp.down_proj.weight"), m.activation, true)
                 : mlp_plain(h2, need(w, p + "mlp.up_proj.weight"), present(optional(w, p + "mlp.up_proj.bias")),
                             need(w, p + "mlp.down_proj.weight"), present(optional(w, p + "mlp.down_proj.bias")),
                             m.activation, true);
}

}  // namespace

RefTensor block_forward(const ModelConfig& config, const Named& w, const RefTensor& x, int64_t layer,
                        RefTensor* residual_out) {
  // gpt2 and llama run as Hugging Face defines them, whatever the config's knobs say.
  const ModelConfig m = with_family_semantics(config);
  const int64_t B = x.shape[0], S = x.shape[1], d = x.shape[2], T = B * S;
  const int64_t H = m.n_heads, Hkv = m.n_kv_heads, D = m.head_dim;
  RefTensor x2d = x;
  x2d.shape = {T, d};
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  RefTensor residual, out;
  if (m.family == ModelFamily::gpt2) {
    const std::string p = layer_prefix(m, layer);
    const RefTensor h = reference::layer_norm(x2d, need(w, p + "ln_1.weight"), &need(w, p + "ln_1.bias"), m.norm_eps);
    const RefTensor qkv = linear(h, need(w, p + "attn.c_attn.weight"), need(w, p + "attn.c_attn.bias"), false);
    const RefTensor q = split_heads(qkv, B, S, H, D, 0), k = split_heads(qkv, B, S, H, D, d),
                    v = split_heads(qkv, B, S, H, D, 2 * d);
    const RefTensor att = reference::attention(q, k, v, true, scale);
    residual = elementwise_add(x2d, out_proj(m, w, p, merge_heads(att)));
    const RefTensor h2 = reference::layer_norm(residual, need(w, p + "ln_2.weight"), &need(w, p + "ln_2.bias"), m.norm_eps);
    out = elementwise_add(residual, mlp_of(m, w, p, h2));
  } else {
    const std::string p = layer_prefix(m, layer);
    auto norm = [&](const RefTensor& in, const std::string& name) {
      return m.norm == NormKind::layernorm
                 ? reference::layer_norm(in, need(w, p + name + ".weight"), present(optional(w, p + name + ".bias")),
                                         m.norm_eps)
                 : reference::rms_norm(in, need(w, p + name + ".weight"), m.norm_eps);
    };
    auto proj = [&](const RefTensor& in, const std::string& name) {
      return linear(in, need(w, p + name + ".weight"), optional(w, p + name + ".bias"), true);
    };
    const RefTensor h = norm(x2d, "input_layernorm");
    RefTensor q = split_heads(proj(h, "self_attn.q_proj"), B, S, H, D, 0);
    RefTensor k = split_heads(proj(h, "self_attn.k_proj"), B, S, Hkv, D, 0);
    const RefTensor v = split_heads(proj(h, "self_attn.v_proj"), B, S, Hkv, D, 0);
    if (m.rope) {
      q = reference::rope(q, m.rope_theta, 0);
      k = reference::rope(k, m.rope_theta, 0);
    }
    const RefTensor att = reference::attention(q, k, v, m.causal, scale);
    residual = elementwise_add(x2d, out_proj(m, w, p, merge_heads(att)));
    const RefTensor h2 = norm(residual, "post_attention_layernorm");
    out = elementwise_add(residual, mlp_of(m, w, p, h2));
  }
  out.shape = {B, S, d};
  if (residual_out != nullptr) {
    *residual_out = residual;
    residual_out->shape = {B, S, d};
  }
  return out;
}

RefTensor decode_forward(const WorkloadConfig& config, const Named& named, RefTensor* prefill) {
  const ModelConfig& m = config.model;
  const RefTensor& prompts = need(named, "input");        // [B, P, d], rows past a prompt are padding
  const RefTensor& tokens = need(named, "decode_input");  // [T, B, 1, d]
  const int64_t B = config.decode.batch(), P = config.decode.longest_prompt(), T = config.decode.new_tokens,
                d = m.d_model;
  RefTensor out({T, B, 1, d});
  if (prefill != nullptr) *prefill = RefTensor({B, P, d});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t prompt = config.decode.prompt_lens[static_cast<size_t>(b)], S = prompt + T;
    // The whole sequence at once: prompt rows, then the tokens' rows.
    RefTensor x({1, S, d});
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < d; ++i)
        x.data[static_cast<size_t>(s * d + i)] =
            s < prompt ? prompts.data[static_cast<size_t>((b * P + s) * d + i)]
                       : tokens.data[static_cast<size_t>(((s - prompt) * B + b) * d + i)];
    for (int64_t layer = 0; layer < m.n_layers; ++layer) x = block_forward(m, named, x, layer);
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < d; ++i) {
        const double v = x.data[static_cast<size_t>(s * d + i)];
        if (s >= prompt) out.data[static_cast<size_t>(((s - prompt) * B + b) * d + i)] = v;
        else if (prefill != nullptr) prefill->data[static_cast<size_t>((b * P + s) * d + i)] = v;
      }
    }
  }
  return out;
}

void dequantize_fp8_weights(const WorkloadConfig& config, Named& named) {
  if (!config.precision.weight_only()) return;
  const Fp8Kind kind = config.precision.weights == DType::fp8_e5m2 ? Fp8Kind::e5m2 : Fp8Kind::e4m3;
  const bool in_out = config.model.family == ModelFamily::gpt2;  // Conv1D weights: [in, out]
  const int64_t layers = config.kind == WorkloadKind::block ? 1 : config.model.n_layers;
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (const WeightSpec& spec : block_weight_specs(config.model, layer)) {
      if (spec.shape.size() != 2) continue;
      auto found = named.find(spec.name);
      if (found == named.end()) throw std::invalid_argument("dequantize_fp8_weights: no weight " + spec.name);
      found->second = row_dequantized(found->second, in_out, kind);
    }
  }
}

RefTensor workload_output(const WorkloadConfig& config, const Named& named) {
  const ModelConfig& m = config.model;
  switch (config.kind) {
    case WorkloadKind::block: return block_forward(m, named, need(named, "input"), 0);
    case WorkloadKind::stack: {
      RefTensor x = need(named, "input");
      for (int64_t i = 0; i < m.n_layers; ++i) x = block_forward(m, named, x, i);
      return x;
    }
    case WorkloadKind::matmul_add: return linear(need(named, "a"), need(named, "b"), need(named, "c"), false);
    case WorkloadKind::linear: return linear(need(named, "input"), need(named, "weight"), need(named, "bias"), true);
    case WorkloadKind::mlp:
      return m.gated ? mlp_gated(need(named, "input"), need(named, "mlp.gate_proj.weight"),
                                 need(named, "mlp.up_proj.weight"), need(named, "mlp.down_proj.weight"), m.activation,
                                 true)
                     : mlp_plain(need(named, "input"), need(named, "mlp.up_proj.weight"),
                                 present(optional(named, "mlp.up_proj.bias")), need(named, "mlp.down_proj.weight"),
                                 present(optional(named, "mlp.down_proj.bias")), m.activation, true);
    case WorkloadKind::attention:
      return reference::attention(need(named, "q"), need(named, "k"), need(named, "v"), m.causal,
                                  1.0 / std::sqrt(static_cast<double>(m.head_dim)));
    case WorkloadKind::softmax: return reference::softmax_rows(need(named, "input"));
    case WorkloadKind::decode: return decode_forward(config, named, nullptr);
  }
  throw std::runtime_error("block reference: unknown workload");
}

RefTensor last_layer_op(const WorkloadConfig& config, const Named& named, const Named& op_inputs,
                        const std::string& output) {
  if (config.kind != WorkloadKind::block && config.kind != WorkloadKind::stack) {
    throw std::runtime_error("block reference: last_layer_ops is for block and stack workloads");
  }
  const ModelConfig m = with_family_semantics(config.model);
  const std::string p = layer_prefix(m, config.kind == WorkloadKind::block ? 0 : m.n_layers - 1);
  if (output == "attention.out") {
    const double scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
    return reference::attention(need(op_inputs, "attention.q"), need(op_inputs, "attention.k"),
                                need(op_inputs, "attention.v"), m.causal, scale);
  }
  if (output == "out_proj.out") {
    RefTensor merged = need(op_inputs, "out_proj.input");
    merged.shape = {merged.numel() / (m.n_heads * m.head_dim), m.n_heads * m.head_dim};
    return out_proj(m, named, p, merged);
  }
  if (output == "mlp.out") {
    RefTensor mlp_input = need(op_inputs, "mlp.input");
    mlp_input.shape = {mlp_input.numel() / m.d_model, m.d_model};
    return mlp_of(m, named, p, mlp_input);
  }
  throw std::runtime_error("block reference: no last-layer op output '" + output + "'");
}

const std::vector<std::string>& last_layer_op_inputs(const std::string& output) {
  static const std::map<std::string, std::vector<std::string>> inputs = {
      {"attention.out", {"attention.q", "attention.k", "attention.v"}},
      {"out_proj.out", {"out_proj.input"}},
      {"mlp.out", {"mlp.input"}}};
  const auto it = inputs.find(output);
  if (it == inputs.end()) throw std::runtime_error("block reference: no last-layer op output '" + output + "'");
  return it->second;
}

Named last_layer_ops(const WorkloadConfig& config, const Named& named, const Named& op_inputs) {
  Named out;
  for (const char* output : {"attention.out", "out_proj.out", "mlp.out"})
    out[output] = last_layer_op(config, named, op_inputs, output);
  return out;
}

}  // namespace blockscope::reference::blockref
