// The weight-streaming skinny GEMM of the CUDA linear (when it runs: ops/linear/skinny_gemm.h),
// also fp8_weight_linear's kernel (ops/fp8_weight_linear: the weight as FP8 codes).
//
//   y[m, o] = epilogue(s[o] · Σ_k x[m, k] · w[o, k]),  m < rows ≤ kRows per pass, w [out, in]
//   (nn.Linear's out_in); s = w_scale (FP8 codes: each row's dequantisation factor) or 1
//
// One block per kOuts consecutive outputs; its warps split the row's k range (thread t of the
// block takes packs t, t + blockDim, …), so each weight element is loaded exactly once per pass,
// by one thread, with a vector load (`vec_end` elements of every row: x's 16-byte packs and, for
// codes, the same number of bytes of weight; the rest, or all of it when the rows are not
// aligned, element by element, coalesced along the row). Each thread keeps
// the kRows × kOuts partial sums in registers (f32) and reads x's packs at the same k through
// the cache (x is M·in elements, shared by every block). The sums are then reduced within the
// warp by a butterfly reduce-scatter (kRows·kOuts ≤ 32 values: log2 of that many halving
// shuffle steps, after which lane l holds value l >> (5 − log2(values))), across the warps
// through 1 KiB of shared memory, and thread i < kRows·kOuts writes output i with the scale, bias
// and tanh-GELU applied in f32, rounded once. grid.y passes: pass p takes rows [p·kRows, …) of
// x and y (1 for the linear, whose rows fit one pass).
#pragma once

#include <cuda_fp8.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "ops/activation/device_functions.cuh"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "runtime/context.h"

namespace blockscope::ops::cuda::kernels {

inline constexpr int kWeightStreamingMaxWarps = 8;

// Outputs per block for a row bucket: kRows · kOuts partial sums per thread, at most 32.
template <int kRows>
inline constexpr int kWeightStreamingOuts = kRows >= 16 ? 2 : 4;

// Butterfly reduce-scatter over the warp of v[0, kCount): after the steps with offsets 16, 8, …
// down to 32 / kCount, lane l holds in v[0] the warp's sum of value l >> (5 − log2(kCount))
// (the lanes at each remaining offset hold the same value: the last steps add them up).
template <int kCount, int kOffset>
__device__ __forceinline__ void weight_streaming_reduce(float* v, int lane) {
  if constexpr (kOffset > 0) {
    if constexpr (kCount > 1) {
      constexpr int kHalf = kCount / 2;
      const bool upper = (lane & kOffset) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const float send = upper ? v[i] : v[i + kHalf];
        const float keep = upper ? v[i + kHalf] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      weight_streaming_reduce<kHalf, kOffset / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], kOffset);
      weight_streaming_reduce<1, kOffset / 2>(v, lane);
    }
  }
}

// The value of FP8 code c (exact: every FP8 value is an f16).
__device__ __forceinline__ float fp8_code_value(unsigned char c, bool e5m2) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, e5m2 ? __NV_E5M2 : __NV_E4M3)));
}

// Weight element k of a row: W = T (the linear's), or unsigned char (FP8 codes).
template <typename T, typename W>
__device__ __forceinline__ float weight_value(const W* row, int k, bool e5m2) {
  if constexpr (std::is_same_v<W, T>) {
    return to_float(row[k]);
  } else {
    return fp8_code_value(row[k], e5m2);
  }
}

// P weight elements from k on (x's pack width; aligned to P elements of W), as f32.
template <typename T, typename W, int P>
__device__ __forceinline__ void load_weights(const W* row, int k, bool e5m2, float* out) {
  if constexpr (std::is_same_v<W, T>) {
    const Pack<T> pack = load_pack(row + k);
#pragma unroll
    for (int j = 0; j < P; ++j) out[j] = to_float(pack.v[j]);
  } else {
    static_assert(P == 4 || P == 8, "codes come 4 (f32 x) or 8 (16-bit x) at a time");
    unsigned words[P / 4];
    if constexpr (P == 8) {
      const uint2 both = *reinterpret_cast<const uint2*>(row + k);
      words[0] = both.x;
      words[1] = both.y;
    } else {
      words[0] = *reinterpret_cast<const unsigned*>(row + k);
    }
#pragma unroll
    for (int j = 0; j < P; ++j) out[j] = fp8_code_value(static_cast<unsigned char>(words[j / 4] >> (8 * (j % 4))), e5m2);
  }
}

// x: rows of `in` elements, `ldx` apart; w: [out, in] contiguous (T, or FP8 codes with w_scale
// [out] and e5m2 saying which format); bias: [out] or nullptr; y: [rows, out] contiguous. Packs
// cover [0, vec_end) of every row (vec_end a multiple of the pack, 0 when the rows are not all
// aligned: x's to 16 bytes, the codes' to a pack's bytes), single elements [vec_end, in).
// blockDim.x: a multiple of 32, at most 32 · kWeightStreamingMaxWarps; grid.x: ⌈out / kOuts⌉;
// grid.y: ⌈rows / kRows⌉.
// (No __launch_bounds__: with one, ptxas at sm_80 spilled 8 bytes of the <f16/bf16, 1> instances
// at 40 registers; without, 44 registers and no spill.)
template <typename T, typename W, int kRows>
__global__ void linear_weight_streaming_kernel(const T* __restrict__ x, int64_t ldx, const W* __restrict__ w,
                                               const float* __restrict__ w_scale, bool e5m2,
                                               const T* __restrict__ bias, T* __restrict__ y, int rows, int in,
                                               int out, int vec_end, bool gelu) {
  constexpr int P = Pack<T>::size;
  constexpr int kOuts = kWeightStreamingOuts<kRows>;
  constexpr int kValues = kRows * kOuts;
  static_assert(kValues <= 32 && (kValues & (kValues - 1)) == 0, "the reduce-scatter needs a power of two ≤ 32");
  __shared__ float partial[kWeightStreamingMaxWarps][kValues];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int o0 = blockIdx.x * kOuts;
  {  // this pass's rows
    const int first = static_cast<int>(blockIdx.y) * kRows;
    x += static_cast<int64_t>(first) * ldx;
    y += static_cast<int64_t>(first) * out;
    rows = min(rows - first, kRows);
  }
  const W* w_rows[kOuts];
  bool valid[kOuts];
#pragma unroll
  for (int g = 0; g < kOuts; ++g) {
    valid[g] = o0 + g < out;  // the same for the whole block: no divergence
    w_rows[g] = w + static_cast<int64_t>(valid[g] ? o0 + g : o0) * in;
  }
  float acc[kValues];  // acc[m · kOuts + g]
#pragma unroll
  for (int i = 0; i < kValues; ++i) acc[i] = 0.0f;

  // 16-byte packs: kOuts weight packs, then x's pack of each row at the same k.
  const int packs = vec_end / P;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const int k = p * P;
    float wf[kOuts][P];
#pragma unroll
    for (int g = 0; g < kOuts; ++g) {
      if (valid[g]) {
        load_weights<T, W, P>(w_rows[g], k, e5m2, wf[g]);
      } else {
#pragma unroll
        for (int j = 0; j < P; ++j) wf[g][j] = 0.0f;
      }
    }
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      if (m < rows) {
        const Pack<T> xp = load_pack(x + m * ldx + k);
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const float xv = to_float(xp.v[j]);
#pragma unroll
          for (int g = 0; g < kOuts; ++g) acc[m * kOuts + g] = fmaf(xv, wf[g][j], acc[m * kOuts + g]);
        }
      }
    }
  }
  // Single elements: the tail of every row after the packs, or whole rows when not aligned.
  for (int k = vec_end + threadIdx.x; k < in; k += blockDim.x) {
    float wf[kOuts];
#pragma unroll
    for (int g = 0; g < kOuts; ++g) wf[g] = valid[g] ? weight_value<T>(w_rows[g], k, e5m2) : 0.0f;
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      if (m < rows) {
        const float xv = to_float(x[m * ldx + k]);
#pragma unroll
        for (int g = 0; g < kOuts; ++g) acc[m * kOuts + g] = fmaf(xv, wf[g], acc[m * kOuts + g]);
      }
    }
  }

  weight_streaming_reduce<kValues, 16>(acc, lane);
  constexpr int kLanesPerValue = 32 / kValues;
  if (lane % kLanesPerValue == 0) partial[warp][lane / kLanesPerValue] = acc[0];
  __syncthreads();
  if (threadIdx.x < kValues) {
    const int i = threadIdx.x, m = i / kOuts, g = i % kOuts;
    float sum = 0.0f;
    for (int v = 0; v < warps; ++v) sum += partial[v][i];
    if (m < rows && o0 + g < out) {
      if (w_scale != nullptr) sum *= w_scale[o0 + g];
      if (bias != nullptr) sum += to_float(bias[o0 + g]);
      if (gelu) sum = GeluTanh{}(sum);
      y[static_cast<int64_t>(m) * out + o0 + g] = from_float<T>(sum);
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

// y = x · wᵀ (· w_scale per output) (+ bias, + tanh-GELU) by the kernel above: one block per group
// of outputs, as many warps (up to 8) as give each thread about two packs of a weight row, rows
// in passes of up to 16. w: x's dtype, or FP8 codes with w_scale. `vector`: every row of x is
// 16-byte aligned and every row of w aligned to one pack of its elements (packs over whole packs
// of `in`, single elements after); else single elements throughout. The implementation column
// gives the weight's dtype and the loads.
inline void launch_weight_streaming(Context& ctx, const char* name, const Tensor& x, int64_t ldx, const Tensor& w,
                                    const Tensor& w_scale, const Tensor& bias, bool gelu, Tensor& y, int64_t rows,
                                    int64_t in, int64_t out, bool vector) {
  const int64_t pack = pack_elems(x.dtype());
  const int64_t vec_end = vector ? in / pack * pack : 0;
  const int64_t work = vector ? std::max<int64_t>(vec_end / pack, in - vec_end) : in;  // loads per row
  const int64_t warps = std::clamp<int64_t>((work + 63) / 64, 1, kernels::kWeightStreamingMaxWarps);
  const bool codes = is_fp8(w.dtype());
  const std::string implementation =
      std::string(dtype_name(w.dtype())) + (codes ? " weights, " + std::string(dtype_name(x.dtype())) + " x" : "") +
      (vector ? (codes ? ", vector loads" : ", 16-byte loads")
              : (codes ? ", scalar loads (rows not aligned)" : ", scalar loads (rows not 16-byte aligned)"));
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto run = [&](auto kernel, int outs, int kernel_rows, auto* weights) {
      const int64_t blocks = (out + outs - 1) / outs, passes = (rows + kernel_rows - 1) / kernel_rows;
      launch_described(ctx, name, implementation.c_str(), kernel,
                       dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(passes)),
                       dim3(static_cast<unsigned>(32 * warps)), 0, x.data_as<const T>(), ldx, weights,
                       codes ? w_scale.data_as<const float>() : nullptr, w.dtype() == DType::fp8_e5m2,
                       bias.defined() ? bias.data_as<const T>() : nullptr, y.data_as<T>(), static_cast<int>(rows),
                       static_cast<int>(in), static_cast<int>(out), static_cast<int>(vec_end), gelu);
    };
    const auto buckets = [&](auto* weights) {
      using W = std::remove_const_t<std::remove_pointer_t<decltype(weights)>>;
      if (rows <= 1) run(kernels::linear_weight_streaming_kernel<T, W, 1>, kernels::kWeightStreamingOuts<1>, 1, weights);
      else if (rows <= 2) run(kernels::linear_weight_streaming_kernel<T, W, 2>, kernels::kWeightStreamingOuts<2>, 2, weights);
      else if (rows <= 4) run(kernels::linear_weight_streaming_kernel<T, W, 4>, kernels::kWeightStreamingOuts<4>, 4, weights);
      else if (rows <= 8) run(kernels::linear_weight_streaming_kernel<T, W, 8>, kernels::kWeightStreamingOuts<8>, 8, weights);
      else run(kernels::linear_weight_streaming_kernel<T, W, 16>, kernels::kWeightStreamingOuts<16>, 16, weights);
    };
    if (codes) {
      buckets(static_cast<const unsigned char*>(w.data()));
    } else {
      buckets(w.data_as<const T>());
    }
  });
}

}  // namespace blockscope::ops::cuda
