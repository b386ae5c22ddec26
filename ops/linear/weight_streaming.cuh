// The weight-streaming skinny GEMM of the CUDA linear (when it runs: ops/linear/skinny_gemm.h).
//
//   y[m, o] = epilogue(Σ_k x[m, k] · w[o, k]),  m < rows ≤ kRows, w [out, in] (nn.Linear's out_in)
//
// One block per kOuts consecutive outputs; its warps split the row's k range (thread t of the
// block takes packs t, t + blockDim, …), so each weight element is loaded exactly once, by one
// thread, with a 16-byte load (`vec_end` elements of every row; the rest, or all of it when the
// rows are not 16-byte aligned, element by element, coalesced along the row). Each thread keeps
// the kRows × kOuts partial sums in registers (f32) and reads x's packs at the same k through
// the cache (x is M·in elements, shared by every block). The sums are then reduced within the
// warp by a butterfly reduce-scatter (kRows·kOuts ≤ 32 values: log2 of that many halving
// shuffle steps, after which lane l holds value l >> (5 − log2(values))), across the warps
// through 1 KiB of shared memory, and thread i < kRows·kOuts writes output i with the bias and
// tanh-GELU applied in f32, rounded once.
#pragma once

#include "ops/activation/device_functions.cuh"
#include "ops/common/cuda/vector_io.cuh"

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

// x: rows of `in` elements, `ldx` apart; w: [out, in] contiguous; bias: [out] or nullptr; y: [rows,
// out] contiguous. Packs cover [0, vec_end) of every row (vec_end a multiple of the pack, 0 when
// the rows are not all 16-byte aligned), single elements [vec_end, in). blockDim.x: a multiple of
// 32, at most 32 · kWeightStreamingMaxWarps; grid.x: ⌈out / kOuts⌉.
// (No __launch_bounds__: with one, ptxas at sm_80 spilled 8 bytes of the <f16/bf16, 1> instances
// at 40 registers; without, 44 registers and no spill.)
template <typename T, int kRows>
__global__ void linear_weight_streaming_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ w,
                                               const T* __restrict__ bias, T* __restrict__ y, int rows, int in,
                                               int out, int vec_end, bool gelu) {
  constexpr int P = Pack<T>::size;
  constexpr int kOuts = kWeightStreamingOuts<kRows>;
  constexpr int kValues = kRows * kOuts;
  static_assert(kValues <= 32 && (kValues & (kValues - 1)) == 0, "the reduce-scatter needs a power of two ≤ 32");
  __shared__ float partial[kWeightStreamingMaxWarps][kValues];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int o0 = blockIdx.x * kOuts;
  const T* w_rows[kOuts];
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
        const Pack<T> pack = load_pack(w_rows[g] + k);
#pragma unroll
        for (int j = 0; j < P; ++j) wf[g][j] = to_float(pack.v[j]);
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
    for (int g = 0; g < kOuts; ++g) wf[g] = valid[g] ? to_float(w_rows[g][k]) : 0.0f;
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
      if (bias != nullptr) sum += to_float(bias[o0 + g]);
      if (gelu) sum = GeluTanh{}(sum);
      y[static_cast<int64_t>(m) * out + o0 + g] = from_float<T>(sum);
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels
