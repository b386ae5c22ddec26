// float64 references for linear, the activations, LayerNorm, RMSNorm, RoPE and the MLP.
// Plain loops over RefTensor, written from the definitions (PyTorch / Hugging Face) and
// sharing nothing with ops/ (only the Activation enum is borrowed, as a name).
// Conventions they pin down (the ops must match them):
//   - linear: out_in means w [out, in] and y = x · wᵀ + b; in_out means w [in, out], y = x · w + b;
//   - gelu_tanh is GPT-2's 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x³))), gelu_erf the exact one;
//   - LayerNorm uses the biased variance, eps inside the square root;
//   - RoPE is HF Llama's rotate_half with HF's float32 angles: inv_freq[d] = float(theta^(-2d/D)),
//     angle = float(float(pos) · inv_freq[d]); cos, sin and the rotation in double.
#pragma once

#include <cstdint>

#include "ops/common/activations.h"
#include "ops/common/paths.h"
#include "reference/reference_tensor.h"

namespace blockscope::reference {

double activation_value(ops::Activation act, double x);
// y = act(x), any shape.
RefTensor activation(const RefTensor& x, ops::Activation act);
// y = act(gate) · up, same shapes.
RefTensor gated_activation(const RefTensor& gate, const RefTensor& up, ops::Activation act);

// x [..., in] -> [..., out]; bias [out] or null.
RefTensor linear(const RefTensor& x, const RefTensor& w, const RefTensor* bias, bool w_out_in);
// The same shape as linear(), each element Σ|x|·|w| + |b|: the scale of the rounding error of
// any summation order (tests derive their tolerances from it).
RefTensor linear_magnitude(const RefTensor& x, const RefTensor& w, const RefTensor* bias, bool w_out_in);

// Over the last dimension; weight (and bias, or null) [N].
RefTensor layer_norm(const RefTensor& x, const RefTensor& weight, const RefTensor* bias, double eps);
RefTensor rms_norm(const RefTensor& x, const RefTensor& weight, double eps);

// x [B, H, S, D]; row s has position position_offset + s.
RefTensor rope(const RefTensor& x, double theta, int64_t position_offset);

// Plain MLP: proj(act(fc(x))); biases may be null. Gated: down(act(gate(x)) · up(x)).
RefTensor mlp_plain(const RefTensor& x, const RefTensor& fc_w, const RefTensor* fc_b, const RefTensor& proj_w,
                    const RefTensor* proj_b, ops::Activation act, bool w_out_in);
RefTensor mlp_gated(const RefTensor& x, const RefTensor& gate_w, const RefTensor& up_w, const RefTensor& down_w,
                    ops::Activation act, bool w_out_in);

}  // namespace blockscope::reference
