// The split-key combine: one kernel for every kernel that splits a row's keys over blocks
// (flash attention for short queries, ops/attention/flash.cu; flash decode,
// ops/decode_attention/cuda.cu). Device code and its launch shape only (no runtime, no
// profiler): a launcher passes split_combine_kernel<T> to launch() with kernel_names::kSplitCombine,
// and a standalone harness (ops/attention/harness/) launches it with <<<>>>.
//
// The partial layout, one for every caller (f32, contiguous; rows = the output rows, B·H·Sq
// for attention, B·H for decode):
//   partial_out [splits, rows, d]   split i's output of row r, normalised by its own sum
//   partial_lse [splits, rows]      split i's log2-sum-exp of row r, in the base-2 unit of
//                                   ops/common/online_softmax.h (t = s·scale·log2(e));
//                                   −inf for a split that saw no key of the row (its
//                                   partial_out row is then not read)
// out row r = (b, h, q), r = (b·H + h)·Sq + q, at out + b·batch_stride + h·head_stride +
// q·row_stride (elements), its d elements contiguous: Σ_i 2^(lse_i − M)·o_i / Σ_i 2^(lse_i − M)
// (combine_splits), rounded once to T; a row no split saw is zeros.
#pragma once

#include <cstdint>

#include "ops/common/cuda/vector_io.cuh"
#include "ops/common/online_softmax.h"

namespace blockscope::ops::cuda::kernels {

struct SplitCombineParams {
  const float* partial_out;  // [splits, rows, d]
  const float* partial_lse;  // [splits, rows]
  void* out;                 // T, rows as above
  int64_t batch_stride, head_stride, row_stride;
  int64_t rows;              // B · H · Sq
  int heads, queries;        // H, Sq (Sq = 1 for decode)
  int d, splits;
};

constexpr int kSplitCombineMaxThreads = 256;

// Launch shape: a grid-stride loop of blocks over the rows (one block per row up to 2^31 − 1
// rows), each thread every blockDim.x-th element of the row.
inline unsigned split_combine_blocks(int64_t rows) {
  constexpr int64_t kMaxBlocks = 0x7fffffff;
  return static_cast<unsigned>(rows < 1 ? 1 : (rows < kMaxBlocks ? rows : kMaxBlocks));
}
inline unsigned split_combine_threads(int d) {
  const int warps = (d + 31) / 32;
  return static_cast<unsigned>(warps * 32 < kSplitCombineMaxThreads ? (warps < 1 ? 32 : warps * 32)
                                                                     : kSplitCombineMaxThreads);
}

template <typename T>
__global__ void __launch_bounds__(kSplitCombineMaxThreads) split_combine_kernel(SplitCombineParams p) {
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t query = row % p.queries, head = (row / p.queries) % p.heads;
    const int64_t batch = row / (static_cast<int64_t>(p.queries) * p.heads);
    T* out = static_cast<T*>(p.out) + batch * p.batch_stride + head * p.head_stride + query * p.row_stride;
    for (int col = threadIdx.x; col < p.d; col += blockDim.x) {
      out[col] = from_float<T>(combine_splits(p.partial_lse + row, p.rows, p.partial_out + row * p.d + col,
                                              p.rows * p.d, p.splits));
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels
