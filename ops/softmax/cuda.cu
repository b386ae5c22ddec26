// CUDA softmax over the last dimension: plain, and fused with scale + causal mask (the
// fused_softmax attention path: one kernel instead of scale, masked_fill and softmax).
// Rows of up to 1024 elements: one warp per row (8 rows per block); up to 16384: one block per
// row; both hold the row in registers and read it once. Longer rows: three streaming passes.
// f32 statistics with the row max subtracted, so large logits never overflow; a fully masked
// row (all -inf) gives zeros, not NaN.
#include <type_traits>

#include "ops/softmax/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/row_kernels.cuh"
#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

constexpr float kLog2e = 1.4426950408889634f;

// Rows of n = sk scores: y = softmax(scale · x) with, when causal, element j of row r masked
// when j > i + sk - sq (i = r % sq: bottom-right aligned, as masked_fill_causal).
// Semantics (as the CPU backend): the max ignores NaN; a row whose max is -inf (every visible
// element -inf, or nothing visible) is zeros; otherwise a NaN anywhere visible makes the sum,
// and so the whole row, NaN.
//
// Register version (RowMode warp / block): the visible part of the row is loaded once into
// registers (16-byte packs when `VEC`), then max, then e = exp2((x - max) · scale·log2 e) with
// the scale folded into one multiply (scale >= 0; a negative scale takes the min instead), then
// the sum, then the stores. No branch per element, one exp per element.
template <typename T, bool VEC, bool WARP>
__device__ __forceinline__ void softmax_rows_regs(const T* x, T* y, int64_t rows, int n, int64_t sq, float scale,
                                                  bool causal) {
  constexpr int U = RowShape<T, VEC, WARP>::kUnits;
  __shared__ float scratch[32];
  const float c = scale * kLog2e;
  const bool negative = scale < 0.0f;
  for_each_group_row<WARP>(rows, [&](int64_t r, int rank, int group) {
    const T* in = x + r * n;
    T* out = y + r * n;
    int limit = n;  // columns j < limit take part
    if (causal) {
      const int64_t l = r % sq + n - sq + 1;
      limit = l < 0 ? 0 : static_cast<int>(l);
    }
    RowRegs<T, VEC, U> row;
    const float fill = negative ? INFINITY : -INFINITY;  // masked: contributes exp2(-inf) = 0
    row.load(in, n, limit, rank, group, fill);
    float m = fill;
    if (!negative) {
#pragma unroll
      for (int k = 0; k < RowRegs<T, VEC, U>::kCount; ++k) m = fmaxf(m, row.v[k]);
      m = group_max<WARP>(m, scratch);
    } else {
#pragma unroll
      for (int k = 0; k < RowRegs<T, VEC, U>::kCount; ++k) m = fminf(m, row.v[k]);
      m = -group_max<WARP>(-m, scratch);
    }
    const bool empty = m == fill;  // nothing visible, or every visible element -inf: zeros
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < RowRegs<T, VEC, U>::kCount; ++k) {
      // Masked and padding slots hold `fill` and give 0 (also when scale = 0, where
      // (fill - m) · 0 would be NaN); a NaN element gives NaN, and so a NaN sum.
      const float e = row.v[k] == fill ? 0.0f : exp2f((row.v[k] - m) * c);
      row.v[k] = e;
      s += e;
    }
    s = group_sum<WARP>(s, scratch);
    const float inv = empty ? 0.0f : 1.0f / s;
    row.store(out, n, rank, group, [&](int j, float e) { return j < limit && !empty ? e * inv : 0.0f; });
  });
}

// Rows longer than the register versions hold (over 16384 elements): three passes over the row
// (max, sum, store), each element by element or in packs; same semantics.
template <typename T>
__device__ __forceinline__ void softmax_rows_stream(const T* x, T* y, int64_t rows, int64_t n, int64_t sq,
                                                    float scale, bool causal, bool vectorized) {
  __shared__ float scratch[32];
  const float c = scale * kLog2e;
  const bool negative = scale < 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    T* out = y + r * n;
    int64_t limit = causal ? r % sq + n - sq + 1 : n;
    limit = limit < 0 ? 0 : limit;
    float m = negative ? INFINITY : -INFINITY;
    row_read(in, n, vectorized, [&](int64_t j, float v) {
      if (j < limit) m = negative ? fminf(m, v) : fmaxf(m, v);
    });
    m = negative ? -block_max(-m, scratch) : block_max(m, scratch);
    const bool empty = m == (negative ? INFINITY : -INFINITY);
    float s = 0.0f;
    row_read(in, n, vectorized, [&](int64_t j, float v) {
      if (j < limit) s += exp2f((v - m) * c);
    });
    const float inv = empty ? 0.0f : 1.0f / block_sum(s, scratch);
    row_transform(in, out, n, vectorized,
                  [&](int64_t j, float v) { return j < limit && !empty ? exp2f((v - m) * c) * inv : 0.0f; });
  }
}

// MODE: 0 = warp per row (registers), 1 = block per row (registers), 2 = streaming.
template <typename T, bool VEC, int MODE>
__device__ __forceinline__ void softmax_dispatch(const T* x, T* y, int64_t rows, int64_t n, int64_t sq, float scale,
                                                 bool causal) {
  if constexpr (MODE == 2) {
    softmax_rows_stream(x, y, rows, n, sq, scale, causal, VEC);
  } else {
    softmax_rows_regs<T, VEC, MODE == 0>(x, y, rows, static_cast<int>(n), sq, scale, causal);
  }
}

template <typename T, bool VEC, int MODE>
__global__ void __launch_bounds__(MODE == 0 ? 256 : 1024) softmax_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  softmax_dispatch<T, VEC, MODE>(x, y, rows, n, 1, 1.0f, false);
}

template <typename T, bool VEC, int MODE>
__global__ void __launch_bounds__(MODE == 0 ? 256 : 1024) softmax_causal_scale_kernel(const T* x, T* y, int64_t rows, int64_t sq,
                                                                    int64_t sk, float scale, bool causal) {
  softmax_dispatch<T, VEC, MODE>(x, y, rows, sk, sq, scale, causal);
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {


namespace {

int sm_count(Context& ctx) { return cuda_backend(ctx).properties().multiProcessorCount; }

RowLaunch plan_rows(Context& ctx, const Tensor& x, const Tensor& y) {
  return cuda::plan_row_launch("softmax", x, y, sm_count(ctx));
}

}  // namespace

void softmax(Context& ctx, const Tensor& x, Tensor& y) {
  const RowLaunch plan = plan_rows(ctx, x, y);
  if (plan.rows == 0) return;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    pick_row_kernel<T>(plan, sm_count(ctx), [&](auto vec, auto mode, const RowRegsLaunch& rl) {
      launch(ctx, kernel_names::kSoftmax, kernels::softmax_kernel<T, decltype(vec)::value, decltype(mode)::value>,
             rl.blocks, rl.threads, 0, x.data_as<const T>(),
             y.data_as<T>(), plan.rows, plan.n);
    });
  });
}

void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y) {
  BS_CHECK(!causal || x.dim() >= 2, "softmax_scale_causal: causal scores ", x.str(), " must be [..., Sq, Sk]");
  const RowLaunch plan = plan_rows(ctx, x, y);
  if (plan.rows == 0) return;
  const int64_t sq = x.dim() >= 2 ? x.size(-2) : 1;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    pick_row_kernel<T>(plan, sm_count(ctx), [&](auto vec, auto mode, const RowRegsLaunch& rl) {
      launch(ctx, kernel_names::kSoftmaxCausalScale,
             kernels::softmax_causal_scale_kernel<T, decltype(vec)::value, decltype(mode)::value>, rl.blocks, rl.threads, 0, x.data_as<const T>(),
             y.data_as<T>(), plan.rows, sq, plan.n, scale, causal);
    });
  });
}

}  // namespace blockscope::ops::cuda
