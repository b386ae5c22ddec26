// CUDA softmax over the last dimension: plain, and fused with scale + causal mask (the
// fused_softmax attention path: one kernel instead of scale, masked_fill and softmax).
// One block per row; f32 statistics with the running max subtracted (online softmax), so
// large logits never overflow; a fully masked row (all -inf) gives zeros, not NaN.
#include "ops/common/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/launch.cuh"
#include "runtime/cuda/row_kernels.cuh"
#include "runtime/cuda/vector_io.cuh"

namespace blockscope::cuda_kernels {

// Adds value v to a running (max m, sum s of exp(x - m)). -inf contributes nothing.
// A NaN v makes s NaN and s stays NaN (NaN · 0 = NaN), so a row with a NaN and a finite value
// comes out all NaN, as on the CPU. (s was reset to 0 when m was still -inf, so a NaN that a
// thread met before its first finite value was lost and the row looked valid.)
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  if (v == -INFINITY) return;
  if (v > m) {
    s = s * expf(m - v) + 1.0f;  // m = -inf: exp(-inf) = 0, s (0, or a NaN) · 0 + 1
    m = v;
  } else {
    s += expf(v - m);  // also propagates NaN inputs
  }
}

// rows of n = sk scores: y = softmax(scale · x) with, when causal, element j of row r masked
// when j > i + sk - sq (i = r % sq: bottom-right aligned, as masked_fill_causal).
template <typename T>
__device__ __forceinline__ void softmax_rows(const T* x, T* y, int64_t rows, int64_t n, int64_t sq, float scale,
                                             bool causal, bool vectorized) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    T* out = y + r * n;
    // Columns j < limit take part; the rest are masked (limit <= 0: the whole row).
    const int64_t limit = causal ? r % sq + n - sq + 1 : n;

    float m = -INFINITY, s = 0.0f;
    row_read(in, n, vectorized, [&](int64_t j, float v) {
      if (j < limit) online_add(m, s, v * scale);
    });
    const float row_max = block_max(m, scratch);
    // A thread with m = -inf has s = 0, or NaN if it met a NaN: s · 0 keeps that NaN.
    const float row_sum = block_sum(m == -INFINITY ? s * 0.0f : s * expf(m - row_max), scratch);
    const bool empty = row_max == -INFINITY;  // every element masked or -inf: zeros
    const float inv_sum = empty ? 0.0f : 1.0f / row_sum;

    row_transform(in, out, n, vectorized, [&](int64_t j, float v) {
      return j < limit && !empty ? expf(v * scale - row_max) * inv_sum : 0.0f;
    });
  }
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t n, bool vectorized) {
  softmax_rows(x, y, rows, n, 1, 1.0f, false, vectorized);
}

template <typename T>
__global__ void softmax_causal_scale_kernel(const T* x, T* y, int64_t rows, int64_t sq, int64_t sk, float scale,
                                            bool causal, bool vectorized) {
  softmax_rows(x, y, rows, sk, sq, scale, causal, vectorized);
}

}  // namespace blockscope::cuda_kernels

namespace blockscope::ops::cuda {

using cuda_detail::dispatch_dtype;
using cuda_detail::launch;
using cuda_detail::RowLaunch;

namespace {

RowLaunch plan_rows(Context& ctx, const Tensor& x, const Tensor& y) {
  return cuda_detail::plan_row_launch("softmax", x, y, cuda_backend(ctx).properties().multiProcessorCount);
}

}  // namespace

void softmax(Context& ctx, const Tensor& x, Tensor& y) {
  const RowLaunch plan = plan_rows(ctx, x, y);
  if (plan.rows == 0) return;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, "softmax_kernel", cuda_kernels::softmax_kernel<T>, plan.blocks, plan.threads, 0, x.data_as<const T>(),
           y.data_as<T>(), plan.rows, plan.n, plan.vectorized);
  });
}

void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y) {
  BS_CHECK(!causal || x.dim() >= 2, "softmax_scale_causal: causal scores ", x.str(), " must be [..., Sq, Sk]");
  const RowLaunch plan = plan_rows(ctx, x, y);
  if (plan.rows == 0) return;
  const int64_t sq = x.dim() >= 2 ? x.size(-2) : 1;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch(ctx, "softmax_causal_scale_kernel", cuda_kernels::softmax_causal_scale_kernel<T>, plan.blocks,
           plan.threads, 0, x.data_as<const T>(), y.data_as<T>(), plan.rows, sq, plan.n, scale, causal,
           plan.vectorized);
  });
}

}  // namespace blockscope::ops::cuda
