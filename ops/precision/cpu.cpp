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

using scale_rule::max_keeping_nan;

// One pass over x (contiguous), chunk by chunk in parallel: with y, y = x · s elementwise (each
// product rounded to f32, then stored in y's type -- into FP8 saturating: quantize and
// dequantize alike); returns max |x| (0 for no elements, NaN if x holds one) when `amax`.
float scaled_convert(const Tensor& x, float s, Tensor* y, bool amax) {
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  const int64_t x_size = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t y_size = y != nullptr ? static_cast<int64_t>(dtype_size(y->dtype())) : 0;
  float result = 0.0f;
#pragma omp parallel if (n >= kParallelMinElements)
  {
    std::vector<float> row(kChunk);
    float local = 0.0f;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t len = std::min(kChunk, n - c * kChunk);
      load_row(x.dtype(), static_cast<const char*>(x.data()) + c * kChunk * x_size, row.data(), len);
      if (amax)
        for (int64_t i = 0; i < len; ++i) local = max_keeping_nan(local, std::fabs(row[i]));
      if (y == nullptr) continue;
      for (int64_t i = 0; i < len; ++i) row[i] *= s;
      store_row(y->dtype(), row.data(), static_cast<char*>(y->data()) + c * kChunk * y_size, len);
    }
#pragma omp critical
    result = max_keeping_nan(result, local);
  }
  return result;
}

}  // namespace

void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax) {
  profiler::KernelScope kernel(ctx, amax.defined() ? kernel_names::kQuantizeAmax : kernel_names::kQuantize);
  const float x_amax = scaled_convert(x, *scale.data_as<const float>(), &y, amax.defined());
  if (amax.defined()) {
    float* running = amax.data_as<float>();
    *running = max_keeping_nan(*running, x_amax);
  }
}

void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y) {
  profiler::KernelScope kernel(ctx, kernel_names::kDequantize);
  scaled_convert(x, *scale_inv.data_as<const float>(), &y, false);
}

void amax(Context& ctx, const Tensor& x, Tensor& amax) {
  profiler::KernelScope kernel(ctx, kernel_names::kAmax);
  *amax.data_as<float>() = scaled_convert(x, 1.0f, nullptr, true);
}

void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation) {
  profiler::KernelScope kernel(ctx, kernel_names::kScaleUpdate);
  float* history = amax_history.data_as<float>();
  const int64_t length = amax_history.numel();
  const float fp8_max = static_cast<float>(dtype_max_finite(update.format));
  float* s = scale.data_as<float>();
  if (saturation.defined()) {
    scale_rule::count_saturation(history[0], *s, fp8_max, update.format == DType::fp8_e5m2, saturation.data_as<float>());
  }
  float amax = history[0];
  if (update.algo == AmaxAlgo::max)
    for (int64_t i = 1; i < length; ++i) amax = max_keeping_nan(amax, history[i]);
  *s = scale_rule::next_scale(amax, *s, fp8_max, update.margin);
  *scale_inv.data_as<float>() = 1.0f / *s;
  if (update.roll) {
    for (int64_t i = length - 1; i > 0; --i) history[i] = history[i - 1];
    history[0] = 0.0f;
  }
}

}  // namespace blockscope::ops::cpu
