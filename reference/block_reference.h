// float64 reference of whole blocks, stacks and the single-module workloads, in plain loops
// written from the Hugging Face definitions (GPT2Block, LlamaDecoderLayer). Shares nothing with
// ops/ or runtime/block; the per-op pieces (linear, norms, RoPE, MLP, attention, add) come from
// ops_reference.h and attention_reference.h (also plain loops), so each is written once.
#pragma once

#include <map>
#include <string>
#include <vector>

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

// decode: each sequence as one causal forward of its prompt (rows < prompt_lens[b] of "input"
// [B, P, d]) followed by its new tokens ("decode_input" [T, B, 1, d]) through every layer —
// no cache, no steps: decode step t must equal row prompt + t. Returns [T, B, 1, d]; `prefill`,
// when given, receives the prompts' rows [B, P, d] (padding rows 0).
RefTensor decode_forward(const WorkloadConfig& config, const Named& named, RefTensor* prefill = nullptr);

// Weight-only FP8 (precision.weights): each layer's 2-D weights (the GEMMs') in `named` replaced by
// the values their FP8 codes stand for (fp8_reference.h's row_dequantized), so the reference
// computes with the weights the run reads and check holds it to its dtype's own bound. No-op
// without weight-only FP8.
void dequantize_fp8_weights(const WorkloadConfig& config, Named& named);

// The output of a workload from its named inputs and weights (Workload::inputs_and_weights()).
RefTensor workload_output(const WorkloadConfig& config, const Named& named);

// Block and stack workloads: the last layer's path ops recomputed in float64 from the inputs
// the run gave them (`op_inputs`, from Workload::intermediates(): "attention.q/k/v",
// "out_proj.input", "mlp.input"), so an op's error is its own rounding, not that of the ops
// before it. Gives "attention.out" [B, H, S, D], "out_proj.out" and "mlp.out" [T, d].
Named last_layer_ops(const WorkloadConfig& config, const Named& named, const Named& op_inputs);
// One of them ("attention.out", "out_proj.out" or "mlp.out"), and the op inputs it reads: the
// same inputs give the same result (check computes each once per distinct input).
RefTensor last_layer_op(const WorkloadConfig& config, const Named& named, const Named& op_inputs,
                        const std::string& output);
const std::vector<std::string>& last_layer_op_inputs(const std::string& output);

}  // namespace blockscope::reference::blockref
