// The transformer MLP on its paths (ops/common/paths.h): the series' GeGLU (batch 64 x seq 128 =
// 8192 tokens, 768 -> 3072, no biases) naive (5 kernels) vs fused (gate|up GEMM, one act*mul
// kernel, down GEMM: 3), and GPT-2's plain MLP naive (5) vs epilogue (GELU_BIAS / BIAS: 2).
// The series' shape on CUDA; 256 tokens on CPU; tiny with --smoke.
#include <vector>

#include "bench/support/bench_support.h"
#include "ops/mlp/mlp.h"

namespace blockscope::bench {
namespace {

struct MlpShape {
  int64_t tokens, d_model, d_ff;  // x: [tokens, d_model], hidden [tokens, d_ff]
};

void register_mlp(Device device, DType dtype, const MlpShape& s, bool gated, ops::MlpPath path) {
  Case c;
  c.key = workload_key(gated ? "mlp_geglu" : "mlp_gelu", ops::path_name(path), dtype,
                       {{"T", s.tokens}, {"D", s.d_model}, {"F", s.d_ff}});
  c.device = device;
  c.dtype = dtype;
  // GEMM FLOPs only (2 GEMMs of 2·T·D·F plain, 3 gated); bytes: x, y and every weight once.
  set_cost(c, "mlp", {ops::path_name(path), "gelu_tanh", {{"T", s.tokens}, {"D", s.d_model}, {"F", s.d_ff}},
                      {{"gated", gated}, {"bias", !gated}}});
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    auto weights = std::make_shared<ops::MlpWeights>();
    weights->gated = gated;
    weights->activation = ops::Activation::gelu_tanh;
    weights->layout = ops::WeightLayout::out_in;
    if (gated) {
      weights->gate_weight = random_tensor(ctx, {s.d_ff, s.d_model}, dtype, 41);
      weights->up_weight = random_tensor(ctx, {s.d_ff, s.d_model}, dtype, 42);
      weights->down_weight = random_tensor(ctx, {s.d_model, s.d_ff}, dtype, 43);
      if (path == ops::MlpPath::fused) ops::pack_gate_up(ctx, *weights);  // once, at load
    } else {
      weights->fc_weight = random_tensor(ctx, {s.d_ff, s.d_model}, dtype, 44);
      weights->fc_bias = random_tensor(ctx, {s.d_ff}, dtype, 45);
      weights->proj_weight = random_tensor(ctx, {s.d_model, s.d_ff}, dtype, 46);
      weights->proj_bias = random_tensor(ctx, {s.d_model}, dtype, 47);
    }
    Tensor x = random_tensor(ctx, {s.tokens, s.d_model}, dtype, 48);
    Tensor y = ctx.empty({s.tokens, s.d_model}, dtype);
    return [&ctx, weights, x, y, path]() mutable { ops::mlp(ctx, x, *weights, y, path); };
  });
}

void register_all() {
  const bool smoke = options().smoke;
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<MlpShape> shapes;
    if (smoke) {
      dtypes = {DType::f32};
      shapes = {{16, 64, 128}};
    } else if (device.is_cpu()) {
      dtypes = {DType::f32, DType::bf16};
      shapes = {{256, 768, 3072}};
    } else {
      dtypes = {DType::bf16, DType::f16};
      shapes = {{64 * 128, 768, 3072}};  // the series: batch 64, seq 128
    }
    for (DType dtype : dtypes) {
      for (const MlpShape& s : shapes) {
        // Every MLP path of the path table, on the MLPs it applies to.
        for (const ops::PathInfo& row : ops::paths_of(ops::PathOp::mlp)) {
          const auto path = static_cast<ops::MlpPath>(row.value);
          if (row.gated_mlp) register_mlp(device, dtype, s, true, path);
          if (row.plain_mlp) register_mlp(device, dtype, s, false, path);
        }
      }
    }
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
