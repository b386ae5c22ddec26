// CPU fp8_linear: the FP8 codes widened to f32 (exactly), one f32 GEMM with alpha = scale_x_inv ·
// scale_w_inv, then bias, tanh-GELU, the amax and the store (into FP8 through out_scale,
// saturating) row by row -- cuBLASLt's formula, recorded as one work item under the CUDA
// kernel's name.
#include <cmath>
#include <vector>

#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "ops/fp8_linear/backends.h"
#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::ops::cpu {

namespace {

float scalar(const Tensor& t) { return *t.data_as<const float>(); }

}  // namespace

void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options) {
  profiler::KernelScope kernel(ctx, kernel_names::fp8_gemm(bias.defined(), options.gelu));
  const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
  const std::vector<float> xf = contiguous_as_f32(x, m, k), wf = contiguous_as_f32(w, n, k);
  std::vector<float> t(static_cast<size_t>(m * n));
  blockscope::cpu::sgemm(false, true, m, n, k, scalar(scale_x_inv) * scalar(scale_w_inv), xf.data(), k, wf.data(), k,
                         0.0f, t.data(), n);

  std::vector<float> bias_f32;
  if (bias.defined()) {
    bias_f32.resize(static_cast<size_t>(n));
    load_row(bias.dtype(), bias.data(), bias_f32.data(), n);
  }
  const bool fp8_out = is_fp8(y.dtype());
  const float out_scale = fp8_out ? scalar(options.out_scale) : 1.0f;
  const size_t esize = dtype_size(y.dtype());
  float amax = 0.0f;
#pragma omp parallel if (m * n >= kParallelMinElements)
  {
    std::vector<float> scaled(static_cast<size_t>(n));
    float local = 0.0f;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      float* row = t.data() + r * n;
      if (!bias_f32.empty())
        for (int64_t j = 0; j < n; ++j) row[j] += bias_f32[j];
      if (options.gelu) gelu_tanh_row(row, n);
      for (int64_t j = 0; j < n; ++j) local = std::fmax(local, std::fabs(row[j]));  // NaN skipped, as the sim's AMAX_D
      char* dst = static_cast<char*>(y.data()) + r * n * static_cast<int64_t>(esize);
      if (fp8_out) {
        for (int64_t j = 0; j < n; ++j) scaled[j] = row[j] * out_scale;
        store_row(y.dtype(), scaled.data(), dst, n);  // saturating
      } else {
        store_row(y.dtype(), row, dst, n);
      }
    }
#pragma omp critical
    amax = std::fmax(amax, local);
  }
  if (options.out_amax.defined()) *options.out_amax.data_as<float>() = amax;
}

}  // namespace blockscope::ops::cpu
