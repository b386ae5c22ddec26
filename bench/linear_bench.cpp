// matmul + add (the series' Part 1) and linear (nn.Linear, Part 2) on every path:
// naive (GEMM, then a bias-add kernel), epilogue (bias in the GEMM), addmm (bias broadcast
// copy, then GEMM with beta = 1: what torch.compile makes of matmul + add).
//
// Shapes: the series' squares 64 and 4096 and the MLP's 8192 x 3072 x 768 on CUDA; small
// squares on CPU; tiny ones with --smoke.
#include <vector>

#include "bench/support/bench_support.h"
#include "ops/linear/linear.h"

namespace blockscope::bench {
namespace {

struct GemmShape {
  int64_t m, n, k;  // Y [m, n] = X [m, k] · W + bias [n]
};

const std::vector<ops::LinearPath> kPaths = ops::all_paths<ops::LinearPath>(ops::PathOp::linear);

// workload "matmul_add": W is [k, n] (in_out, Y = A·B + c); "linear": W is [n, k] (out_in,
// nn.Linear's layout; the transpose is a GEMM flag, never a copy).
void register_gemm(const char* workload, ops::WeightLayout layout, Device device, DType dtype, const GemmShape& s,
                   ops::LinearPath path) {
  Case c;
  c.key = workload_key(workload, ops::path_name(path), dtype, {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = dtype;
  c.flops = ops::linear_flops(s.m, s.k, s.n);
  c.bytes = static_cast<double>(dtype_size(dtype)) * static_cast<double>(s.m * s.k + s.k * s.n + s.n + s.m * s.n);
  register_case(c, [=](Context& ctx) {
    const Shape w_shape = layout == ops::WeightLayout::in_out ? Shape{s.k, s.n} : Shape{s.n, s.k};
    Tensor x = random_tensor(ctx, {s.m, s.k}, dtype, 1);
    Tensor w = random_tensor(ctx, w_shape, dtype, 2);
    Tensor bias = random_tensor(ctx, {s.n}, dtype, 3);
    Tensor y = ctx.empty({s.m, s.n}, dtype);
    return [&ctx, x, w, bias, y, path, layout]() mutable { ops::linear(ctx, x, w, bias, y, path, layout); };
  });
}

void register_all() {
  const bool smoke = options().smoke;
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<GemmShape> squares, linears;
    if (smoke) {
      dtypes = {DType::f32};
      squares = {{64, 64, 64}, {33, 17, 29}};
      linears = {{64, 48, 32}};
    } else if (device.is_cpu()) {
      dtypes = {DType::f32, DType::bf16};
      squares = {{64, 64, 64}, {256, 256, 256}, {512, 512, 512}};
      linears = {{512, 3072, 768}};
    } else {
      dtypes = {DType::bf16, DType::f16, DType::f32};
      squares = {{64, 64, 64}, {4096, 4096, 4096}};
      linears = {{8192, 3072, 768}};
    }
    for (DType dtype : dtypes) {
      for (const GemmShape& s : squares)
        for (ops::LinearPath path : kPaths) register_gemm("matmul_add", ops::WeightLayout::in_out, device, dtype, s, path);
      for (const GemmShape& s : linears)
        for (ops::LinearPath path : kPaths) register_gemm("linear", ops::WeightLayout::out_in, device, dtype, s, path);
    }
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
