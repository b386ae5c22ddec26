// CPU softmax kernels: one row per work item, computed in f32 with the row max subtracted.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/softmax/backends.h"
#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

// Softmax of row[0, n) in place. A row with no finite maximum (every entry -inf: fully
// masked) becomes zeros rather than 0/0 = NaN: the behaviour softmax.h documents.
// The three passes are the vectorised row kernels of cpu_math.h (AVX2 clone where available;
// exp_f32 is within 2 ulp of std::exp). The sum is blocked: rounding grows with the block
// length plus the number of blocks rather than with n, so rows of thousands stay within a few
// f32 ulps of the float64 reference. exp(x - max) <= 1: no overflow however large the logits.
void softmax_in_place(float* row, int64_t n) {
  const float max_value = row_max(row, n);
  if (max_value == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + n, 0.0f);
    return;
  }
  const float sum = exp_shifted_sum(row, n, max_value);
  scale_row(row, n, 1.0f / sum);
}

// Calls fn(row_index, f32 row buffer) for every row of x [rows, n] with the row loaded, then
// stores the buffer into y. One f32 row buffer per thread, allocated through the context.
template <typename Fn>
void for_each_row(Context& ctx, const Tensor& x, Tensor& y, Fn fn) {
  const DType dtype = x.dtype();
  const int64_t n = x.size(-1);
  const int64_t rows = x.numel() / n;
  // Small inputs stay on one thread: a parallel region costs more than the rows themselves.
  constexpr int64_t kParallelElements = 1 << 15;
  const int threads =
      x.numel() < kParallelElements ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), rows));
  Tensor scratch = ctx.empty({threads, n}, DType::f32);
  float* buffers = scratch.data_as<float>();
  const void* x_data = x.data();
  void* y_data = y.data();
#pragma omp parallel num_threads(threads)
  {
    float* row = buffers + static_cast<int64_t>(omp_get_thread_num()) * n;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      load_row(dtype, element_at(dtype, x_data, r * n), row, n);
      fn(r, row);
      store_row(dtype, row, element_at(dtype, y_data, r * n), n);
    }
  }
}

}  // namespace

void softmax(Context& ctx, const Tensor& x, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kSoftmax);
  const int64_t n = x.size(-1);
  for_each_row(ctx, x, y, [n](int64_t, float* row) { softmax_in_place(row, n); });
}

void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kSoftmaxCausalScale);
  const int64_t sq = x.size(-2), sk = x.size(-1);
  for_each_row(ctx, x, y, [=](int64_t r, float* row) {
    // Query i = r mod Sq sees keys j <= i + Sk - Sq (bottom-right aligned); the rest are -inf
    // logits, i.e. probability 0. No visible key at all: a zero row (as softmax defines it).
    const int64_t i = r % sq;
    const int64_t visible = causal ? std::clamp<int64_t>(i + sk - sq + 1, 0, sk) : sk;
    scale_row(row, visible, scale);
    softmax_in_place(row, visible);
    std::fill(row + visible, row + sk, 0.0f);
  });
}

}  // namespace blockscope::ops::cpu
