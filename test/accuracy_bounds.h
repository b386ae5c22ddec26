// Error bounds of the ops against their float64 references, each derived from the op's
// arithmetic (sum depth, the dtype's unit roundoff, the f32 evaluation) with its margin, and
// measured where noted (docs/TESTING.md). One place for the op-case harness
// (test/op_cases.cpp) and the op-specific tests that measure the same quantities.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/common/paths.h"
#include "reference/error_model.h"
#include "reference/ops_reference.h"
#include "reference/reference_tensor.h"
#include "runtime/dtype.h"

namespace blockscope::testing {

inline double max_abs(const reference::RefTensor& t) {
  double m = 0.0;
  for (double v : t.data) m = std::max(m, std::abs(v));
  return m;
}

// Half the spacing of `dtype`'s subnormals: what storing a result that underflows costs,
// absolutely, and no bound relative to the result covers (a product of two inputs in [-1, 1]
// lands below f16's smallest normal 2^-14 about once in 10^4 draws). Flushing to zero costs more.
inline double underflow_rounding(DType dtype) {
  switch (dtype) {
    case DType::f16: return std::ldexp(1.0, -25);
    case DType::bf16: return std::ldexp(1.0, -134);
    default: return std::ldexp(1.0, -150);  // f32
  }
}

// Elementwise results (add, mul, scale, copy, masked_fill) are one rounding of an f32 value:
// a few units of the storage roundoff, relative to the largest value, or the underflow rounding
// where the largest value is that small.
inline double one_rounding_bound(DType dtype, double largest) {
  return 4.0 * dtype_epsilon(dtype) + 1e-7 + underflow_rounding(dtype) / std::max(largest, 1e-30);
}

// softmax over rows of n, per row relative to the row's largest probability: the f32 sum of n
// exps, exp itself and the stored result (reference/error_model.h). Measured: f32 8.7e-7 (rows
// of 20000; 4e-7 up to 4097), f16 4.8e-4, bf16 3.8e-3.
inline double softmax_bound(DType dtype, int64_t n) { return reference::error_bound(reference::softmax_roundings(n), dtype); }

// LayerNorm / RMSNorm over N elements, relative to max |reference|: storing rounds once
// (u_d); a sum of N f32 terms errs by about √N·u32 with rounding errors of random sign, and
// the mean's error passes into every output: 4·√N·u32 is a few times the measured error (f32
// 1.3e-6 at N = 4097) and far below a misplaced or ignored eps.
inline double norm_bound(DType dtype, int64_t n) {
  return dtype_epsilon(dtype) + 4.0 * std::sqrt(static_cast<double>(n)) * dtype_epsilon(DType::f32);
}

// RoPE, absolute: x·cos ∓ x'·sin is two products and a sum in f32 with cos and sin rounded to
// f32 (0.5 u32 each): under 4·u32·max|x|; 8·u32·max|x| leaves margin; the store u_d·max|y|.
inline double rope_bound(const reference::RefTensor& x, const reference::RefTensor& y, DType dtype) {
  return dtype_epsilon(dtype) * max_abs(y) + 8.0 * dtype_epsilon(DType::f32) * max_abs(x);
}

// Activations, per element in units of u32 = 2^-24: |y - ref| less the storage rounding (u_d
// · |ref| plus the underflow rounding; none for f32), over u32 · (|ref| + |x|). The
// f32 evaluation (erf, tanh, exp, a few products) costs a few ulps of |y|, or of |x| in the
// negative tails where gelu(x) = x·Φ(x) comes from 1 + erf(...) with cancellation. For the
// gated form x is |gate·up|. Measured at most 1.4 units; a GELU constant off in its 4th digit
// costs about 50.
inline double activation_ulps(const std::vector<float>& got, const reference::RefTensor& expected,
                              const reference::RefTensor& x, DType dtype) {
  const double storage = dtype == DType::f32 ? 0.0 : dtype_epsilon(dtype);
  const double subnormal = underflow_rounding(dtype);
  const double u32 = dtype_epsilon(DType::f32);
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ref = expected.data[i];
    const double error = std::abs(static_cast<double>(got[i]) - ref) - storage * std::abs(ref) - subnormal;
    worst = std::max(worst, error / (u32 * (std::abs(ref) + std::abs(x.data[i])) + 1e-300));
  }
  return worst;
}
inline constexpr double kActivationUlps = 6.0;

// One linear in f32 stored in `dtype`, absolute: whatever the summation order, element y errs
// by at most γ_k·Σ|x||w| (γ_k ≈ k·u32), growing like √k with rounding errors of random sign, so
// 4·√k·u32·max(Σ|x||w| + |b|) is generous yet far below a wrong element; the naive path
// rounds up to four times to the dtype (GEMM result, bias add, GELU with slope below 1.13,
// a gate multiply), each by at most u_d·|value|: 4·u_d·max|pre-activation|.
inline double linear_bound(const reference::RefTensor& pre_activation, const reference::RefTensor& magnitude,
                           int64_t k, DType dtype) {
  const double u32 = dtype_epsilon(DType::f32), ud = dtype_epsilon(dtype);
  return 4.0 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))) * u32 * max_abs(magnitude) +
         4.0 * ud * max_abs(pre_activation);
}

// Largest slope of gelu (erf or tanh) and silu: errors in their input grow by at most this.
inline constexpr double kMaxActivationSlope = 1.13;

// max over outputs o of Σ_j |w[o, j]|: how much an input error of e per element can grow to.
inline double max_abs_row_sum(const reference::RefTensor& w, bool out_in) {
  const int64_t in = out_in ? w.shape[1] : w.shape[0];
  reference::RefTensor ones({1, in});
  for (double& v : ones.data) v = 1.0;
  return max_abs(reference::linear_magnitude(ones, w, nullptr, out_in));
}

// Plain MLP proj(act(fc(x))), absolute: the hidden layer's linear bound through the
// activation's slope and proj's row sums, plus proj's own bound.
inline double mlp_plain_bound(const reference::RefTensor& x, const reference::RefTensor& fc,
                              const reference::RefTensor* fc_bias, const reference::RefTensor& proj,
                              const reference::RefTensor* proj_bias, ops::Activation act, bool out_in,
                              const reference::RefTensor& expected, DType dtype) {
  const int64_t d = x.shape.back(), f = out_in ? fc.shape[0] : fc.shape[1];
  const reference::RefTensor h = reference::linear(x, fc, fc_bias, out_in);
  const reference::RefTensor a = reference::activation(h, act);
  const double e_hidden = kMaxActivationSlope * linear_bound(h, reference::linear_magnitude(x, fc, fc_bias, out_in), d, dtype);
  return linear_bound(expected, reference::linear_magnitude(a, proj, proj_bias, out_in), f, dtype) +
         e_hidden * max_abs_row_sum(proj, out_in);
}

// Gated MLP down(act(gate(x)) · up(x)), absolute: δhidden ≤ slope·δg·|u| + |act(g)|·δu plus
// two roundings of hidden, through down's row sums, plus down's own bound.
inline double mlp_gated_bound(const reference::RefTensor& x, const reference::RefTensor& gate_w,
                              const reference::RefTensor& up_w, const reference::RefTensor& down_w, ops::Activation act,
                              bool out_in, const reference::RefTensor& expected, DType dtype) {
  const int64_t d = x.shape.back(), f = out_in ? gate_w.shape[0] : gate_w.shape[1];
  const reference::RefTensor g = reference::linear(x, gate_w, nullptr, out_in);
  const reference::RefTensor u = reference::linear(x, up_w, nullptr, out_in);
  const reference::RefTensor hidden = reference::gated_activation(g, u, act);
  const double eg = linear_bound(g, reference::linear_magnitude(x, gate_w, nullptr, out_in), d, dtype);
  const double eu = linear_bound(u, reference::linear_magnitude(x, up_w, nullptr, out_in), d, dtype);
  const double e_hidden = kMaxActivationSlope * eg * max_abs(u) + max_abs(reference::activation(g, act)) * eu +
                          2.0 * dtype_epsilon(dtype) * max_abs(hidden);
  return linear_bound(expected, reference::linear_magnitude(hidden, down_w, nullptr, out_in), f, dtype) +
         e_hidden * max_abs_row_sum(down_w, out_in);
}

// Attention, every path on its own (so a bug shared by all paths cannot hide behind the
// accuracy rule, which compares paths with naive), per output row (head_dim values) relative to
// the row's largest |value|, with q and k in [-2, 2] (scores up to about 6, as the error model
// assumes): the scores' sums of head_dim, their rounding magnified by exp, the softmax and the
// sum with V over the keys (reference/error_model.h). Measured: f32 1.8e-6, f16 3.3e-3, bf16
// 1.8e-2 (any path). Larger q and k: `largest_score` (largest_attention_score).
inline double attention_bound(DType dtype, int64_t head_dim, int64_t keys,
                              double largest_score = reference::kUnitScaleLargestScore) {
  return reference::error_bound(reference::attention_roundings(head_dim, keys, largest_score), dtype);
}

// The largest |scale·q·k| to expect with q and k uniform in [-range, range] and scale
// 1/√head_dim: its standard deviation is range²/3, and 4.5 of them (1.5·range²) covers the
// largest of a test's scores (6 at range 2, the unit-scale model's).
inline double largest_attention_score(double range) { return 1.5 * range * range; }

// Elementwise |t|: a product on |a| and |b| gives the magnitude Σ|a||b| GEMM bounds scale with.
inline reference::RefTensor abs_of(const reference::RefTensor& t) {
  reference::RefTensor a = t;
  for (double& v : a.data) v = std::abs(v);
  return a;
}

// batched_matmul of depth k, absolute: linear_bound over the product's magnitude (the same
// batched_matmul on |a| and |b|) — its f32 sums err relative to Σ|a||b|, not to the output,
// which cancellation can make far smaller (k = 4, one output per batch: a bound relative to the
// output failed CI) — plus, for f16, the subnormal spacing 2^-24 (a product of two inputs in
// [-1, 1] can land below f16's smallest normal, where one rounding costs up to half a spacing).
inline double batched_matmul_bound(const reference::RefTensor& expected, const reference::RefTensor& magnitude, int64_t k,
                                   DType dtype) {
  return linear_bound(expected, magnitude, k, dtype) + 2.0 * underflow_rounding(dtype);
}

}  // namespace blockscope::testing
