// CUDA LayerNorm and RMSNorm over the last dimension: one block per row, statistics in f32.
// LayerNorm takes two passes over the row for its statistics (mean, then the centred sum of
// squares) rather than E[x²] - E[x]², which cancels badly when |mean| ≫ std; the row is small
// enough to stay in L1/L2 between passes.
#include "ops/common/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/launch.cuh"
#include "runtime/cuda/row_kernels.cuh"
#include "runtime/cuda/vector_io.cuh"

namespace blockscope::cuda_kernels {

// x, y: [rows, n]; row r of x starts at x + r·x_ld (x may be a row-strided view, y is
// contiguous); weight, bias: [n] (bias may be null).
// `vectorized`: x and y 16-byte aligned, n and x_ld whole numbers of packs (weight and bias
// are read element by element, so their alignment does not matter).
template <typename T>
__global__ void layer_norm_kernel(const T* x, int64_t x_ld, const T* weight, const T* bias, T* y, int64_t rows,
                                  int64_t n, float eps, bool vectorized) {
  __shared__ float scratch[32];
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * x_ld;
    float sum = 0.0f;
    row_read(in, n, vectorized, [&](int64_t, float v) { sum += v; });
    const float mean = block_sum(sum, scratch) * inv_n;
    float centred = 0.0f;
    row_read(in, n, vectorized, [&](int64_t, float v) { centred += (v - mean) * (v - mean); });
    const float rstd = rsqrtf(block_sum(centred, scratch) * inv_n + eps);
    row_transform(in, y + r * n, n, vectorized, [&](int64_t j, float v) {
      const float scaled = (v - mean) * rstd * to_float(weight[j]);
      return bias != nullptr ? scaled + to_float(bias[j]) : scaled;
    });
  }
}

// y = x / sqrt(mean(x²) + eps) · weight.
template <typename T>
__global__ void rms_norm_kernel(const T* x, int64_t x_ld, const T* weight, T* y, int64_t rows, int64_t n,
                                float eps, bool vectorized) {
  __shared__ float scratch[32];
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * x_ld;
    float squares = 0.0f;
    row_read(in, n, vectorized, [&](int64_t, float v) { squares += v * v; });
    const float rstd = rsqrtf(block_sum(squares, scratch) * inv_n + eps);
    row_transform(in, y + r * n, n, vectorized,
                  [&](int64_t j, float v) { return v * rstd * to_float(weight[j]); });
  }
}

}  // namespace blockscope::cuda_kernels

namespace blockscope::ops::cuda {

using cuda_detail::dispatch_dtype;
using cuda_detail::launch;
using cuda_detail::RowLaunch;

namespace {

RowLaunch plan_norm(Context& ctx, const char* op, const Tensor& x, const Tensor& y) {
  // x may be row-strided (a column slice), as on the CPU: strided_x_rows = true.
  return cuda_detail::plan_row_launch(op, x, y, cuda_backend(ctx).properties().multiProcessorCount, true);
}

}  // namespace

void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) {
  const RowLaunch plan = plan_norm(ctx, "layer_norm", x, y);
  if (plan.rows == 0) return;
  const void* bias_data = bias.defined() ? bias.data() : nullptr;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, "layer_norm_kernel", cuda_kernels::layer_norm_kernel<T>, plan.blocks, plan.threads, 0,
           x.data_as<const T>(), plan.x_ld, weight.data_as<const T>(), static_cast<const T*>(bias_data), y.data_as<T>(),
           plan.rows, plan.n, eps, plan.vectorized);
  });
}

void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  const RowLaunch plan = plan_norm(ctx, "rms_norm", x, y);
  if (plan.rows == 0) return;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, "rms_norm_kernel", cuda_kernels::rms_norm_kernel<T>, plan.blocks, plan.threads, 0,
           x.data_as<const T>(), plan.x_ld, weight.data_as<const T>(), y.data_as<T>(), plan.rows, plan.n, eps,
           plan.vectorized);
  });
}

}  // namespace blockscope::ops::cuda
