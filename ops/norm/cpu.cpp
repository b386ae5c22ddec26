// CPU LayerNorm and RMSNorm: one "kernel" per call, one row per work item, statistics in f32.
//
// Sums use kLanes independent f32 accumulators combined at the end (as a warp's lanes are on
// CUDA): the error grows with N / kLanes terms per lane instead of N, and the loop vectorises.
// LayerNorm takes two passes (mean, then the mean of squared deviations): no cancellation when
// |mean| is large compared with the spread.
#include <cmath>
#include <vector>

#include "ops/norm/backends.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

constexpr int kLanes = 8;

// Sum of f(v[i]) over i < n with kLanes partial sums.
template <typename F>
float lane_sum(const float* v, int64_t n, F f) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += f(v[i + l]);
  for (; i < n; ++i) lanes[i % kLanes] += f(v[i]);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

std::vector<float> widen_vector(const Tensor& t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (t.defined()) load_row(t.dtype(), t.data(), out.data(), n);
  return out;
}

}  // namespace

void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kLayerNorm);
  RowLayout xr;
  row_layout(x, &xr);  // checked by ops::layer_norm
  const int64_t n = xr.cols;  // x, y: [rows, n]
  const std::vector<float> w = widen_vector(weight, n), b = widen_vector(bias, n);  // zero bias when undefined
#pragma omp parallel if (xr.rows * n >= kParallelMinElements)
  {
    std::vector<float> row(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < xr.rows; ++r) {
      load_row(x.dtype(), element_ptr(x, r * xr.row_stride), row.data(), n);
      const float mean = lane_sum(row.data(), n, [](float v) { return v; }) / static_cast<float>(n);
      const float var = lane_sum(row.data(), n, [mean](float v) { return (v - mean) * (v - mean); }) /
                        static_cast<float>(n);  // biased, as torch.nn.LayerNorm
      const float rstd = 1.0f / std::sqrt(var + eps);
      for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) * rstd * w[j] + b[j];
      store_row(y.dtype(), row.data(), element_ptr(y, r * n), n);
    }
  }
}

void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kRmsNorm);
  RowLayout xr;
  row_layout(x, &xr);  // checked by ops::rms_norm
  const int64_t n = xr.cols;  // x, y: [rows, n]
  const std::vector<float> w = widen_vector(weight, n);
  const DType dtype = y.dtype();
#pragma omp parallel if (xr.rows * n >= kParallelMinElements)
  {
    std::vector<float> row(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < xr.rows; ++r) {
      load_row(x.dtype(), element_ptr(x, r * xr.row_stride), row.data(), n);
      const float mean_square = lane_sum(row.data(), n, [](float v) { return v * v; }) / static_cast<float>(n);
      const float rrms = 1.0f / std::sqrt(mean_square + eps);
      // Normalised and scaled in f32, rounded once (as the CUDA kernel does). Hugging Face
      // rounds the normalised value to the input dtype before the weight multiply; that second
      // rounding (at most u of the dtype) is left out so both backends agree.
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] * rrms * w[j];
      store_row(dtype, row.data(), element_ptr(y, r * n), n);
    }
  }
}

}  // namespace blockscope::ops::cpu
