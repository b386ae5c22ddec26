#include "reference/families.h"

namespace blockscope::reference {

namespace {

// GPT2Block: LayerNorm(eps=layer_norm_epsilon=1e-5) with bias, Conv1D with bias, activation
// "gelu_new" (the tanh approximation), causal self-attention, no RoPE, MHA.
constexpr FamilySemantics kGpt2{NormKind::layernorm, ops::Activation::gelu_tanh, false, true, false, true, true,
                                1e-5, 10000.0};
// LlamaDecoderLayer: LlamaRMSNorm(eps=rms_norm_eps=1e-6), Linear without bias, LlamaMLP with
// hidden_act "silu" (SwiGLU), RoPE with rope_theta=10000, causal, GQA allowed.
constexpr FamilySemantics kLlama{NormKind::rmsnorm, ops::Activation::silu, true, false, true, true, false,
                                 1e-6, 10000.0};

std::string yes_no(bool value, const char* yes, const char* no) { return value ? yes : no; }

}  // namespace

const FamilySemantics* hf_family(ModelFamily family) {
  switch (family) {
    case ModelFamily::gpt2: return &kGpt2;
    case ModelFamily::llama: return &kLlama;
    case ModelFamily::custom: return nullptr;
  }
  return nullptr;
}

ModelConfig with_family_semantics(ModelConfig model) {
  const FamilySemantics* hf = hf_family(model.family);
  if (hf == nullptr) return model;
  model.norm = hf->norm;
  model.activation = hf->activation;
  model.gated = hf->gated;
  model.bias = hf->bias;
  model.rope = hf->rope;
  model.causal = hf->causal;
  if (hf->mha) model.n_kv_heads = model.n_heads;
  return model;
}

std::vector<std::string> family_mismatches(const ModelConfig& m) {
  const FamilySemantics* hf = hf_family(m.family);
  if (hf == nullptr) return {};
  const std::string family = std::string("Hugging Face ") + family_name(m.family);
  std::vector<std::string> out;
  auto flag = [&](const char* key, bool have, bool want, const char* yes, const char* no) {
    if (have != want)
      out.push_back(std::string(key) + ": the config has " + (have ? "true" : "false") + ", " + family + " " +
                    yes_no(want, yes, no));
  };
  if (m.norm != hf->norm)
    out.push_back(std::string("norm: the config has ") + norm_name(m.norm) + ", " + family + " uses " + norm_name(hf->norm));
  if (m.activation != hf->activation)
    out.push_back(std::string("activation: the config has ") + ops::activation_name(m.activation) + ", " + family +
                  " uses " + ops::activation_name(hf->activation));
  flag("gated", m.gated, hf->gated, "has a gated MLP", "has a plain MLP");
  flag("bias", m.bias, hf->bias, "has biases", "has no biases");
  flag("rope", m.rope, hf->rope, "uses RoPE", "has no RoPE");
  flag("causal", m.causal, hf->causal, "is causal", "is not causal");
  if (hf->mha && m.n_kv_heads != m.n_heads)
    out.push_back("n_kv_heads: the config has " + std::to_string(m.n_kv_heads) + ", " + family +
                  " has n_kv_heads == n_heads = " + std::to_string(m.n_heads));
  return out;
}

}  // namespace blockscope::reference
