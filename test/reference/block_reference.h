// float64 reference of whole blocks, stacks and the single-module workloads, in plain loops
// written from the Hugging Face definitions (GPT2Block, LlamaDecoderLayer). Shares nothing with
// ops/ or runtime/block; attention comes from attention_reference.h (also plain loops).
#pragma once

#include <map>
#include <string>

#include "runtime/config.h"
#include "test/reference/reference_tensor.h"

namespace blockscope::reference::blockref {

using Named = std::map<std::string, RefTensor>;

// y = x · Wᵀ + b (w [out, in], out_in) or x · W + b (w [in, out]); x [rows, in]. bias may be
// empty (numel 0).
RefTensor linear(const RefTensor& x, const RefTensor& w, const RefTensor& bias, bool w_is_out_in);
RefTensor layer_norm(const RefTensor& x, const RefTensor& w, const RefTensor& bias, double eps);
RefTensor rms_norm(const RefTensor& x, const RefTensor& w, double eps);
double activation(ops::Activation act, double x);
// x [B, H, S, D], Hugging Face rotate_half convention, positions 0..S-1.
RefTensor rope(const RefTensor& x, double theta);

// One layer of `model` (weights under their Hugging Face names, layer index `layer`);
// x [B, S, d] -> [B, S, d].
RefTensor block_forward(const ModelConfig& model, const Named& weights, const RefTensor& x, int64_t layer);

// The output of a workload from its named inputs and weights (Workload::inputs_and_weights()).
RefTensor workload_output(const WorkloadConfig& config, const Named& named);

}  // namespace blockscope::reference::blockref
