// CUDA decode attention's device code: the kernels and their parameter blocks, no runtime and
// no profiler (what each kernel does and its launch shape: ops/decode_attention/cuda.cu, which
// launches them). A standalone program can include this header and launch them with <<<>>>.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/row_kernels.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/common/online_softmax.h"
#include "ops/kv_cache/kv_cache_row.cuh"

namespace blockscope::ops::cuda::kernels {

// Where the query, the cache and the output are. Pages are [pages, Hkv, page_size, D]
// contiguous; key position p of sequence b is row p % page_size of page
// block_table[b · table_width + p / page_size].
struct DecodeParams {
  const void* q;        // [B, H, D] contiguous
  void* out;            // [B, H, D] contiguous
  const void* k_pages;  // [pages, Hkv, page_size, D]
  const void* v_pages;
  const int32_t* lengths;      // [B], device
  const int32_t* block_table;  // [B, table_width], device
  int64_t table_width, page_size;
  int batch, heads, kv_heads, group, dim;
  float scale;       // naive: the scores are q·k · scale, rounded as the CPU rounds them
  float scale_log2;  // flash: scale · log2(e), the base-2 unit of ops/common/online_softmax.h
};

// Offset (elements) of the cached row of position `position` of sequence b, kv head g.
__device__ __forceinline__ int64_t cache_row(const DecodeParams& p, int b, int g, int position) {
  return kv_cache_row_offset(p.block_table, p.table_width, static_cast<uint32_t>(p.page_size), p.kv_heads, p.dim,
                             static_cast<uint32_t>(b), static_cast<uint32_t>(g), static_cast<uint32_t>(position));
}

// ---- naive ----------------------------------------------------------------------------------

constexpr int kQkThreads = 128;   // keys per decode_qk_kernel block
constexpr int kPvLanes = 32;      // decode_pv_kernel: threads along the head dim
constexpr int kPvRows = 8;        //                   threads along the keys
constexpr int kDecodeMaxDim = 256;
constexpr int kPvOwned = kDecodeMaxDim / kPvLanes;

// Scores row (b, h) of [B, H, max_length]: s[p] = round(round(q·k_p) · scale) for p < lengths[b].
// VEC: D is a whole number of packs and the pages are 16-byte aligned.
template <typename T, bool VEC>
__global__ void __launch_bounds__(kQkThreads)
    decode_qk_kernel(DecodeParams p, T* __restrict__ scores, int64_t max_length) {
  float* q_row = static_cast<float*>(dynamic_shared_memory());  // [D]
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, g = h / p.group;
  const int length = p.lengths[b];
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kQkThreads;
  if (first >= length) return;  // the whole block: past this sequence's length
  const T* q = static_cast<const T*>(p.q) + static_cast<int64_t>(bh) * p.dim;
  for (int d = threadIdx.x; d < p.dim; d += kQkThreads) q_row[d] = to_float(q[d]);
  __syncthreads();
  const int position = static_cast<int>(first) + static_cast<int>(threadIdx.x);
  if (position >= length) return;
  const T* key = static_cast<const T*>(p.k_pages) + cache_row(p, b, g, position);
  float dot[8] = {};  // eight partial sums: shorter rounding chains
  if constexpr (VEC) {
    constexpr int P = Pack<T>::size;
    for (int d = 0; d < p.dim; d += P) {
      const Pack<T> pack = load_pack(key + d);
#pragma unroll
      for (int e = 0; e < P; ++e) dot[(d + e) & 7] += q_row[d + e] * to_float(pack.v[e]);
    }
  } else {
    // Eight at a time with constant indices (dot[d & 7] in a rolled loop would put dot in
    // local memory: ptxas reports it as a spill); the same sums in the same order.
    for (int d = 0; d < p.dim; d += 8) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (d + e < p.dim) dot[e] += q_row[d + e] * to_float(key[d + e]);
    }
  }
  const float sum = ((dot[0] + dot[1]) + (dot[2] + dot[3])) + ((dot[4] + dot[5]) + (dot[6] + dot[7]));
  // Stored in the dtype, then scaled and stored again (the series' order, as the CPU).
  const float rounded = to_float(from_float<T>(sum));
  scores[static_cast<int64_t>(bh) * max_length + position] = from_float<T>(__fmul_rn(rounded, p.scale));
}

// Softmax of score row (b, h) over its first lengths[b] entries, in place, as the CPU: f32
// max, f32 sum of exp(s − max), then exp(s − max) · (1 / sum) stored in the dtype.
template <typename T>
__global__ void __launch_bounds__(1024)
    decode_softmax_kernel(T* scores, const int32_t* __restrict__ lengths, int heads, int64_t max_length,
                          bool vectorized) {
  __shared__ float scratch[32];
  const int bh = blockIdx.x;
  const int length = lengths[bh / heads];
  T* row = scores + static_cast<int64_t>(bh) * max_length;
  float m = -INFINITY;
  row_read<true>(row, length, vectorized, [&](int64_t, float v) { m = fmaxf(m, v); });
  m = block_max(m, scratch);
  float s = 0.0f;
  row_read<true>(row, length, vectorized, [&](int64_t, float v) { s += expf(v - m); });
  const float inv = 1.0f / block_sum(s, scratch);
  // In place: each thread rewrites exactly the elements it read itself.
  row_transform<true>(row, row, length, vectorized, [&](int64_t, float v) { return __fmul_rn(expf(v - m), inv); });
}

// out row (b, h) = Σ_p probs[p] · v_p over p < lengths[b], f32 sums, stored once.
template <typename T>
__global__ void __launch_bounds__(kPvLanes * kPvRows)
    decode_pv_kernel(DecodeParams p, const T* __restrict__ probs, int64_t max_length) {
  __shared__ float partial[kPvRows][kDecodeMaxDim];
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, g = h / p.group;
  const int length = p.lengths[b];
  const T* prob_row = probs + static_cast<int64_t>(bh) * max_length;
  float acc[kPvOwned] = {};
  for (int position = threadIdx.y; position < length; position += kPvRows) {
    const float w = to_float(prob_row[position]);
    const T* value = static_cast<const T*>(p.v_pages) + cache_row(p, b, g, position);
#pragma unroll
    for (int k = 0; k < kPvOwned; ++k) {
      const int d = threadIdx.x + k * kPvLanes;
      if (d < p.dim) acc[k] += w * to_float(value[d]);
    }
  }
#pragma unroll
  for (int k = 0; k < kPvOwned; ++k) {
    const int d = threadIdx.x + k * kPvLanes;
    if (d < p.dim) partial[threadIdx.y][d] = acc[k];
  }
  __syncthreads();
  if (threadIdx.y != 0) return;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(bh) * p.dim;
  for (int d = threadIdx.x; d < p.dim; d += kPvLanes) {
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kPvRows; ++r) sum += partial[r][d];
    out[d] = from_float<T>(sum);
  }
}

// ---- flash ----------------------------------------------------------------------------------

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kDecodeKeys = 32;     // keys per tile: one per lane of a scoring warp
constexpr int kDecodeMaxHeads = 16; // query heads per block
constexpr int kDecodeHeadsPerWarp = kDecodeMaxHeads / kDecodeWarps;
constexpr int kDecodeOwned = 16;    // outputs (head, dim) per thread: heads per block · D <= 2048
static_assert(kDecodeMaxDim <= kDecodeThreads * kDecodeOwned, "one head must fit a block's outputs");

struct FlashDecodeParams {
  DecodeParams base;
  int heads_per_block;  // query heads of one kv head a block owns (the last chunk may own fewer)
  int head_chunks;      // ⌈G / heads_per_block⌉
  int splits;           // key ranges per (b, kv head); 1: the kernel writes `out` itself
  // splits > 1: split_combine_kernel's layout (ops/common/cuda/split_combine.cuh), rows = B·H.
  float* partial_out;   // [splits, B, H, D]: the split's output, normalised by its own sum
  float* partial_lse;   // [splits, B, H]: the split's log2-sum-exp (−inf: no key)
  FastDivmod dim_div;   // output index → (head, dim)
};

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// Shared memory of flash_decode_kernel, in floats, for head dim d and heads per block n.
__host__ __device__ constexpr int64_t flash_decode_smem_floats(int64_t d, int64_t n) {
  return n * d                          // q, f32
         + kDecodeKeys * (d + 1)        // K tile, rows padded
         + kDecodeKeys * d              // V tile
         + n * kDecodeKeys              // probabilities of the tile
         + 2 * n;                       // per head: rescale of the tile, final sum
}

// VEC: D is a whole number of packs and the pages are 16-byte aligned. At least 8 blocks per
// SM (64 registers a thread): without the minimum ptxas capped sm_80 at 64 anyway and spilled
// 4 bytes once the split epilogue normalised its partial; asked for, it fits without a spill.
template <typename T, bool VEC>
__global__ void __launch_bounds__(kDecodeThreads, 8) flash_decode_kernel(FlashDecodeParams fp) {
  const DecodeParams& p = fp.base;
  const int per_block = fp.heads_per_block, dim = p.dim;
  float* smem = static_cast<float*>(dynamic_shared_memory());
  float* q_tile = smem;                                   // [per_block][D]
  float* k_tile = q_tile + per_block * dim;               // [kDecodeKeys][D + 1]
  float* v_tile = k_tile + kDecodeKeys * (dim + 1);       // [kDecodeKeys][D]
  float* p_tile = v_tile + kDecodeKeys * dim;             // [per_block][kDecodeKeys]
  float* rescale = p_tile + per_block * kDecodeKeys;      // [per_block]
  float* sums = rescale + per_block;                      // [per_block]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunk = blockIdx.x % fp.head_chunks;
  const int bg = blockIdx.x / fp.head_chunks, b = bg / p.kv_heads, g = bg % p.kv_heads;
  const int split = blockIdx.y;
  const int head0 = g * p.group + chunk * per_block;                    // first query head
  const int heads = imin(per_block, p.group - chunk * per_block);       // query heads here
  const int length = p.lengths[b];
  // This split's keys: an equal share of the sequence's tiles.
  const int tiles = (length + kDecodeKeys - 1) / kDecodeKeys;
  const int tiles_per_split = (tiles + fp.splits - 1) / fp.splits;
  const int key_begin = imin(length, split * tiles_per_split * kDecodeKeys);
  const int key_end = imin(length, key_begin + tiles_per_split * kDecodeKeys);

  const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.heads + head0) * dim;
  for (int i = threadIdx.x; i < heads * dim; i += kDecodeThreads) q_tile[i] = to_float(q[i]);

  const T* k_pages = static_cast<const T*>(p.k_pages);
  const T* v_pages = static_cast<const T*>(p.v_pages);
  float acc[kDecodeOwned] = {};
  OnlineSoftmax state[kDecodeHeadsPerWarp];  // per head of the warp, the same in every lane

  for (int k0 = key_begin; k0 < key_end; k0 += kDecodeKeys) {
    const int n = imin(kDecodeKeys, key_end - k0);
    __syncthreads();  // the previous tile is no longer read (and q is stored, the first time)
    if constexpr (VEC) {
      constexpr int P = Pack<T>::size;
      const int packs = dim / P;
      for (int i = threadIdx.x; i < n * packs; i += kDecodeThreads) {
        const int j = i / packs, d = (i % packs) * P;
        const int64_t row = cache_row(p, b, g, k0 + j) + d;
        const Pack<T> kp = load_pack(k_pages + row), vp = load_pack(v_pages + row);
#pragma unroll
        for (int e = 0; e < P; ++e) {
          k_tile[j * (dim + 1) + d + e] = to_float(kp.v[e]);
          v_tile[j * dim + d + e] = to_float(vp.v[e]);
        }
      }
    } else {
      for (int i = threadIdx.x; i < n * dim; i += kDecodeThreads) {
        const int j = i / dim, d = i % dim;
        const int64_t row = cache_row(p, b, g, k0 + j) + d;
        k_tile[j * (dim + 1) + d] = to_float(k_pages[row]);
        v_tile[j * dim + d] = to_float(v_pages[row]);
      }
    }
    __syncthreads();
    // Scores and the online softmax: warp w takes heads w, w + 4, …; lane j scores key k0 + j.
#pragma unroll
    for (int r = 0; r < kDecodeHeadsPerWarp; ++r) {
      const int i = warp + r * kDecodeWarps;
      if (i < heads) {  // uniform across the warp (the shuffles below need every lane)
        float s = -INFINITY;
        if (lane < n) {
          const float* qi = q_tile + i * dim;
          const float* kj = k_tile + lane * (dim + 1);
          float dot[8] = {};
          for (int d = 0; d < dim; ++d) dot[d & 7] += qi[d] * kj[d];
          s = (((dot[0] + dot[1]) + (dot[2] + dot[3])) + ((dot[4] + dot[5]) + (dot[6] + dot[7]))) * p.scale_log2;
        }
        // No key seen yet: base 0, so exp2 is of -inf (0), not NaN.
        const float alpha = state[r].rescale(warp_max(s));
        const float e = lane < n ? state[r].weight(s) : 0.0f;
        state[r].l += warp_sum(e);
        if (lane < n) p_tile[i * kDecodeKeys + lane] = e;
        if (lane == 0) rescale[i] = alpha;
      }
    }
    __syncthreads();
    // O = O · rescale + P · V for this thread's outputs (head i, dim d) = tid + k · threads.
#pragma unroll
    for (int k = 0; k < kDecodeOwned; ++k) {
      const uint32_t o = threadIdx.x + k * kDecodeThreads;
      if (o < static_cast<uint32_t>(heads * dim)) {
        uint32_t i, d;
        fp.dim_div.divmod(o, i, d);
        const float* pi = p_tile + i * kDecodeKeys;
        float tile = 0.0f;
        for (int j = 0; j < n; ++j) tile += pi[j] * v_tile[j * dim + d];
        acc[k] = acc[k] * rescale[i] + tile;
      }
    }
  }

  const int64_t stat_row = (static_cast<int64_t>(split) * p.batch + b) * p.heads + head0;  // + i
#pragma unroll
  for (int r = 0; r < kDecodeHeadsPerWarp; ++r) {
    const int i = warp + r * kDecodeWarps;
    if (i < heads && lane == 0) {
      sums[i] = state[r].l;
      // The split's log2-sum-exp for the combine; an empty split (past a short sequence's
      // keys) writes −inf and zeros.
      if (fp.splits > 1) fp.partial_lse[stat_row + i] = state[r].lse();
    }
  }
  __syncthreads();
  if (fp.splits > 1) {
    float* partial = fp.partial_out + stat_row * dim;
#pragma unroll
    for (int k = 0; k < kDecodeOwned; ++k) {
      const uint32_t o = threadIdx.x + k * kDecodeThreads;
      if (o < static_cast<uint32_t>(heads * dim)) {
        const float sum = sums[fp.dim_div.div(o)];
        partial[o] = sum > 0.0f ? acc[k] / sum : 0.0f;
      }
    }
    return;
  }
  T* out = static_cast<T*>(p.out) + (static_cast<int64_t>(b) * p.heads + head0) * dim;
#pragma unroll
  for (int k = 0; k < kDecodeOwned; ++k) {
    const uint32_t o = threadIdx.x + k * kDecodeThreads;
    if (o < static_cast<uint32_t>(heads * dim)) {
      const float sum = sums[fp.dim_div.div(o)];
      out[o] = from_float<T>(sum > 0.0f ? acc[k] / sum : 0.0f);
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels
