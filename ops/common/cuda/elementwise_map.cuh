// Grid-stride elementwise loops shared by the pointwise kernels (add, mul, scale, activations,
// bias add). Each kernel is a thin named __global__ wrapper around one of these, so the trace
// shows `gelu_kernel`, not a generic name.
//
// Vectorised path: 16-byte packs when every pointer is 16-byte aligned (and, for a broadcast
// operand, its period is a whole number of packs); the remainder is done element by element.
// The host decides `vectorized` (see cuda::aligned16), so no size is assumed.
#pragma once

#include <cstdint>

#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// out[i] = f(x[i]) for i < n. out may alias x.
template <typename T, typename F>
__device__ __forceinline__ void unary_map(const T* x, T* out, int64_t n, bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  int64_t done = 0;
  if (vectorized) {
    const int64_t packs = n / P;
    for (int64_t p = global_thread(); p < packs; p += global_threads()) {
      const Pack<T> in = load_pack(x + p * P);
      Pack<T> result;
#pragma unroll
      for (int e = 0; e < P; ++e) result.v[e] = from_float<T>(f(to_float(in.v[e])));
      store_pack(out + p * P, result);
    }
    done = packs * P;
  }
  for (int64_t i = done + global_thread(); i < n; i += global_threads()) out[i] = from_float<T>(f(to_float(x[i])));
}

// out[i] = f(a[i], b[i % b_period]) for i < n (b_period == n: same shape; b_period == row
// length: b broadcast over rows). out may alias a.
template <typename T, typename F>
__device__ __forceinline__ void binary_map(const T* a, const T* b, T* out, int64_t n, int64_t b_period,
                                           bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  const bool broadcast = b_period != n;
  int64_t done = 0;
  if (vectorized) {
    const int64_t packs = n / P;
    for (int64_t p = global_thread(); p < packs; p += global_threads()) {
      const int64_t i = p * P;
      const Pack<T> in_a = load_pack(a + i);
      const Pack<T> in_b = load_pack(b + (broadcast ? i % b_period : i));
      Pack<T> result;
#pragma unroll
      for (int e = 0; e < P; ++e) result.v[e] = from_float<T>(f(to_float(in_a.v[e]), to_float(in_b.v[e])));
      store_pack(out + i, result);
    }
    done = packs * P;
  }
  for (int64_t i = done + global_thread(); i < n; i += global_threads()) {
    out[i] = from_float<T>(f(to_float(a[i]), to_float(b[broadcast ? i % b_period : i])));
  }
}

}  // namespace blockscope::ops::cuda::kernels
