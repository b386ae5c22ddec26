// float64 reference of whole blocks, stacks and the single-module workloads, in plain loops
// written from the Hugging Face definitions (GPT2Block, LlamaDecoderLayer). Shares nothing with
// ops/ or runtime/block; the per-op pieces (linear, norms, RoPE, MLP, attention, add) come from
// ops_reference.h and attention_reference.h (also plain loops), so each is written once.
#pragma once

#include <map>
#include <string>

#include "model/config.h"
#include "reference/reference_tensor.h"

namespace blockscope::reference::blockref {

using Named = std::map<std::string, RefTensor>;

// One layer of `model` (weights under their Hugging Face names, layer index `layer`);
// x [B, S, d] -> [B, S, d]. Families gpt2 and llama take their fixed knobs (norm, activation,
// MLP, biases, RoPE, causal) from reference/families.h, not from `model`; custom from `model`.
// `residual`, when given, receives x + attention sublayer [B, S, d] (the MLP's input residual).
RefTensor block_forward(const ModelConfig& model, const Named& weights, const RefTensor& x, int64_t layer,
                        RefTensor* residual = nullptr);

// The output of a workload from its named inputs and weights (Workload::inputs_and_weights()).
RefTensor workload_output(const WorkloadConfig& config, const Named& named);

}  // namespace blockscope::reference::blockref
