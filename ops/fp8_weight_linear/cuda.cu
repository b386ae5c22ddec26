// CUDA fp8_weight_linear: the linear's weight-streaming kernel reading FP8 codes
// (ops/linear/weight_streaming.cuh): each code widened exactly through f16 (cuda_fp8.h), the sums
// in f32, then the row's w_scale, the bias and tanh-GELU, rounded once into y. Rows in passes of
// 16 (grid.y): a decode step's M is one pass; every further pass streams the weight again.
// Vector loads where x's rows start 16-byte aligned and the codes' rows on a pack's bytes (8
// codes beside 8 bf16/f16 elements of x, 4 beside f32).
#include "ops/common/cuda/vector_io.cuh"
#include "ops/fp8_weight_linear/backends.h"
#include "ops/linear/weight_streaming.cuh"

namespace blockscope::ops::cuda {

void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu) {
  const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
  const int64_t pack = pack_elems(x.dtype());
  const auto aligned = [](const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  const int64_t x_row_bytes = k * static_cast<int64_t>(dtype_size(x.dtype()));
  const bool vector = aligned(x.data(), 16) && (m <= 1 || x_row_bytes % 16 == 0) && aligned(w.data(), pack) &&
                      (n <= 1 || k % pack == 0);
  launch_weight_streaming(ctx, kernel_names::fp8_weight_gemm(bias.defined(), gelu), x, k, w, w_scale, bias, gelu, y, m,
                          k, n, vector);
}

}  // namespace blockscope::ops::cuda
