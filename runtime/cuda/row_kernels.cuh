// Helpers for kernels that give one block to one row (softmax, LayerNorm, RMSNorm): visit a
// contiguous row of n elements in 16-byte packs when the row allows it, element by element
// otherwise. Each thread visits the same elements in every pass over the row, so a pass that
// writes y[j] after reading x[j] is safe when y aliases x.
#pragma once

#include <cstdint>

#include "ops/common/rows.h"
#include "runtime/cuda/vector_io.cuh"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace blockscope::cuda_kernels {

// Calls f(j, x[j]) (x[j] as float) for every j < n this thread owns.
template <typename T, typename F>
__device__ __forceinline__ void row_read(const T* row, int64_t n, bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  if (vectorized) {
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * P; j < n; j += static_cast<int64_t>(blockDim.x) * P) {
      const Pack<T> pack = load_pack(row + j);
#pragma unroll
      for (int e = 0; e < P; ++e) f(j + e, to_float(pack.v[e]));
    }
    return;
  }
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) f(j, to_float(row[j]));
}

// out[j] = f(j, in[j]) for every j < n this thread owns.
template <typename T, typename F>
__device__ __forceinline__ void row_transform(const T* in, T* out, int64_t n, bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  if (vectorized) {
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * P; j < n; j += static_cast<int64_t>(blockDim.x) * P) {
      const Pack<T> pack = load_pack(in + j);
      Pack<T> result;
#pragma unroll
      for (int e = 0; e < P; ++e) result.v[e] = from_float<T>(f(j + e, to_float(pack.v[e])));
      store_pack(out + j, result);
    }
    return;
  }
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = from_float<T>(f(j, to_float(in[j])));
}

}  // namespace blockscope::cuda_kernels

namespace blockscope::cuda_detail {

// Threads for a one-block-per-row kernel: about one pack per thread, a whole number of warps,
// 32 to 1024.
inline unsigned row_block_threads(int64_t n, int64_t pack) {
  const int64_t wanted = (n + pack - 1) / pack;
  unsigned threads = 32;
  while (threads < 1024 && threads < wanted) threads *= 2;
  return threads;
}

// Blocks for a grid-stride loop over rows: all rows at once up to a few waves of the GPU.
inline unsigned row_grid(int64_t rows, unsigned threads, int sm_count) {
  const int64_t per_sm = 2048 / threads;  // resident blocks per SM when threads limit occupancy
  const int64_t cap = static_cast<int64_t>(sm_count) * per_sm * 4;
  const int64_t blocks = rows < cap ? rows : cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Launch shape of a one-block-per-row kernel over x, y: [rows, n] (y contiguous; x contiguous,
// or, with strided_x_rows, rows of n contiguous elements x_ld apart).
struct RowLaunch {
  int64_t rows = 0, n = 0;
  int64_t x_ld = 0;         // elements from one row of x to the next (n when x is contiguous)
  bool vectorized = false;  // x and y 16-byte aligned, n and x_ld whole numbers of packs
  unsigned blocks = 1, threads = 32;
};

// strided_x_rows: the norms accept x as a row-strided view (ops/norm/norm.h: e.g. a column
// slice of a wider tensor), as their CPU twins do; softmax requires x contiguous. Before this
// flag the norms refused strided x on CUDA with a runtime error that the CPU never raises.
inline RowLaunch plan_row_launch(const char* op, const Tensor& x, const Tensor& y, int sm_count,
                                 bool strided_x_rows = false) {
  BS_CHECK(y.is_contiguous() && (strided_x_rows || x.is_contiguous()), op, ": x ", x.str(), " and y ", y.str(),
           " must be contiguous");
  RowLaunch plan;
  plan.n = x.size(-1);
  plan.rows = plan.n == 0 ? 0 : x.numel() / plan.n;
  plan.x_ld = plan.n;
  if (!x.is_contiguous()) plan.x_ld = ops::leading_dimension(op, x);
  const int64_t pack = pack_elems(x.dtype());
  // Every row start of x must stay 16-byte aligned, so the row stride counts too: a column
  // slice of width n out of a row of odd length must take the element-by-element path.
  plan.vectorized = aligned16(x.data()) && aligned16(y.data()) && plan.n % pack == 0 && plan.x_ld % pack == 0;
  plan.threads = row_block_threads(plan.n, plan.vectorized ? pack : 1);
  plan.blocks = row_grid(plan.rows, plan.threads, sm_count);
  return plan;
}

}  // namespace blockscope::cuda_detail
