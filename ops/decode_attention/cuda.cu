// CUDA decode attention: one query per sequence against its cached keys and values, read
// straight from the pages through the block table (no gather copy). Query head h reads kv head
// h / G (G = H / Hkv). Lengths and the block table are read from device memory.
//
// naive (3 kernels, the CPU's rounding order; scores [B, H, max length] in the tensor dtype):
//   decode_qk_kernel       grid (B·H, ⌈max length / 128⌉), 128 threads: thread = one key of one
//                          query head; the query row is staged in shared memory as f32;
//                          s = round(round(q·k) · scale), each rounding to the dtype.
//   decode_softmax_kernel  grid B·H, one block per score row: max, Σ exp(s − max), then
//                          exp(s − max) · (1 / Σ) stored in the dtype; only the first lengths[b]
//                          entries of a row are read or written.
//   decode_pv_kernel       grid B·H, 32 × 8 threads: lane x owns head dims x, x + 32, …, row y
//                          every 8th key; the 8 f32 partial sums are added in a fixed order
//                          through shared memory and stored once in the dtype.
// flash (flash-decoding: 1 kernel, or 2 when the keys are split):
//   flash_decode_kernel    grid (B·Hkv·head chunks, splits), 128 threads (4 warps). A block owns
//                          sequence b, kv head g, a chunk of up to kDecodeMaxHeads of that kv
//                          head's G query heads (all of them for G <= 16 at D <= 128), and the
//                          split's range of key tiles. Per tile of 32 keys: K and V rows go to
//                          shared memory as f32 (K rows padded to D + 1 floats: lanes reading
//                          different keys hit different banks); each warp takes query heads
//                          warp, warp + 4, …, lane j scoring key j (f32, times the scale), and
//                          runs the online softmax of its heads with warp shuffles; then every
//                          thread updates its outputs (head, dim) = tid + k·128 in registers.
//                          The softmax state per head is ops/common/online_softmax.h's (base 2:
//                          scores times scale·log2(e), exp2). With one split it divides by the
//                          sum and stores the output rounded once; with several it writes its
//                          normalised f32 output and its log2-sum-exp to the scratch buffers.
//   split_combine_kernel   (ops/common/cuda/split_combine.cuh, shared with flash attention) grid
//                          B·H, one thread per head dim: out = Σ_i 2^(lse_i − M)·o_i /
//                          Σ_i 2^(lse_i − M) over the splits, rounded once.
// Head dims 1 to 256 (any, odd included; 16-byte loads where D is a whole number of packs),
// refused above as flash attention does. The split rule: flash_decode_grid (decode_attention.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/row_kernels.cuh"
#include "ops/common/cuda/split_combine.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/common/kernel_names.h"
#include "ops/common/online_softmax.h"
#include "ops/decode_attention/backends.h"
#include "ops/kv_cache/kv_cache_row.cuh"
#include "runtime/cuda/cuda_backend.h"

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

namespace blockscope::ops::cuda {

namespace {

using kernels::DecodeParams;
using kernels::FlashDecodeParams;

DecodeParams decode_params(const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out, float scale) {
  DecodeParams p{};
  p.q = q.data();
  p.out = out.data();
  p.k_pages = cache.k.data();
  p.v_pages = cache.v.data();
  p.lengths = lengths.device;
  p.block_table = cache.block_table.row(0).device;
  p.table_width = cache.block_table.cols();
  p.page_size = cache.shape.page_size;
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.kv_heads = static_cast<int>(cache.shape.kv_heads);
  p.group = static_cast<int>(q.size(1) / cache.shape.kv_heads);
  p.dim = static_cast<int>(q.size(2));
  p.scale = scale;
  p.scale_log2 = scale * 1.4426950408889634f;  // log2(e)
  return p;
}

// Key splits per (sequence, kv head, head chunk) and the head chunks: flash_decode_grid in
// ops/decode_attention/decode_attention.cpp (a host function, so the catalogue's callers know
// without a GPU whether the combine kernel runs). Its constants are this file's block shape:
static_assert(kernels::kDecodeMaxHeads == kFlashDecodeMaxHeads, "flash_decode_grid's heads per block");
static_assert(kernels::kDecodeThreads * kernels::kDecodeOwned == kFlashDecodeMaxOutputs,
              "flash_decode_grid's outputs per block");

template <typename T>
void naive(Context& ctx, DecodeParams p, DType dtype, int64_t max_length, bool vec) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads;
  Tensor scores = ctx.empty({p.batch, p.heads, max_length}, dtype);  // row (b, h): lengths[b] valid
  T* s = scores.data_as<T>();
  const int64_t key_blocks = (max_length + kernels::kQkThreads - 1) / kernels::kQkThreads;
  BS_CHECK(key_blocks <= 65535, "decode_attention: a cache length of ", max_length, " is too long for the grid");
  auto* qk = vec ? kernels::decode_qk_kernel<T, true> : kernels::decode_qk_kernel<T, false>;
  launch(ctx, kernel_names::kDecodeQk, qk, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(key_blocks)),
         dim3(kernels::kQkThreads), static_cast<size_t>(p.dim) * sizeof(float), p, s, max_length);
  const int64_t pack = 16 / static_cast<int64_t>(sizeof(T));
  const bool rows_vec = aligned16(s) && max_length % pack == 0;
  launch(ctx, kernel_names::kDecodeSoftmax, kernels::decode_softmax_kernel<T>, dim3(static_cast<unsigned>(rows)),
         dim3(row_block_threads(max_length, pack)), 0, s, p.lengths, p.heads, max_length, rows_vec);
  launch(ctx, kernel_names::kDecodePv, kernels::decode_pv_kernel<T>, dim3(static_cast<unsigned>(rows)),
         dim3(kernels::kPvLanes, kernels::kPvRows), 0, p, static_cast<const T*>(s), max_length);
}

template <typename T>
void flash(Context& ctx, DecodeParams p, int64_t max_length, bool vec) {
  FlashDecodeParams fp{};
  fp.base = p;
  fp.dim_div = kernels::FastDivmod(static_cast<uint32_t>(p.dim));
  // Query heads per block: the whole group, up to 16 and up to 2048 / D (the outputs a block's
  // threads hold in registers); a larger group is split into head chunks (more blocks).
  const FlashDecodeGrid grid = flash_decode_grid(p.batch, p.heads, p.kv_heads, p.dim, max_length,
                                                 cuda_backend(ctx).properties().multiProcessorCount);
  fp.heads_per_block = static_cast<int>(grid.heads_per_block);
  fp.head_chunks = static_cast<int>(grid.head_chunks);
  const int64_t blocks = grid.blocks;
  fp.splits = static_cast<int>(grid.splits);
  Tensor scratch;  // freed (stream-ordered) after the combine kernel is queued
  if (fp.splits > 1) {
    const int64_t rows = static_cast<int64_t>(fp.splits) * p.batch * p.heads;
    scratch = ctx.empty({rows * (p.dim + 1)}, DType::f32);
    fp.partial_out = scratch.data_as<float>();
    fp.partial_lse = fp.partial_out + rows * p.dim;
  }
  auto* kernel = vec ? kernels::flash_decode_kernel<T, true> : kernels::flash_decode_kernel<T, false>;
  const size_t smem =
      static_cast<size_t>(kernels::flash_decode_smem_floats(p.dim, fp.heads_per_block)) * sizeof(float);
  // Over 48 KiB (D > 128) needs the opt-in; set it on every launch (per device, a cheap host call).
  const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  BS_CHECK(opt_in == cudaSuccess, "decode_attention: cudaFuncSetAttribute(", smem, " bytes) failed: ",
           cudaGetErrorString(opt_in));
  launch(ctx, kernel_names::kFlashDecode, kernel,
         dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(fp.splits)), dim3(kernels::kDecodeThreads), smem,
         fp);
  if (fp.splits > 1) {
    kernels::SplitCombineParams combine{};
    combine.partial_out = fp.partial_out;
    combine.partial_lse = fp.partial_lse;
    combine.out = p.out;  // [B, H, D] contiguous: rows of one query
    combine.batch_stride = static_cast<int64_t>(p.heads) * p.dim, combine.head_stride = p.dim, combine.row_stride = p.dim;
    combine.rows = static_cast<int64_t>(p.batch) * p.heads;
    combine.heads = p.heads, combine.queries = 1, combine.d = p.dim, combine.splits = fp.splits;
    launch(ctx, kernel_names::kSplitCombine, kernels::split_combine_kernel<T>,
           dim3(kernels::split_combine_blocks(combine.rows)), dim3(kernels::split_combine_threads(p.dim)), 0, combine);
  }
}

}  // namespace

void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale) {
  const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(2);
  if (batch * heads * dim == 0) return;
  BS_CHECK_INPUT(dim <= kernels::kDecodeMaxDim, "decode_attention: CUDA supports head_dim up to ",
                 kernels::kDecodeMaxDim, "; q ", q.str(), " has ", dim);
  BS_CHECK(lengths.device != nullptr && cache.block_table.defined(),
           "decode_attention: lengths and the block table must be on the device");
  BS_CHECK(batch * heads < (int64_t{1} << 31) && cache.block_table.cols() * cache.shape.page_size < (int64_t{1} << 31),
           "decode_attention: q ", q.str(), " or the cache is too large for the kernels' 32-bit indices");
  int64_t max_length = 0;
  for (int64_t b = 0; b < batch; ++b) max_length = std::max<int64_t>(max_length, lengths[b]);
  const DecodeParams p = decode_params(q, cache, lengths, out, scale);
  dispatch_dtype(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t pack = 16 / static_cast<int64_t>(sizeof(T));
    // Cached rows are D elements apart in contiguous pages: whole packs when D is.
    const bool vec = dim % pack == 0 && aligned16(cache.k.data()) && aligned16(cache.v.data());
    if (path == AttentionPath::naive) {
      naive<T>(ctx, p, q.dtype(), max_length, vec);
    } else {
      flash<T>(ctx, p, max_length, vec);
    }
  });
}

}  // namespace blockscope::ops::cuda
