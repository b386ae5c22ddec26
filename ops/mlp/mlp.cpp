// The transformer MLP, written once in terms of public ops (linear, activation,
// gated_activation, mul), so it runs on every device and its kernel table is the sum of theirs:
//   plain  naive     fc GEMM, bias, act, proj GEMM, bias                (5 kernels)
//          epilogue  fc GEMM with GELU_BIAS epilogue, proj GEMM with BIAS (2)
//   gated  naive     gate GEMM, up GEMM, act, mul, down GEMM             (5)
//          fused     gate|up GEMM on the packed weight, act·mul on its two column halves
//                    (strided views, no copy), down GEMM                (3)
#include "ops/mlp/mlp.h"

#include <vector>

#include "ops/activation/activation.h"
#include "ops/common/flops.h"
#include "ops/elementwise/elementwise.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

bool out_in(const MlpWeights& w) { return w.layout == WeightLayout::out_in; }

// A weight that maps `in` features to `out` features, in the MLP's layout.
void check_weight(const Context& ctx, const Tensor& x, const Tensor& w, const char* name, const MlpWeights& weights,
                  int64_t in, int64_t out) {
  BS_CHECK_INPUT(w.defined(), "mlp: ", name, " is undefined");
  BS_CHECK_INPUT(w.device() == ctx.device(), "mlp: ", name, " ", w.str(), " is on ", w.device().str(),
                 " but the context runs on ", ctx.device().str());
  BS_CHECK_INPUT(w.dtype() == x.dtype(), "mlp: dtypes differ: x ", x.str(), ", ", name, " ", w.str());
  const Shape expected = out_in(weights) ? Shape{out, in} : Shape{in, out};
  BS_CHECK_INPUT(w.shape() == expected, "mlp: ", name, " ", w.str(), " must be ", shape_str(expected), " (layout ",
                 out_in(weights) ? "out_in" : "in_out", ") for x ", x.str());
}

// d_ff from the first weight of the MLP (fc, or gate / gate_up).
int64_t hidden_size(const MlpWeights& w, MlpPath path) {
  const Tensor& first = !w.gated ? w.fc_weight : path == MlpPath::fused ? w.gate_up_weight : w.gate_weight;
  BS_CHECK_INPUT(first.defined() && first.dim() == 2, "mlp: ",
                 !w.gated ? "fc_weight" : path == MlpPath::fused ? "gate_up_weight" : "gate_weight",
                 first.defined() ? " must be 2-D, got " + first.str() : std::string(" is undefined"),
                 path == MlpPath::fused && !first.defined() ? " (call pack_gate_up once after loading)" : "");
  const int64_t rows_out = out_in(w) ? first.size(0) : first.size(1);
  return w.gated && path == MlpPath::fused ? rows_out / 2 : rows_out;
}

Shape with_last(const Tensor& x, int64_t last) {
  Shape s = x.shape();
  s.back() = last;
  return s;
}

// The composite paths, in terms of public ops (validated by mlp()).
void mlp_body(Context& ctx, const Tensor& x, const MlpWeights& weights, Tensor& y, MlpPath path, int64_t f) {
  const WeightLayout layout = weights.layout;
  const Activation act = weights.activation;

  if (!weights.gated) {
    Tensor hidden = ctx.empty(with_last(x, f), x.dtype());  // [rows, d_ff]
    if (path == MlpPath::naive) {
      linear(ctx, x, weights.fc_weight, weights.fc_bias, hidden, LinearPath::naive, layout);
      activation(ctx, hidden, hidden, act);
      linear(ctx, hidden, weights.proj_weight, weights.proj_bias, y, LinearPath::naive, layout);
    } else if (act == Activation::gelu_tanh) {  // the epilogue GEMM knows tanh-GELU only
      linear(ctx, x, weights.fc_weight, weights.fc_bias, hidden, LinearPath::epilogue, layout,
             LinearActivation::gelu_tanh);
      linear(ctx, hidden, weights.proj_weight, weights.proj_bias, y, LinearPath::epilogue, layout);
    } else {  // any other activation: bias in the epilogue, the activation its own kernel (3)
      linear(ctx, x, weights.fc_weight, weights.fc_bias, hidden, LinearPath::epilogue, layout);
      activation(ctx, hidden, hidden, act);
      linear(ctx, hidden, weights.proj_weight, weights.proj_bias, y, LinearPath::epilogue, layout);
    }
    return;
  }

  if (path == MlpPath::naive) {
    Tensor gate = ctx.empty(with_last(x, f), x.dtype());  // [rows, d_ff]
    Tensor up = ctx.empty(with_last(x, f), x.dtype());    // [rows, d_ff]
    linear(ctx, x, weights.gate_weight, Tensor(), gate, LinearPath::naive, layout);
    linear(ctx, x, weights.up_weight, Tensor(), up, LinearPath::naive, layout);
    activation(ctx, gate, gate, act);
    mul(ctx, gate, up, gate);
    linear(ctx, gate, weights.down_weight, Tensor(), y, LinearPath::naive, layout);
    return;
  }
  // fused: one GEMM gives [rows, 2·d_ff]; its column halves are gate and up (views).
  Tensor gate_up = ctx.empty(with_last(x, 2 * f), x.dtype());
  linear(ctx, x, weights.gate_up_weight, Tensor(), gate_up, LinearPath::epilogue, layout);
  const Tensor gate = gate_up.slice(-1, 0, f), up = gate_up.slice(-1, f, 2 * f);
  Tensor hidden = ctx.empty(with_last(x, f), x.dtype());  // [rows, d_ff]
  gated_activation(ctx, gate, up, hidden, act);
  linear(ctx, hidden, weights.down_weight, Tensor(), y, LinearPath::epilogue, layout);
}

}  // namespace

void pack_gate_up(Context& ctx, MlpWeights& weights) {
  BS_CHECK_INPUT(weights.gated, "pack_gate_up: the MLP is not gated (no gate and up projections)");
  const Tensor& gate = weights.gate_weight;
  const Tensor& up = weights.up_weight;
  BS_CHECK_INPUT(gate.defined() && up.defined(), "pack_gate_up: gate_weight and up_weight must both be defined");
  BS_CHECK_INPUT(gate.dim() == 2 && gate.shape() == up.shape() && gate.dtype() == up.dtype(),
                 "pack_gate_up: gate_weight ", gate.str(), " and up_weight ", up.str(),
                 " must be 2-D with the same shape and dtype");
  BS_CHECK_INPUT(gate.device() == ctx.device() && up.device() == ctx.device(), "pack_gate_up: gate_weight on ",
                 gate.device().str(), " and up_weight on ", up.device().str(), " must be on the context's ",
                 ctx.device().str());
  if (out_in(weights)) {
    // [F, d] and [F, d] -> [2F, d]: gate rows, then up rows: two contiguous device copies.
    Tensor packed = ctx.empty({2 * gate.size(0), gate.size(1)}, gate.dtype());
    const Tensor g = gate.is_contiguous() ? gate : ctx.copy_from(gate);
    const Tensor u = up.is_contiguous() ? up : ctx.copy_from(up);
    if (g.nbytes() > 0) {
      ctx.backend().copy_within(packed.data(), g.data(), g.nbytes());
      ctx.backend().copy_within(static_cast<char*>(packed.data()) + g.nbytes(), u.data(), u.nbytes());
    }
    weights.gate_up_weight = packed;
    return;
  }
  // [d, F] and [d, F] -> [d, 2F]: each row is gate's row then up's row. A one-time load step,
  // done through the host (exact: the values only move).
  const int64_t d = gate.size(0), f = gate.size(1);
  const std::vector<float> g = to_floats(gate), u = to_floats(up);
  std::vector<float> packed(static_cast<size_t>(d * 2 * f));
  for (int64_t r = 0; r < d; ++r)
    for (int64_t j = 0; j < f; ++j) {
      packed[r * 2 * f + j] = g[r * f + j];
      packed[r * 2 * f + f + j] = u[r * f + j];
    }
  Tensor out = ctx.empty({d, 2 * f}, gate.dtype());
  from_floats(out, packed);
  weights.gate_up_weight = out;
}

void mlp(Context& ctx, const Tensor& x, const MlpWeights& weights, Tensor& y, MlpPath path) {
  const char* kind = weights.gated ? "gated" : "plain";
  BS_CHECK_INPUT(!(weights.gated && path == MlpPath::epilogue), "mlp: path '", path_name(path),
                 "' does not apply to a ", kind, " MLP (use naive or fused)");
  BS_CHECK_INPUT(!(!weights.gated && path == MlpPath::fused), "mlp: path '", path_name(path),
                 "' does not apply to a ", kind, " MLP (use naive or epilogue)");
  BS_CHECK_INPUT(x.defined() && y.defined(), "mlp: x and y must be defined");
  BS_CHECK_INPUT(x.device() == ctx.device(), "mlp: x ", x.str(), " is on ", x.device().str(),
                 " but the context runs on ", ctx.device().str());
  BS_CHECK_INPUT(x.dim() >= 1, "mlp: x must be [rows, d_model], got ", x.str());
  BS_CHECK_INPUT(y.shape() == x.shape() && y.dtype() == x.dtype(), "mlp: output y ", y.str(),
                 " must have x's shape and dtype ", x.str());
  const int64_t d = x.size(-1), f = hidden_size(weights, path);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  double weight_bytes = 0;
  if (!weights.gated) {
    check_weight(ctx, x, weights.fc_weight, "fc_weight", weights, d, f);
    check_weight(ctx, x, weights.proj_weight, "proj_weight", weights, f, d);
    weight_bytes = tensor_bytes({&weights.fc_weight, &weights.fc_bias, &weights.proj_weight, &weights.proj_bias});
  } else {
    if (path == MlpPath::fused) {
      check_weight(ctx, x, weights.gate_up_weight, "gate_up_weight", weights, d, 2 * f);
      weight_bytes = tensor_bytes({&weights.gate_up_weight});
    } else {
      check_weight(ctx, x, weights.gate_weight, "gate_weight", weights, d, f);
      check_weight(ctx, x, weights.up_weight, "up_weight", weights, d, f);
      weight_bytes = tensor_bytes({&weights.gate_weight, &weights.up_weight});
    }
    check_weight(ctx, x, weights.down_weight, "down_weight", weights, f, d);
    weight_bytes += tensor_bytes({&weights.down_weight});
  }
  const double flops = mlp_flops(rows, d, f, weights.gated);
  OpRecord record{"mlp", path_name(path), profiler::Family::linear, {&x}, {&y}, flops, y.numel() == 0};
  record.with_bytes(record.bytes() + weight_bytes);  // x read, y written, and every weight read once
  run_composite_op(ctx, record, [&] { mlp_body(ctx, x, weights, y, path, f); });
}

double mlp_flops(int64_t rows, int64_t d_model, int64_t d_ff, bool gated) {
  return (gated ? 3 : 2) * gemm_flops(rows, d_ff, d_model);
}

int64_t mlp_scratch_elements(int64_t rows, int64_t d_ff, bool gated, MlpPath path) {
  if (!gated) return rows * d_ff;
  return (path == MlpPath::fused ? 3 : 2) * rows * d_ff;
}

}  // namespace blockscope::ops
