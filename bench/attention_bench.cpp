// Attention on every path of the path table (ops/common/paths.h): naive (6 kernels,
// out-of-place masked_fill), inplace (5), fused_softmax (3) and flash (1, no S x S scores).
//
// Shapes: the series' B=8, H=16, S=1024, D=64 causal and long sequences (8k with D=64, 16k
// with D=128) on CUDA; a smaller head count and S up to 2048 on CPU; tiny with --smoke (one
// case large enough that the scores matrix dominates memory, for the peak_extra_bytes gate).
#include <cmath>
#include <vector>

#include "bench/support/bench_support.h"
#include "ops/attention/attention.h"

namespace blockscope::bench {
namespace {

struct AttentionShape {
  int64_t batch, heads, seq, head_dim;
  bool causal;
};

const std::vector<ops::AttentionPath> kPaths = ops::all_paths<ops::AttentionPath>(ops::PathOp::attention);

void register_attention(Device device, DType dtype, const AttentionShape& s, ops::AttentionPath path) {
  Case c;
  c.key = workload_key("attention", ops::path_name(path), dtype,
                       {{"B", s.batch}, {"H", s.heads}, {"S", s.seq}, {"D", s.head_dim}, {"causal", s.causal ? 1 : 0}});
  c.device = device;
  c.dtype = dtype;
  // Bytes: q, k, v read once and out written once, the least any path can move (flash's target).
  set_cost(c, "attention", {ops::path_name(path), "",
                            {{"B", s.batch}, {"H", s.heads}, {"Hkv", s.heads}, {"Sq", s.seq}, {"Sk", s.seq}, {"D", s.head_dim}},
                            {{"causal", s.causal}}});
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    const Shape shape{s.batch, s.heads, s.seq, s.head_dim};
    Tensor q = random_tensor(ctx, shape, dtype, 31);
    Tensor k = random_tensor(ctx, shape, dtype, 32);
    Tensor v = random_tensor(ctx, shape, dtype, 33);
    Tensor out = ctx.empty(shape, dtype);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    return [&ctx, q, k, v, out, path, s, scale]() mutable { ops::attention(ctx, q, k, v, out, path, s.causal, scale); };
  });
}

void register_all() {
  const bool smoke = options().smoke;
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<AttentionShape> shapes;
    if (smoke) {
      dtypes = {DType::f32};
      shapes = {{1, 2, 512, 64, true}, {1, 3, 33, 16, false}};
    } else if (device.is_cpu()) {
      dtypes = {DType::f32, DType::bf16};
      shapes = {{1, 4, 256, 64, true}, {1, 2, 1024, 64, true}, {1, 1, 2048, 64, true}};
    } else {
      dtypes = {DType::bf16, DType::f16};
      shapes = {{8, 16, 1024, 64, true}, {8, 16, 1024, 64, false}, {1, 16, 8192, 64, true},
                {1, 16, 16384, 128, true}};
    }
    for (DType dtype : dtypes)
      for (const AttentionShape& s : shapes)
        for (ops::AttentionPath path : kPaths) register_attention(device, dtype, s, path);
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
