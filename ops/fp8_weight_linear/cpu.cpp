// CPU fp8_weight_linear:
//   M ≤ kFp8WeightSkinnyRows  the skinny kernel: the codes streamed once through cpu_kernels.h's
//                             dot products, output rows split over the threads -- for 2 rows or
//                             more of bf16 x, on x as it is where the CPU has AVX512_BF16
//                             (VDPBF16PS), else on x widened to f32 once by the CPU's best version;
//   larger M                  x widened to f32, the weight dequantized (code value · w_scale,
//                             rounded to f32) in panels of kPanelRows rows, each panel one sgemm
//                             into its columns;
// then w_scale (skinny only), bias, tanh-GELU and the single rounding into y, row by row.
// Recorded as one work item under the CUDA kernel's name; the implementation column says which.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "ops/fp8_weight_linear/backends.h"
#include "ops/fp8_weight_linear/cpu_kernels.h"
#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"
#include "runtime/fp8.h"

namespace blockscope::ops::cpu {

namespace {

// Weight rows dequantized per sgemm: 256 · K f32 (4 MiB at K = 4096) of scratch, wide enough
// for the GEMM to run at its speed.
constexpr int64_t kPanelRows = 256;
// Output rows per parallel work item of the skinny kernel (a multiple of every version's width).
constexpr int64_t kSkinnyChunk = 16;

// t [m, n] = (Σ_k x · code values) · w_scale, `dot` giving the sums of output rows [o0, o1).
template <typename Dot>
void skinny(int64_t m, const float* scale, int64_t k, int64_t n, std::vector<float>& t, Dot dot) {
  const int64_t chunks = (n + kSkinnyChunk - 1) / kSkinnyChunk;
#pragma omp parallel for if (n * k >= kParallelMinElements) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o0 = c * kSkinnyChunk, o1 = std::min(n, o0 + kSkinnyChunk);
    dot(o0, o1);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t o = o0; o < o1; ++o) t[r * n + o] *= scale[o];
  }
}

void panels(const std::vector<float>& xf, int64_t m, const uint8_t* w, const float* scale, int64_t k, int64_t n,
            Fp8Format format, std::vector<float>& t) {
  float values[256];
  for (int code = 0; code < 256; ++code) values[code] = fp8_to_float(static_cast<uint8_t>(code), format);
  std::vector<float> panel(static_cast<size_t>(std::min(n, kPanelRows) * k));
  for (int64_t o0 = 0; o0 < n; o0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, n - o0);
#pragma omp parallel for if (rows * k >= kParallelMinElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* codes = w + (o0 + r) * k;
      float* dst = panel.data() + r * k;
      const float s = scale[o0 + r];
      for (int64_t j = 0; j < k; ++j) dst[j] = values[codes[j]] * s;
    }
    // t[:, o0:o0 + rows] = x · panelᵀ
    blockscope::cpu::sgemm(false, true, m, rows, k, 1.0f, xf.data(), k, panel.data(), k, 0.0f, t.data() + o0, n);
  }
}

}  // namespace

void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu) {
  profiler::KernelScope kernel(ctx, kernel_names::fp8_weight_gemm(bias.defined(), gelu));
  const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
  const bool e5m2 = w.dtype() == DType::fp8_e5m2;
  const auto* codes = static_cast<const uint8_t*>(w.data());
  const float* scale = w_scale.data_as<const float>();
  std::vector<float> t(static_cast<size_t>(m * n));
  if (m >= 2 && m <= kFp8WeightSkinnyRows && x.dtype() == DType::bf16 && fp8_weight::bf16_dot_on_this_cpu()) {
    // bf16 x as it is: two products per lane per instruction (VDPBF16PS) -- for a batch; one row
    // has a product per code, and packing the codes into bf16 costs what it would save (measured:
    // bench/NOTES.md).
    const auto* xb = static_cast<const uint16_t*>(x.data());
    skinny(m, scale, k, n, t, [&](int64_t o0, int64_t o1) {
      fp8_weight::dot_rows_bf16(xb, m, codes, k, o0, o1, e5m2, t.data(), n);
    });
    kernel.set_implementation("FP8-weight skinny kernel, avx512_bf16 (VDPBF16PS on bf16 x)");
  } else if (m <= kFp8WeightSkinnyRows) {
    const std::vector<float> xf = contiguous_as_f32(x, m, k);
    const fp8_weight::Isa isa = fp8_weight::isas_on_this_cpu().front();
    skinny(m, scale, k, n, t, [&](int64_t o0, int64_t o1) {
      fp8_weight::dot_rows(isa, xf.data(), m, codes, k, o0, o1, e5m2, t.data(), n);
    });
    kernel.set_implementation(std::string("FP8-weight skinny kernel, ") + fp8_weight::isa_name(isa));
  } else {
    const std::vector<float> xf = contiguous_as_f32(x, m, k);
    panels(xf, m, codes, scale, k, n, fp8_format(w.dtype()), t);
    kernel.set_implementation(std::string("FP8 weights dequantized to f32 in panels of ") +
                              std::to_string(kPanelRows) + " rows, " + blockscope::cpu::sgemm_implementation());
  }

  std::vector<float> bias_f32;
  if (bias.defined()) {
    bias_f32.resize(static_cast<size_t>(n));
    load_row(bias.dtype(), bias.data(), bias_f32.data(), n);
  }
#pragma omp parallel for if (m * n >= kParallelMinElements) schedule(static)
  for (int64_t r = 0; r < m; ++r) {
    float* row = t.data() + r * n;
    if (!bias_f32.empty())
      for (int64_t j = 0; j < n; ++j) row[j] += bias_f32[j];
    if (gelu) gelu_tanh_row(row, n);
    store_row(y.dtype(), row, element_ptr(y, r * n), n);
  }
}

}  // namespace blockscope::ops::cpu
