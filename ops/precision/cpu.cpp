// CPU precision ops: one work item each, recorded under the CUDA kernel's name. Rows of 4096
// elements go through f32 (ops/common/cpu_rows.h); the FP8 codes are runtime/fp8.h's, the
// same bits as the CUDA kernels' cuda_fp8.h conversions. amax keeps a NaN (a plain max would
// drop it): a NaN in x must reach the recipe, which then keeps its old scale.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common/cpu_rows.h"
#include "ops/precision/backends.h"
#include "ops/precision/scale_rule.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

namespace {

constexpr int64_t kChunk = 4096;

// max(a, |v|) for each v, NaN-propagating.
float fold_amax(float a, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float m = std::fabs(v[i]);
    a = (m > a || m != m) ? m : a;
    if (a != a) return a;
  }
  return a;
}

// max |x| over x's elements (0 for none), chunk by chunk in parallel.
float amax_of(const Tensor& x) {
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  const size_t esize = dtype_size(x.dtype());
  float result = 0.0f;
#pragma omp parallel if (n >= kParallelMinElements)
  {
    std::vector<float> row(kChunk);
    float local = 0.0f;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t len = std::min(kChunk, n - c * kChunk);
      load_row(x.dtype(), static_cast<const char*>(x.data()) + c * kChunk * static_cast<int64_t>(esize), row.data(), len);
      local = fold_amax(local, row.data(), len);
    }
#pragma omp critical
    result = (local > result || local != local) ? local : result;
  }
  return result;
}

// y = x · s elementwise, both contiguous: each product rounded to f32, then stored in y's type
// (into FP8: saturating) -- quantize and dequantize alike.
void scaled_convert(const Tensor& x, float s, Tensor& y) {
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  const int64_t x_size = static_cast<int64_t>(dtype_size(x.dtype())), y_size = static_cast<int64_t>(dtype_size(y.dtype()));
#pragma omp parallel if (n >= kParallelMinElements)
  {
    std::vector<float> row(kChunk);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t len = std::min(kChunk, n - c * kChunk);
      load_row(x.dtype(), static_cast<const char*>(x.data()) + c * kChunk * x_size, row.data(), len);
      for (int64_t i = 0; i < len; ++i) row[i] *= s;
      store_row(y.dtype(), row.data(), static_cast<char*>(y.data()) + c * kChunk * y_size, len);
    }
  }
}

}  // namespace

void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax) {
  profiler::KernelScope kernel(ctx, amax.defined() ? kernel_names::kQuantizeAmax : kernel_names::kQuantize);
  scaled_convert(x, *scale.data_as<const float>(), y);
  if (amax.defined()) {
    float* running = amax.data_as<float>();
    const float a = amax_of(x);
    *running = (a > *running || a != a) ? a : *running;
  }
}

void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kDequantize);
  scaled_convert(x, *scale_inv.data_as<const float>(), y);
}

void amax(Context& ctx, const Tensor& x, Tensor& amax) {
  profiler::KernelScope kernel(ctx, kernel_names::kAmax);
  *amax.data_as<float>() = amax_of(x);
}

void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update) {
  profiler::KernelScope kernel(ctx, kernel_names::kScaleUpdate);
  float* history = amax_history.data_as<float>();
  const int64_t length = amax_history.numel();
  float amax = history[0];
  if (update.algo == AmaxAlgo::max)
    for (int64_t i = 1; i < length; ++i) amax = scale_rule::max_keeping_nan(amax, history[i]);
  float* s = scale.data_as<float>();
  *s = scale_rule::next_scale(amax, *s, static_cast<float>(dtype_max_finite(update.format)), update.margin);
  *scale_inv.data_as<float>() = 1.0f / *s;
  if (update.roll) {
    for (int64_t i = length - 1; i > 0; --i) history[i] = history[i - 1];
    history[0] = 0.0f;
  }
}

}  // namespace blockscope::ops::cpu
