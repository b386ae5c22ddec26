// CUDA LayerNorm and RMSNorm over the last dimension, statistics in f32. Rows of up to 1024
// elements: one warp per row (8 rows per block); up to 16384: one block per row; both read x
// once into registers, LayerNorm's mean and variance come from one fused reduction of
// (count, mean, M2) per thread (Chan's pairwise update: no E[x²] - E[x]² cancellation), and
// weight/bias are read in 16-byte packs. Longer rows: one block per row, streaming passes.
#include <type_traits>

#include "ops/norm/backends.h"
#include "runtime/cuda/cuda_backend.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/row_kernels.cuh"
#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

// Unit u of this thread's register row as floats from a contiguous [n] vector (weight, bias):
// one 16-byte load per unit when VEC.
template <typename T, bool VEC>
__device__ __forceinline__ void load_unit(const T* p, int j0, float* out) {
  if constexpr (VEC) {
    const Pack<T> pack = load_pack(p + j0);
#pragma unroll
    for (int e = 0; e < Pack<T>::size; ++e) out[e] = to_float(pack.v[e]);
  } else {
    out[0] = to_float(p[j0]);
  }
}

// (count, mean, M2 = Σ (x - mean)²) of a set of values; Chan et al.'s pairwise combination.
struct Moments {
  float count, mean, m2;
};
__device__ __forceinline__ Moments combine(Moments a, Moments b) {
  const float count = a.count + b.count;
  if (count == 0.0f) return a;
  const float delta = b.mean - a.mean, wb = b.count / count;
  return {count, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.count * wb};
}
__device__ __forceinline__ Moments warp_moments(Moments v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Moments o{__shfl_xor_sync(0xffffffffu, v.count, offset), __shfl_xor_sync(0xffffffffu, v.mean, offset),
                    __shfl_xor_sync(0xffffffffu, v.m2, offset)};
    v = combine(v, o);
  }
  return v;
}
// One reduction over the group of the three moments (WARP: the warp; else the block, using
// 96 floats of `scratch`, ending with a barrier so scratch can be reused).
template <bool WARP>
__device__ __forceinline__ Moments group_moments(Moments v, float* scratch) {
  v = warp_moments(v);
  if constexpr (WARP) {
    (void)scratch;
    return v;
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) {
      scratch[warp] = v.count;
      scratch[32 + warp] = v.mean;
      scratch[64 + warp] = v.m2;
    }
    __syncthreads();
    v = lane < warps ? Moments{scratch[lane], scratch[32 + lane], scratch[64 + lane]} : Moments{0.0f, 0.0f, 0.0f};
    v = warp_moments(v);
    __syncthreads();
    return v;
  }
}

// Register versions (MODE 0: a warp per row, 1: a block per row). x read once into registers,
// the statistics of LayerNorm in one reduction: each thread's (count, mean, M2) from its
// registers (two passes over registers, exact centring), combined pairwise across the group
// (Chan), which stays accurate when |mean| ≫ std. weight and bias in 16-byte packs when VEC.
template <typename T, bool VEC, bool WARP, bool RMS>
__device__ __forceinline__ void norm_rows_regs(const T* x, int64_t x_ld, const T* weight, const T* bias, T* y,
                                               int64_t rows, int n, float eps) {
  constexpr int U = RowShape<T, VEC, WARP>::kUnits;
  using Regs = RowRegs<T, VEC, U>;
  constexpr int E = Regs::kElems;
  __shared__ float scratch[96];
  const float inv_n = 1.0f / static_cast<float>(n);
  for_each_group_row<WARP>(rows, [&](int64_t r, int rank, int group) {
    Regs row;
    row.load(x + r * x_ld, n, n, rank, group, 0.0f);  // padding slots are 0
    float mean = 0.0f, rstd;
    if constexpr (RMS) {
      float squares = 0.0f;
#pragma unroll
      for (int k = 0; k < Regs::kCount; ++k) squares += row.v[k] * row.v[k];
      rstd = rsqrtf(group_sum<WARP>(squares, scratch) * inv_n + eps);
    } else {
      float count = 0.0f, sum = 0.0f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (Regs::index(u, 0, rank, group) < n) count += static_cast<float>(E);
#pragma unroll
        for (int e = 0; e < E; ++e) sum += row.v[u * E + e];
      }
      const float local_mean = count > 0.0f ? sum / count : 0.0f;
      float m2 = 0.0f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool valid = Regs::index(u, 0, rank, group) < n;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float d = row.v[u * E + e] - local_mean;
          m2 += valid ? d * d : 0.0f;
        }
      }
      const Moments m = group_moments<WARP>(Moments{count, local_mean, m2}, scratch);
      mean = m.mean;
      rstd = rsqrtf(m.m2 * inv_n + eps);
    }
    T* out = y + r * n;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j0 = Regs::index(u, 0, rank, group);
      if (j0 < n) {
        float w[E], b[E];
        load_unit<T, VEC>(weight, j0, w);
        if (!RMS && bias != nullptr) {
          load_unit<T, VEC>(bias, j0, b);
        } else {
#pragma unroll
          for (int e = 0; e < E; ++e) b[e] = 0.0f;
        }
        if constexpr (VEC) {
          Pack<T> pack;
#pragma unroll
          for (int e = 0; e < E; ++e) pack.v[e] = from_float<T>((row.v[u * E + e] - mean) * rstd * w[e] + b[e]);
          store_pack(out + j0, pack);
        } else {
          out[j0] = from_float<T>((row.v[u] - mean) * rstd * w[0] + b[0]);
        }
      }
    }
  });
}

// Rows too long for the register versions (over 16384 elements): one block per row, passes over
// the row (mean, centred sum of squares, store), rows small enough to stay in L1/L2 between them.
template <typename T>
__device__ __forceinline__ void layer_norm_rows_stream(const T* x, int64_t x_ld, const T* weight, const T* bias,
                                                       T* y, int64_t rows, int64_t n, float eps, bool vectorized) {
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

template <typename T>
__device__ __forceinline__ void rms_norm_rows_stream(const T* x, int64_t x_ld, const T* weight, T* y, int64_t rows,
                                                     int64_t n, float eps, bool vectorized) {
  __shared__ float scratch[32];
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * x_ld;
    float squares = 0.0f;
    row_read(in, n, vectorized, [&](int64_t, float v) { squares += v * v; });
    const float rstd = rsqrtf(block_sum(squares, scratch) * inv_n + eps);
    row_transform(in, y + r * n, n, vectorized, [&](int64_t j, float v) { return v * rstd * to_float(weight[j]); });
  }
}

// x, y: [rows, n]; row r of x starts at x + r·x_ld (x may be a row-strided view, y is
// contiguous); weight, bias: [n] (bias may be null).
// VEC: x, y, weight and bias 16-byte aligned, n and x_ld whole numbers of packs.
// MODE: 0 = warp per row, 1 = block per row (both in registers), 2 = streaming.
template <typename T, bool VEC, int MODE>
__global__ void __launch_bounds__(MODE == 0 ? 256 : 1024) layer_norm_kernel(const T* x, int64_t x_ld, const T* weight, const T* bias,
                                                          T* y, int64_t rows, int64_t n, float eps) {
  if constexpr (MODE == 2) {
    layer_norm_rows_stream(x, x_ld, weight, bias, y, rows, n, eps, VEC);
  } else {
    norm_rows_regs<T, VEC, MODE == 0, false>(x, x_ld, weight, bias, y, rows, static_cast<int>(n), eps);
  }
}

// y = x / sqrt(mean(x²) + eps) · weight.
template <typename T, bool VEC, int MODE>
__global__ void __launch_bounds__(MODE == 0 ? 256 : 1024) rms_norm_kernel(const T* x, int64_t x_ld, const T* weight, T* y, int64_t rows,
                                                        int64_t n, float eps) {
  if constexpr (MODE == 2) {
    rms_norm_rows_stream(x, x_ld, weight, y, rows, n, eps, VEC);
  } else {
    norm_rows_regs<T, VEC, MODE == 0, true>(x, x_ld, weight, nullptr, y, rows, static_cast<int>(n), eps);
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {


namespace {

RowLaunch plan_norm(Context& ctx, const char* op, const Tensor& x, const Tensor& y, const void* weight,
                    const void* bias) {
  // x may be row-strided (a column slice), as on the CPU: strided_x_rows = true.
  RowLaunch plan =
      cuda::plan_row_launch(op, x, y, cuda_backend(ctx).properties().multiProcessorCount, true);
  plan.vectorized = plan.vectorized && aligned16(weight) && (bias == nullptr || aligned16(bias));
  return plan;
}

}  // namespace

void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) {
  const void* bias_data = bias.defined() ? bias.data() : nullptr;
  const RowLaunch plan = plan_norm(ctx, "layer_norm", x, y, weight.data(), bias_data);
  if (plan.rows == 0) return;
  const int sm_count = cuda_backend(ctx).properties().multiProcessorCount;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    pick_row_kernel<T>(plan, sm_count, [&](auto vec, auto mode, const RowRegsLaunch& rl) {
      launch(ctx, kernel_names::kLayerNorm, kernels::layer_norm_kernel<T, decltype(vec)::value, decltype(mode)::value>,
             rl.blocks, rl.threads, 0, x.data_as<const T>(), plan.x_ld, weight.data_as<const T>(),
             static_cast<const T*>(bias_data), y.data_as<T>(), plan.rows, plan.n, eps);
    });
  });
}

void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  const RowLaunch plan = plan_norm(ctx, "rms_norm", x, y, weight.data(), nullptr);
  if (plan.rows == 0) return;
  const int sm_count = cuda_backend(ctx).properties().multiProcessorCount;
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    pick_row_kernel<T>(plan, sm_count, [&](auto vec, auto mode, const RowRegsLaunch& rl) {
      launch(ctx, kernel_names::kRmsNorm, kernels::rms_norm_kernel<T, decltype(vec)::value, decltype(mode)::value>,
             rl.blocks, rl.threads, 0, x.data_as<const T>(), plan.x_ld, weight.data_as<const T>(), y.data_as<T>(),
             plan.rows, plan.n, eps);
    });
  });
}

}  // namespace blockscope::ops::cuda
