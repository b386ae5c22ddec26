#include "test/reference/block_reference.h"

#include <cmath>
#include <stdexcept>

#include "test/reference/attention_reference.h"

namespace blockscope::reference::blockref {

namespace {

const RefTensor& need(const Named& named, const std::string& name) {
  auto it = named.find(name);
  if (it == named.end()) throw std::runtime_error("block reference: tensor '" + name + "' missing");
  return it->second;
}
RefTensor optional(const Named& named, const std::string& name) {
  auto it = named.find(name);
  return it == named.end() ? RefTensor() : it->second;
}

RefTensor add(const RefTensor& a, const RefTensor& b) {
  RefTensor out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.data[i] = a.data[i] + b.data[i];
  return out;
}

// [T, width] columns [col0, col0 + H·D) as [B, H, S, D].
RefTensor split_heads(const RefTensor& x, int64_t B, int64_t S, int64_t H, int64_t D, int64_t col0) {
  const int64_t width = x.shape[1];
  RefTensor out({B, H, S, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e)
          out.data[((b * H + h) * S + s) * D + e] = x.data[(b * S + s) * width + col0 + h * D + e];
  return out;
}

// [B, H, S, D] -> [B·S, H·D].
RefTensor merge_heads(const RefTensor& x) {
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3];
  RefTensor out({B * S, H * D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e)
          out.data[(b * S + s) * H * D + h * D + e] = x.data[((b * H + h) * S + s) * D + e];
  return out;
}

RefTensor apply_activation(const RefTensor& x, ops::Activation act) {
  RefTensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = activation(act, x.data[i]);
  return out;
}

RefTensor plain_mlp(const RefTensor& x, const RefTensor& fc, const RefTensor& fc_b, const RefTensor& proj,
                    const RefTensor& proj_b, ops::Activation act, bool out_in) {
  return linear(apply_activation(linear(x, fc, fc_b, out_in), act), proj, proj_b, out_in);
}

RefTensor gated_mlp(const RefTensor& x, const RefTensor& gate, const RefTensor& up, const RefTensor& down,
                    ops::Activation act) {
  const RefTensor g = linear(x, gate, RefTensor(), true);
  const RefTensor u = linear(x, up, RefTensor(), true);
  RefTensor h(g.shape);
  for (int64_t i = 0; i < g.numel(); ++i) h.data[i] = activation(act, g.data[i]) * u.data[i];
  return linear(h, down, RefTensor(), true);
}

}  // namespace

RefTensor linear(const RefTensor& x, const RefTensor& w, const RefTensor& bias, bool w_is_out_in) {
  const int64_t rows = x.shape[0], in = x.shape[1];
  const int64_t out_features = w_is_out_in ? w.shape[0] : w.shape[1];
  RefTensor y({rows, out_features});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o) {
      double sum = bias.numel() > 0 ? bias.data[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        sum += x.data[r * in + i] * (w_is_out_in ? w.data[o * in + i] : w.data[i * out_features + o]);
      y.data[r * out_features + o] = sum;
    }
  return y;
}

RefTensor layer_norm(const RefTensor& x, const RefTensor& w, const RefTensor& bias, double eps) {
  const int64_t n = x.shape.back(), rows = x.numel() / n;
  RefTensor y(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x.data[r * n + i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (x.data[r * n + i] - mean) * (x.data[r * n + i] - mean);
    var /= static_cast<double>(n);  // biased, as torch.nn.LayerNorm
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i)
      y.data[r * n + i] = (x.data[r * n + i] - mean) * inv * w.data[i] + (bias.numel() > 0 ? bias.data[i] : 0.0);
  }
  return y;
}

RefTensor rms_norm(const RefTensor& x, const RefTensor& w, double eps) {
  const int64_t n = x.shape.back(), rows = x.numel() / n;
  RefTensor y(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    double mean_square = 0;
    for (int64_t i = 0; i < n; ++i) mean_square += x.data[r * n + i] * x.data[r * n + i];
    const double inv = 1.0 / std::sqrt(mean_square / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y.data[r * n + i] = x.data[r * n + i] * inv * w.data[i];
  }
  return y;
}

double activation(ops::Activation act, double x) {
  const double pi = 3.14159265358979323846;
  switch (act) {
    case ops::Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ops::Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case ops::Activation::silu: return x / (1.0 + std::exp(-x));
    case ops::Activation::relu: return x > 0 ? x : 0.0;
  }
  return x;
}

RefTensor rope(const RefTensor& x, double theta) {
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3], half = D / 2;
  RefTensor y(x.shape);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        const double* row = &x.data[((b * H + h) * S + s) * D];
        double* out = &y.data[((b * H + h) * S + s) * D];
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(s) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
          const double c = std::cos(angle), sn = std::sin(angle);
          out[i] = row[i] * c - row[i + half] * sn;
          out[i + half] = row[i + half] * c + row[i] * sn;
        }
      }
  return y;
}

RefTensor block_forward(const ModelConfig& m, const Named& w, const RefTensor& x, int64_t layer) {
  const int64_t B = x.shape[0], S = x.shape[1], d = x.shape[2], T = B * S;
  const int64_t H = m.n_heads, Hkv = m.n_kv_heads, D = m.head_dim;
  RefTensor x2d = x;
  x2d.shape = {T, d};
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  RefTensor residual, out;
  if (m.family == ModelFamily::gpt2) {
    const std::string p = "h." + std::to_string(layer) + ".";
    const RefTensor h = layer_norm(x2d, need(w, p + "ln_1.weight"), need(w, p + "ln_1.bias"), m.norm_eps);
    const RefTensor qkv = linear(h, need(w, p + "attn.c_attn.weight"), need(w, p + "attn.c_attn.bias"), false);
    const RefTensor q = split_heads(qkv, B, S, H, D, 0), k = split_heads(qkv, B, S, H, D, d),
                    v = split_heads(qkv, B, S, H, D, 2 * d);
    const RefTensor att = reference::attention(q, k, v, true, scale);
    residual = add(x2d, linear(merge_heads(att), need(w, p + "attn.c_proj.weight"), need(w, p + "attn.c_proj.bias"), false));
    const RefTensor h2 = layer_norm(residual, need(w, p + "ln_2.weight"), need(w, p + "ln_2.bias"), m.norm_eps);
    out = add(residual, plain_mlp(h2, need(w, p + "mlp.c_fc.weight"), need(w, p + "mlp.c_fc.bias"),
                                  need(w, p + "mlp.c_proj.weight"), need(w, p + "mlp.c_proj.bias"),
                                  ops::Activation::gelu_tanh, false));
  } else {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    auto norm = [&](const RefTensor& in, const std::string& name) {
      return m.norm == NormKind::layernorm
                 ? layer_norm(in, need(w, p + name + ".weight"), optional(w, p + name + ".bias"), m.norm_eps)
                 : rms_norm(in, need(w, p + name + ".weight"), m.norm_eps);
    };
    auto proj = [&](const RefTensor& in, const std::string& name) {
      return linear(in, need(w, p + name + ".weight"), optional(w, p + name + ".bias"), true);
    };
    const RefTensor h = norm(x2d, "input_layernorm");
    RefTensor q = split_heads(proj(h, "self_attn.q_proj"), B, S, H, D, 0);
    RefTensor k = split_heads(proj(h, "self_attn.k_proj"), B, S, Hkv, D, 0);
    const RefTensor v = split_heads(proj(h, "self_attn.v_proj"), B, S, Hkv, D, 0);
    if (m.rope) {
      q = rope(q, m.rope_theta);
      k = rope(k, m.rope_theta);
    }
    const RefTensor att = reference::attention(q, k, v, m.causal, scale);
    residual = add(x2d, proj(merge_heads(att), "self_attn.o_proj"));
    const RefTensor h2 = norm(residual, "post_attention_layernorm");
    const RefTensor mlp =
        m.gated ? gated_mlp(h2, need(w, p + "mlp.gate_proj.weight"), need(w, p + "mlp.up_proj.weight"),
                            need(w, p + "mlp.down_proj.weight"), m.activation)
                : plain_mlp(h2, need(w, p + "mlp.up_proj.weight"), optional(w, p + "mlp.up_proj.bias"),
                            need(w, p + "mlp.down_proj.weight"), optional(w, p + "mlp.down_proj.bias"), m.activation,
                            true);
    out = add(residual, mlp);
  }
  out.shape = {B, S, d};
  return out;
}

RefTensor workload_output(const WorkloadConfig& config, const Named& named) {
  const ModelConfig& m = config.model;
  switch (config.kind) {
    case WorkloadKind::block: return block_forward(m, named, need(named, "input"), 0);
    case WorkloadKind::stack: {
      RefTensor x = need(named, "input");
      for (int64_t i = 0; i < m.n_layers; ++i) x = block_forward(m, named, x, i);
      return x;
    }
    case WorkloadKind::matmul_add: return linear(need(named, "a"), need(named, "b"), need(named, "c"), false);
    case WorkloadKind::linear: return linear(need(named, "input"), need(named, "weight"), need(named, "bias"), true);
    case WorkloadKind::mlp:
      return m.gated ? gated_mlp(need(named, "input"), need(named, "mlp.gate_proj.weight"),
                                 need(named, "mlp.up_proj.weight"), need(named, "mlp.down_proj.weight"), m.activation)
                     : plain_mlp(need(named, "input"), need(named, "mlp.up_proj.weight"),
                                 optional(named, "mlp.up_proj.bias"), need(named, "mlp.down_proj.weight"),
                                 optional(named, "mlp.down_proj.bias"), m.activation, true);
    case WorkloadKind::attention:
      return reference::attention(need(named, "q"), need(named, "k"), need(named, "v"), m.causal,
                                  1.0 / std::sqrt(static_cast<double>(m.head_dim)));
    case WorkloadKind::softmax: return reference::softmax_rows(need(named, "input"));
  }
  throw std::runtime_error("block reference: unknown workload");
}

}  // namespace blockscope::reference::blockref
