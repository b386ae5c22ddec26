// The transformer MLP: plain (fc -> act -> proj, with biases: GPT-2) or gated
// (down(act(gate(x)) · up(x)), no biases: GeGLU / SwiGLU as in Llama).
#pragma once

#include "ops/common/activations.h"
#include "ops/common/paths.h"
#include "ops/linear/linear.h"
#include "runtime/context.h"

namespace blockscope::ops {

struct MlpWeights {
  bool gated = false;
  Activation activation = Activation::gelu_tanh;
  WeightLayout layout = WeightLayout::out_in;  // of every weight below
  // plain: fc [d_ff, d_model] (out_in), proj [d_model, d_ff]; biases [d_ff], [d_model] or undefined
  Tensor fc_weight, fc_bias, proj_weight, proj_bias;
  // gated: gate and up [d_ff, d_model], down [d_model, d_ff] (out_in). gate_up is the
  // concatenation [2·d_ff, d_model] (gate rows first) used by the fused path; built once by
  // pack_gate_up(), not per forward.
  Tensor gate_weight, up_weight, down_weight, gate_up_weight;
};

// Builds weights.gate_up_weight from gate_weight and up_weight (a one-time copy at load).
void pack_gate_up(Context& ctx, MlpWeights& weights);

// x: [rows, d_model] -> y: [rows, d_model]. Kernels (CUDA): plain naive 5 (GEMM, bias,
// GELU, GEMM, bias), plain epilogue 2; gated naive 5 (gate GEMM, up GEMM, act, mul, down
// GEMM), gated fused 3 (gate|up GEMM, act·mul, down GEMM). Paths that do not apply to the
// kind of MLP (fused on plain, epilogue on gated) are errors.
void mlp(Context& ctx, const Tensor& x, const MlpWeights& weights, Tensor& y, MlpPath path);

// FLOPs of one MLP forward over `rows` tokens: two GEMMs [rows, d] x [d, f] and back, three
// when gated (the op's own record and the workloads' totals).
double mlp_flops(int64_t rows, int64_t d_model, int64_t d_ff, bool gated);
// Elements of the [rows, d_ff]-sized scratch tensors `path` allocates inside mlp(): the plain
// MLP's hidden (1), the gated naive gate and up (2), the fused gate|up and hidden (3).
int64_t mlp_scratch_elements(int64_t rows, int64_t d_ff, bool gated, MlpPath path);

}  // namespace blockscope::ops
