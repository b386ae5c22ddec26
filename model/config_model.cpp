// The model section of a workload config: which keys each workload kind takes, the families'
// fixed knobs (gpt2, llama) and custom's explicit ones, the head counts and their divisibility.
#include "model/config_reader.h"

namespace blockscope::config_reader {

namespace {

// n_heads, n_kv_heads, head_dim with their divisibility rules.
void read_heads(const Section& s, ModelConfig& m) {
  s.require("n_heads", "Hugging Face: num_attention_heads");
  m.n_heads = s.get_int("n_heads", 0, 1);
  m.n_kv_heads = s.get_int("n_kv_heads", m.n_heads, 1);
  if (m.n_heads % m.n_kv_heads != 0) {
    s.fail("n_kv_heads", std::to_string(m.n_kv_heads) + " does not divide n_heads = " + std::to_string(m.n_heads));
  }
  if (s.has("head_dim")) {
    m.head_dim = s.get_int("head_dim", 0, 1);
    if (s.has("d_model")) m.d_model = s.get_int("d_model", 0, 1);
  } else {
    if (!s.has("d_model")) s.require("head_dim", "or d_model, from which head_dim = d_model / n_heads");
    m.d_model = s.get_int("d_model", 0, 1);
    if (m.d_model % m.n_heads != 0) {
      s.fail("n_heads", std::to_string(m.n_heads) + " does not divide d_model = " + std::to_string(m.d_model) +
                            " (set head_dim explicitly if that is intended)");
    }
    m.head_dim = m.d_model / m.n_heads;
  }
}

}  // namespace

ModelConfig read_model(const Reader& reader, const Section& s, WorkloadKind kind) {
  ModelConfig m;
  const std::string kind_name = workload_kind_name(kind);
  const WorkloadSizes sizes = workload_traits(kind).sizes;
  if (sizes != WorkloadSizes::model_and_input && sizes != WorkloadSizes::decode) {
    if (s.node().IsDefined() && !s.node().IsNull()) {
      reader.fail(s.node(), "model",
                  "does not apply to workload " + kind_name + " (it takes shape: {m, n" +
                      (sizes == WorkloadSizes::gemm_shape ? ", k" : "") + "})");
    }
    return m;
  }
  if (kind == WorkloadKind::mlp) {
    for (const char* key : {"family", "n_heads", "n_kv_heads", "head_dim", "n_layers", "norm_eps", "rope_theta", "norm",
                            "rope", "causal"})
      s.reject(key, "does not apply to workload mlp (it takes d_model, d_ff, activation, gated, bias)");
    s.require("d_model");
    s.require("d_ff");
    m.d_model = s.get_int("d_model", 0, 1);
    m.d_ff = s.get_int("d_ff", 0, 1);
    ops::parse_activation(s.get_choice("activation", "gelu_tanh", ops::activation_names(), "activation"), &m.activation);
    m.gated = s.get_bool("gated", false);
    m.bias = s.get_bool("bias", !m.gated);
    if (m.gated && m.bias) s.fail("bias", "gated MLPs have no biases here (set bias: false)");
    return m;
  }
  if (kind == WorkloadKind::attention) {
    for (const char* key : {"family", "d_ff", "n_layers", "norm_eps", "rope_theta", "norm", "activation", "gated",
                            "bias", "rope"})
      s.reject(key, "does not apply to workload attention (it takes n_heads, n_kv_heads, head_dim, d_model, causal)");
    read_heads(s, m);
    m.causal = s.get_bool("causal", true);
    return m;
  }

  // block / stack
  s.require("family", "gpt2, llama or custom");
  const std::string family = s.get_choice("family", "", {"gpt2", "llama", "custom"}, "model family");
  m.family = family == "gpt2" ? ModelFamily::gpt2 : family == "llama" ? ModelFamily::llama : ModelFamily::custom;
  s.require("d_model", "Hugging Face: hidden_size");
  m.d_model = s.get_int("d_model", 0, 1);
  read_heads(s, m);
  m.n_layers = s.get_int("n_layers", 1, 1);
  // Hugging Face's defaults: GPT2Config.layer_norm_epsilon 1e-5, LlamaConfig.rms_norm_eps 1e-6.
  // Ranges that cover every published model (eps 1e-12 .. 1e-5; theta 1e4 .. 1e8) with room:
  // outside them a value is a typo, refused here with its line rather than met later as
  // underflow or a zero frequency.
  m.norm_eps = s.get_double("norm_eps", m.family == ModelFamily::llama ? 1e-6 : 1e-5, true, 1e-30, 1.0);
  m.rope_theta = s.get_double("rope_theta", 10000.0, true, 1.0, 1e12);

  const std::vector<std::string> knobs = {"norm", "activation", "gated", "bias", "rope", "causal"};
  if (m.family == ModelFamily::gpt2) {
    for (const std::string& key : knobs)
      s.reject(key, "is fixed by family gpt2 (layernorm, gelu_tanh, plain MLP, biases, no RoPE, causal); use "
                    "family: custom to change it");
    s.reject("rope_theta", "family gpt2 has no RoPE");
    m.norm = NormKind::layernorm;
    m.activation = ops::Activation::gelu_tanh;
    m.gated = false;
    m.bias = true;
    m.rope = false;
    m.causal = true;
    if (m.n_kv_heads != m.n_heads) {
      s.fail("n_kv_heads", "gpt2 has no grouped-query attention: must equal n_heads = " + std::to_string(m.n_heads) +
                               " (use family: custom for GQA)");
    }
    if (m.head_dim * m.n_heads != m.d_model) {
      s.fail("head_dim", "gpt2's fused c_attn needs n_heads * head_dim = d_model; got " + std::to_string(m.n_heads) +
                             " * " + std::to_string(m.head_dim) + " != " + std::to_string(m.d_model));
    }
    m.d_ff = s.get_int("d_ff", 4 * m.d_model, 1);
  } else if (m.family == ModelFamily::llama) {
    for (const std::string& key : knobs)
      s.reject(key, "is fixed by family llama (rmsnorm, SwiGLU, no biases, RoPE, causal); use family: custom to "
                    "change it");
    m.norm = NormKind::rmsnorm;
    m.activation = ops::Activation::silu;
    m.gated = true;
    m.bias = false;
    m.rope = true;
    m.causal = true;
    s.require("d_ff", "Hugging Face: intermediate_size");
    m.d_ff = s.get_int("d_ff", 0, 1);
  } else {
    for (const std::string& key : knobs) s.require(key, "family custom sets every knob explicitly");
    s.require("d_ff", "Hugging Face: intermediate_size");
    m.d_ff = s.get_int("d_ff", 0, 1);
    m.norm = s.get_choice("norm", "", {"layernorm", "rmsnorm"}, "norm") == "layernorm" ? NormKind::layernorm
                                                                                      : NormKind::rmsnorm;
    ops::parse_activation(s.get_choice("activation", "", ops::activation_names(), "activation"), &m.activation);
    m.gated = s.get_bool("gated", false);
    m.bias = s.get_bool("bias", false);
    m.rope = s.get_bool("rope", false);
    m.causal = s.get_bool("causal", true);
    if (m.gated && m.bias) s.fail("bias", "gated MLPs have no biases here: with gated: true set bias: false");
    if (!m.rope) s.reject("rope_theta", "is set but rope is false");
  }
  if (m.rope && m.head_dim % 2 != 0) {
    s.fail(s.has("head_dim") ? "head_dim" : "n_heads",
           "head_dim = " + std::to_string(m.head_dim) + " is odd, but RoPE rotates pairs (needs an even head_dim)");
  }
  return m;
}

}  // namespace blockscope::config_reader
