// What the Hugging Face modules fix for each family, written here from GPT2Block /
// GPT2Config and LlamaDecoderLayer / LlamaConfig, not read from blockscope's config code:
// the block reference computes gpt2 and llama blocks with these, and family_mismatches()
// names every knob where a parsed config (or a dump's metadata) disagrees. A wrong setting in
// the config code is then a test failure instead of a bug the oracle shares.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace blockscope::reference {

struct FamilySemantics {
  NormKind norm;
  ops::Activation activation;
  bool gated;    // LlamaMLP: down(act(gate(x)) · up(x))
  bool bias;     // GPT-2's Conv1D and LayerNorm have biases; Llama's Linear and RMSNorm none
  bool rope;     // Llama: rotary embeddings on q and k
  bool causal;   // both are decoder-only: always causal
  bool mha;      // GPT-2 has no GQA (n_kv_heads == n_heads)
  double default_norm_eps;    // GPT2Config.layer_norm_epsilon, LlamaConfig.rms_norm_eps
  double default_rope_theta;  // LlamaConfig.rope_theta (GPT-2: unused)
};

// The Hugging Face semantics of gpt2 and llama; nullptr for custom (its knobs are the config's).
const FamilySemantics* hf_family(ModelFamily family);

// `model` with the knobs its family fixes taken from hf_family() (custom: unchanged). Dims,
// eps and theta stay as given.
ModelConfig with_family_semantics(ModelConfig model);

// One line per knob where `model` disagrees with its family ("causal: the config has false,
// Hugging Face llama is causal"); empty when it agrees or the family is custom.
std::vector<std::string> family_mismatches(const ModelConfig& model);

}  // namespace blockscope::reference
