#include "reference/ops_reference.h"

#include <cmath>
#include <stdexcept>

#include "reference/gemm64.h"
#include "runtime/interrupt.h"

namespace blockscope::reference {
namespace {

// Shared by linear() and linear_magnitude(): a float64 GEMM (gemm64.h), with |x|·|w| + |b|
// for the magnitude.
RefTensor linear_gemm(const RefTensor& x, const RefTensor& w, const RefTensor* bias, bool w_out_in, bool absolute) {
  require(!x.shape.empty() && w.shape.size() == 2, "linear needs x [..., in] and a 2-D weight");
  const int64_t in = x.shape.back();
  const int64_t out = w_out_in ? w.shape[0] : w.shape[1];
  require((w_out_in ? w.shape[1] : w.shape[0]) == in, "linear weight does not match x");
  require(bias == nullptr || bias->numel() == out, "linear bias size");
  // Rows from the leading dimensions, not numel / in: with in = 0 every row is bias (or 0).
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.shape.size(); ++d) rows *= x.shape[d];
  Shape shape = x.shape;
  shape.back() = out;
  RefTensor y(shape);
  // A float64 GEMM of a large block takes seconds: Ctrl-C is answered within a block of rows.
  check_interrupted("while computing the float64 reference");
  gemm64(rows, out, in, x.data.data(), w.data.data(), w_out_in, bias != nullptr ? bias->data.data() : nullptr, absolute,
         y.data.data());
  return y;
}

}  // namespace

double activation_value(ops::Activation act, double x) {
  const double pi = 3.14159265358979323846;
  switch (act) {
    case ops::Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ops::Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case ops::Activation::silu: return x / (1.0 + std::exp(-x));
    case ops::Activation::relu: return x > 0.0 ? x : 0.0;
  }
  return x;
}

RefTensor activation(const RefTensor& x, ops::Activation act) {
  RefTensor y(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = activation_value(act, x.data[i]);
  return y;
}

RefTensor gated_activation(const RefTensor& gate, const RefTensor& up, ops::Activation act) {
  require(gate.shape == up.shape, "gated_activation shapes differ");
  RefTensor y(gate.shape);
  for (int64_t i = 0; i < gate.numel(); ++i) y.data[i] = activation_value(act, gate.data[i]) * up.data[i];
  return y;
}

RefTensor linear(const RefTensor& x, const RefTensor& w, const RefTensor* bias, bool w_out_in) {
  return linear_gemm(x, w, bias, w_out_in, false);
}

RefTensor linear_magnitude(const RefTensor& x, const RefTensor& w, const RefTensor* bias, bool w_out_in) {
  return linear_gemm(x, w, bias, w_out_in, true);
}

RefTensor layer_norm(const RefTensor& x, const RefTensor& weight, const RefTensor* bias, double eps) {
  require(!x.shape.empty() && x.shape.back() > 0, "layer_norm needs x [..., N]");
  const int64_t n = x.shape.back(), rows = x.numel() / n;
  require(weight.numel() == n && (bias == nullptr || bias->numel() == n), "layer_norm weight/bias size");
  RefTensor y(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x.data[r * n];
    double mean = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += row[i];
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(n);  // biased (divide by N), as torch.nn.LayerNorm
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i)
      y.data[r * n + i] = (row[i] - mean) * inv_std * weight.data[i] + (bias ? bias->data[i] : 0.0);
  }
  return y;
}

RefTensor rms_norm(const RefTensor& x, const RefTensor& weight, double eps) {
  require(!x.shape.empty() && x.shape.back() > 0, "rms_norm needs x [..., N]");
  const int64_t n = x.shape.back(), rows = x.numel() / n;
  require(weight.numel() == n, "rms_norm weight size");
  RefTensor y(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += x.data[r * n + i] * x.data[r * n + i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y.data[r * n + i] = x.data[r * n + i] * inv_rms * weight.data[i];
  }
  return y;
}

RefTensor rope(const RefTensor& x, double theta, int64_t position_offset) {
  require(x.shape.size() == 4 && x.shape[3] % 2 == 0, "rope needs x [B, H, S, D] with D even");
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3], half = D / 2;
  RefTensor y(x.shape);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t base = ((b * H + h) * S + s) * D;  // x[b, h, s, :]
        for (int64_t i = 0; i < half; ++i) {
          // HF's float32 quantities: inv_freq and the angle (a float32 product) are floats.
          const float inv_freq = static_cast<float>(std::pow(theta, -2.0 * static_cast<double>(i) / D));
          const float angle = static_cast<float>(position_offset + s) * inv_freq;
          const double c = std::cos(static_cast<double>(angle)), sn = std::sin(static_cast<double>(angle));
          const double lo = x.data[base + i], hi = x.data[base + i + half];
          // rotate_half(x) = [-x_hi, x_lo]; y = x·cos + rotate_half(x)·sin.
          y.data[base + i] = lo * c - hi * sn;
          y.data[base + i + half] = hi * c + lo * sn;
        }
      }
  return y;
}

RefTensor mlp_plain(const RefTensor& x, const RefTensor& fc_w, const RefTensor* fc_b, const RefTensor& proj_w,
                    const RefTensor* proj_b, ops::Activation act, bool w_out_in) {
  return linear(activation(linear(x, fc_w, fc_b, w_out_in), act), proj_w, proj_b, w_out_in);
}

RefTensor mlp_gated(const RefTensor& x, const RefTensor& gate_w, const RefTensor& up_w, const RefTensor& down_w,
                    ops::Activation act, bool w_out_in) {
  const RefTensor hidden =
      gated_activation(linear(x, gate_w, nullptr, w_out_in), linear(x, up_w, nullptr, w_out_in), act);
  return linear(hidden, down_w, nullptr, w_out_in);
}

}  // namespace blockscope::reference
