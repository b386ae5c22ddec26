// Device code of the CUDA flash attention (forward): its parameters, tile constants and the two
// kernels. No runtime and no profiler: ops/attention/flash.cu launches them (the launch policy:
// which kernel, the key splits, the workspaces, the combine), and the standalone harness
// ops/attention/harness/flash_harness.cu builds this header alone with nvcc-sim. No [Sq, Sk]
// matrix in memory.
//
// Two kernels behind one entry point:
// - flash_attention_kernel (f16/bf16, head_dim 64 or 128): FlashAttention-2's schedule on
//   tensor cores (sm_80+). A block of 4 warps owns 64 query rows, 16 per warp; it walks the key
//   tiles of 64 keys: S = Q·Kᵀ with mma.sync m16n8k16 (f32 accumulate), the online softmax in
//   registers (exp2 with scale·log2(e) folded in), then O += P·V with P rounded to the input
//   type, as FlashAttention does. Q, K and V tiles reach shared memory by cp.async; the V load
//   of tile j overlaps S_j and the K load of tile j+1 overlaps P·V_j. Fragments come from
//   shared memory by ldmatrix (.trans for V). Tiles are stored with their 16-byte chunks
//   XOR-swizzled by row, so the 8 rows one ldmatrix reads fall in 8 different bank groups.
// - flash_attention_simple_kernel (f32, or any other head_dim up to 256): the same tiling and
//   online softmax on the FP32 cores, one thread per (query row, eighth of the head dims).
//
// Masking follows the other paths: key j is visible to query i when j < Sk and, if causal,
// j <= i + Sk - Sq (bottom-right aligned); key tiles entirely above the diagonal are skipped;
// a query that sees no key gets zeros.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/common/cuda/tensor_core.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/common/online_softmax.h"

namespace blockscope::ops::cuda::kernels {

// Where the tensors are and how they are laid out. Strides are in elements; the head dim is
// contiguous. Query head h reads kv head h / group.
struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t q_batch_stride, q_head_stride, q_row_stride;
  int64_t k_batch_stride, k_head_stride, k_row_stride;
  int64_t v_batch_stride, v_head_stride, v_row_stride;
  int64_t o_batch_stride, o_head_stride, o_row_stride;
  int sq, sk, group;
  int causal;
  float scale_log2;  // softmax scale · log2(e): scores go straight into exp2
  // Split keys (flash-decoding, for short queries): block x = query tile · splits + split; each
  // split walks its share of the key tiles and writes its normalised partial output and its
  // log2-sum-exp to the f32 workspaces, in split_combine_kernel's layout
  // (ops/common/cuda/split_combine.cuh), which merges them.
  int splits;           // 1: no split, the kernel writes `out` itself
  float* partial_out;   // [splits, B, H, Sq, D] = [splits, rows, D]
  float* partial_lse;   // [splits, B, H, Sq] = [splits, rows], log2 units (of scale·log2(e)·s)
  int heads, batch;
};

constexpr float kLog2e = 1.4426950408889634f;

// Number of key tiles of `tile` keys that rows [q0, q0 + rows) see: all of them, or, when
// causal, those up to the diagonal of the last row (0 when no row sees a key).
__device__ __forceinline__ int visible_key_tiles(const FlashParams& p, int q0, int rows, int tile) {
  const int all = (p.sk + tile - 1) / tile;
  if (!p.causal) return all;
  const int last_key = q0 + rows - 1 + p.sk - p.sq;  // the last visible key of the last row
  if (last_key < 0) return 0;
  const int tiles = last_key / tile + 1;
  return tiles < all ? tiles : all;
}

__device__ __forceinline__ bool key_visible(const FlashParams& p, int query, int key) {
  return key < p.sk && (!p.causal || key <= query + p.sk - p.sq);
}

// ---- Tensor-core kernel -----------------------------------------------------------------------

// Tile sizes, in one place: 64 query rows per block (4 warps x 16), 64 keys per tile.
constexpr int kFlashRows = 64;
constexpr int kFlashKeys = 64;
constexpr int kFlashWarps = 4;
constexpr int kFlashThreads = kFlashWarps * 32;

// Offset, in elements, of element (row, col) of a [rows, D] 16-bit tile in shared memory: the
// 16-byte chunk index is XOR-ed with row % 8 (D >= 64, so a row has at least 8 chunks).
template <int D>
__device__ __forceinline__ int swizzled(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Starts the cp.async copy of rows [row0, row0 + kFlashKeys) of a [S, D] matrix (row stride
// `stride`) into a swizzled tile; rows at or past `rows` are zero-filled.
template <typename T, int D, int Rows>
__device__ __forceinline__ void load_tile_async(T* tile, const T* src, int64_t stride, int row0, int rows) {
  constexpr int chunks_per_row = D / 8;
  for (int c = threadIdx.x; c < Rows * chunks_per_row; c += kFlashThreads) {
    const int r = c / chunks_per_row, col = (c % chunks_per_row) * 8;
    const bool valid = row0 + r < rows;
    const T* from = valid ? src + static_cast<int64_t>(row0 + r) * stride + col : src;
    tensor_core::cp_async_16(tile + swizzled<D>(r, col), from, valid);
  }
}

template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  tensor_core::mma_m16n8k16_bf16(d, a, b, d);
}
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  tensor_core::mma_m16n8k16_f16(d, a, b, d);
}

// Two floats rounded to T in one 32-bit register, `lo` in the low half (the lower column of
// an mma fragment pair), and the sum of the two rounded values.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);  // a register move once compiled
  return bits;
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}
template <typename T>
__device__ __forceinline__ float packed_sum(uint32_t packed) {
  T pair[2];
  memcpy(static_cast<void*>(pair), &packed, sizeof pair);
  return to_float(pair[0]) + to_float(pair[1]);
}

// Dynamic shared memory: Q [64, D], K [64, D], V [64, D] tiles of T (48 KiB at D = 128).
template <typename T, int D>
__global__ void __launch_bounds__(kFlashThreads) flash_attention_kernel(FlashParams p) {
  T* q_tile = static_cast<T*>(dynamic_shared_memory());
  T* k_tile = q_tile + kFlashRows * D;
  T* v_tile = k_tile + kFlashKeys * D;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group_id = lane >> 2, in_group = lane & 3;  // the PTX ISA's groupID / threadID_in_group
  const int q0 = (blockIdx.x / p.splits) * kFlashRows, split = blockIdx.x % p.splits;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / p.group;
  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride;

  // This split's share of the visible key tiles: [first_tile, tiles).
  const int visible = visible_key_tiles(p, q0, kFlashRows, kFlashKeys);
  const int per_split = (visible + p.splits - 1) / p.splits;
  const int first_tile = split * per_split;
  const int tiles = visible < first_tile + per_split ? visible : first_tile + per_split;
  // This thread's two rows of the warp's 16: group_id and group_id + 8.
  const int row_a = q0 + warp * 16 + group_id, row_b = row_a + 8;

  constexpr int kSteps = D / 16;      // k-steps of Q·Kᵀ over the head dim
  constexpr int kOutTiles = D / 8;    // n-tiles of O over the head dim
  constexpr int kScoreTiles = kFlashKeys / 8;
  float o[kOutTiles][4] = {};
  // Per row (ops/common/online_softmax.h, base 2): the running max of scale·log2(e)·s, and this
  // thread's part of the running sum (the group's 4 parts are added after the key loop).
  OnlineSoftmax row_a_state, row_b_state;

  if (first_tile < tiles) {
    load_tile_async<T, D, kFlashRows>(q_tile, q + static_cast<int64_t>(q0) * p.q_row_stride, p.q_row_stride, 0,
                                      p.sq - q0);
    load_tile_async<T, D, kFlashKeys>(k_tile, k, p.k_row_stride, first_tile * kFlashKeys, p.sk);
    tensor_core::cp_async_commit();
  }

  uint32_t q_frag[kSteps][4];
  for (int j = first_tile; j < tiles; ++j) {
    const int k0 = j * kFlashKeys;
    load_tile_async<T, D, kFlashKeys>(v_tile, v, p.v_row_stride, k0, p.sk);
    tensor_core::cp_async_commit();
    tensor_core::cp_async_wait<1>();  // Q and K_j have landed (V_j may still be in flight)
    __syncthreads();

    if (j == first_tile) {
      // Q fragments stay in registers for the whole key loop. Matrix i of the x4 load covers
      // rows +8·(i % 2), cols +8·(i / 2) of the 16x16 A block.
      const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        tensor_core::ldmatrix_x4(q_frag[s], q_tile + swizzled<D>(r, s * 16 + (lane >> 4) * 8));
      }
    }

    // S = Q · K_jᵀ: 16 rows x 64 keys per warp, as 8 n-tiles of 8 keys.
    float s[kScoreTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; nt += 2) {
        // Matrices: (keys nt, d +0), (keys nt, d +8), (keys nt+1, d +0), (keys nt+1, d +8).
        uint32_t b[4];
        const int key = (nt + (lane >> 4)) * 8 + (lane & 7);
        tensor_core::ldmatrix_x4(b, k_tile + swizzled<D>(key, ks * 16 + ((lane >> 3) & 1) * 8));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma<T>(s[nt], q_frag[ks], b0);
        mma<T>(s[nt + 1], q_frag[ks], b1);
      }
    }

    // Mask (tail keys, the causal diagonal), scale into log2 units, online softmax per row.
    const bool needs_mask = k0 + kFlashKeys > p.sk || (p.causal && k0 + kFlashKeys - 1 > q0 + p.sk - p.sq);
    float tile_max_a = -INFINITY, tile_max_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + in_group * 2 + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        float t = s[nt][e] * p.scale_log2;
        if (needs_mask && !key_visible(p, row, key)) t = -INFINITY;
        s[nt][e] = t;
        if (e < 2) tile_max_a = fmaxf(tile_max_a, t);
        else tile_max_b = fmaxf(tile_max_b, t);
      }
    }
    // The 4 threads of a group hold the same two rows.
    tile_max_a = fmaxf(tile_max_a, __shfl_xor_sync(0xffffffffu, tile_max_a, 1));
    tile_max_a = fmaxf(tile_max_a, __shfl_xor_sync(0xffffffffu, tile_max_a, 2));
    tile_max_b = fmaxf(tile_max_b, __shfl_xor_sync(0xffffffffu, tile_max_b, 1));
    tile_max_b = fmaxf(tile_max_b, __shfl_xor_sync(0xffffffffu, tile_max_b, 2));
    // A row that has seen only masked keys keeps m = -inf and base 0: every exp2 is of -inf
    // (0), never of NaN.
    const float rescale_a = row_a_state.rescale(tile_max_a), rescale_b = row_b_state.rescale(tile_max_b);
    const float base_a = row_a_state.base(), base_b = row_b_state.base();
#pragma unroll
    for (int nd = 0; nd < kOutTiles; ++nd) {
      o[nd][0] *= rescale_a;
      o[nd][1] *= rescale_a;
      o[nd][2] *= rescale_b;
      o[nd][3] *= rescale_b;
    }
    // P = exp2(t - m), rounded to T for the P·V product; the sum uses the rounded values too,
    // so the normalisation matches what was multiplied.
    uint32_t p_frag[kFlashKeys / 16][4];
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
      const float p0 = exp2f(s[nt][0] - base_a), p1 = exp2f(s[nt][1] - base_a);
      const float p2 = exp2f(s[nt][2] - base_b), p3 = exp2f(s[nt][3] - base_b);
      const uint32_t top = pack2<T>(p0, p1), bottom = pack2<T>(p2, p3);
      row_a_state.l += packed_sum<T>(top);
      row_b_state.l += packed_sum<T>(bottom);
      // Two score n-tiles make one A block of P: (rows 0-7 | 8-15) x (keys 0-7 | 8-15).
      p_frag[nt / 2][(nt & 1) * 2 + 0] = top;
      p_frag[nt / 2][(nt & 1) * 2 + 1] = bottom;
    }

    __syncthreads();  // every warp is done with K_j
    if (j + 1 < tiles) {
      load_tile_async<T, D, kFlashKeys>(k_tile, k, p.k_row_stride, k0 + kFlashKeys, p.sk);
      tensor_core::cp_async_commit();
      tensor_core::cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
    } else {
      tensor_core::cp_async_wait<0>();
    }
    __syncthreads();

    // O += P · V_j: k-steps of 16 keys, n-tiles of 8 head dims.
#pragma unroll
    for (int ks = 0; ks < kFlashKeys / 16; ++ks) {
#pragma unroll
      for (int nd = 0; nd < kOutTiles; nd += 2) {
        // Matrices (transposed): (keys +0, d nd), (keys +8, d nd), (keys +0, d nd+1), (keys +8, d nd+1).
        uint32_t b[4];
        const int key = ks * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
        tensor_core::ldmatrix_x4_trans(b, v_tile + swizzled<D>(key, (nd + (lane >> 4)) * 8));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma<T>(o[nd], p_frag[ks], b0);
        mma<T>(o[nd + 1], p_frag[ks], b1);
      }
    }
    __syncthreads();  // every warp is done with V_j before the next V load
  }

  // Finish the row sums across the group, normalise, store rows < Sq.
  row_a_state.l += __shfl_xor_sync(0xffffffffu, row_a_state.l, 1);
  row_a_state.l += __shfl_xor_sync(0xffffffffu, row_a_state.l, 2);
  row_b_state.l += __shfl_xor_sync(0xffffffffu, row_b_state.l, 1);
  row_b_state.l += __shfl_xor_sync(0xffffffffu, row_b_state.l, 2);
  const float inv_a = row_a_state.inverse_sum(), inv_b = row_b_state.inverse_sum();
  if (p.splits > 1) {
    // Row r of this (batch, head, split) in the workspaces.
    const int64_t rows_base = ((static_cast<int64_t>(split) * p.batch + batch) * p.heads + head) * p.sq;
    if (in_group == 0) {
      if (row_a < p.sq) p.partial_lse[rows_base + row_a] = row_a_state.lse();
      if (row_b < p.sq) p.partial_lse[rows_base + row_b] = row_b_state.lse();
    }
#pragma unroll
    for (int nd = 0; nd < kOutTiles; ++nd) {
      const int col = nd * 8 + in_group * 2;
      if (row_a < p.sq) {
        float* dst = p.partial_out + (rows_base + row_a) * D + col;
        dst[0] = o[nd][0] * inv_a;
        dst[1] = o[nd][1] * inv_a;
      }
      if (row_b < p.sq) {
        float* dst = p.partial_out + (rows_base + row_b) * D + col;
        dst[0] = o[nd][2] * inv_b;
        dst[1] = o[nd][3] * inv_b;
      }
    }
    return;
  }
  // The output goes out through shared memory: straight from the mma fragments each store
  // would write 4 bytes of 8 rows (8 sectors for 128 bytes: 50% sector efficiency; 25% as two
  // 2-byte stores, what the simulator's counters found). The warp's 16 rows are staged in its
  // own rows of the Q tile (no longer read: Q lives in registers), swizzled as the tiles are
  // (conflict-free), then leave as 16-byte chunks, whole rows per quarter-warp.
  const int warp_row0 = warp * 16;
#pragma unroll
  for (int nd = 0; nd < kOutTiles; ++nd) {
    const int col = nd * 8 + in_group * 2;
    const uint32_t top = pack2<T>(o[nd][0] * inv_a, o[nd][1] * inv_a);
    const uint32_t bottom = pack2<T>(o[nd][2] * inv_b, o[nd][3] * inv_b);
    memcpy(static_cast<void*>(q_tile + swizzled<D>(warp_row0 + group_id, col)), &top, sizeof top);
    memcpy(static_cast<void*>(q_tile + swizzled<D>(warp_row0 + group_id + 8, col)), &bottom, sizeof bottom);
  }
  __syncwarp();
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks of 8 elements
  const bool aligned = (reinterpret_cast<uintptr_t>(out) | static_cast<uintptr_t>(p.o_row_stride) * sizeof(T)) % 16 == 0;
#pragma unroll
  for (int c = lane; c < 16 * kChunksPerRow; c += 32) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    if (q0 + warp_row0 + r >= p.sq) continue;
    const T* from = q_tile + swizzled<D>(warp_row0 + r, col);
    T* dst = out + static_cast<int64_t>(q0 + warp_row0 + r) * p.o_row_stride + col;
    if (aligned) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(from);
    } else {
      for (int e = 0; e < 8; ++e) dst[e] = from[e];  // a view whose rows are not 16-byte aligned
    }
  }
}

// ---- FP32-core kernel: f32, and head dims the tensor-core kernel does not cover ---------------

constexpr int kSimpleRows = 16;   // query rows per block
constexpr int kSimpleKeys = 8;    // keys per tile
constexpr int kSimpleSplit = 8;   // threads per query row; each owns every 8th head dim
constexpr int kSimpleMaxDim = 256;
constexpr int kSimpleThreads = kSimpleRows * kSimpleSplit;

template <typename T>
__global__ void __launch_bounds__(kSimpleThreads) flash_attention_simple_kernel(FlashParams p, int d) {
  // Rows padded by one word: the 4 query rows and 8 key rows a warp reads at one column then
  // sit in different banks (unpadded, 256 floats apart, they all hit one bank: 4- and 8-way
  // conflicts on every Q·K step, found by the simulator's counters).
  __shared__ float q_tile[kSimpleRows][kSimpleMaxDim + 1];
  __shared__ float k_tile[kSimpleKeys][kSimpleMaxDim + 1];
  __shared__ float v_tile[kSimpleKeys][kSimpleMaxDim + 1];
  __shared__ float s_tile[kSimpleRows][kSimpleKeys];

  const int local_row = threadIdx.x / kSimpleSplit, part = threadIdx.x % kSimpleSplit;
  const int q0 = blockIdx.x * kSimpleRows, head = blockIdx.y, batch = blockIdx.z;
  const int row = q0 + local_row;
  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + (head / p.group) * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + (head / p.group) * p.v_head_stride;
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride;

  for (int i = threadIdx.x; i < kSimpleRows * d; i += kSimpleThreads) {
    const int r = i / d, c = i % d;
    q_tile[r][c] = q0 + r < p.sq ? to_float(q[static_cast<int64_t>(q0 + r) * p.q_row_stride + c]) : 0.0f;
  }

  constexpr int kOwned = kSimpleMaxDim / kSimpleSplit;
  const float direction = p.scale_log2 < 0.0f ? -1.0f : 1.0f;
  const float exponent_scale = fabsf(p.scale_log2);
  float o[kOwned] = {};
  float m = -INFINITY, l = 0.0f;
  const int tiles = visible_key_tiles(p, q0, kSimpleRows, kSimpleKeys);
  for (int j = 0; j < tiles; ++j) {
    const int k0 = j * kSimpleKeys;
    __syncthreads();  // the previous tile is no longer read (and Q is stored, the first time)
    for (int i = threadIdx.x; i < kSimpleKeys * d; i += kSimpleThreads) {
      const int r = i / d, c = i % d;
      const bool valid = k0 + r < p.sk;
      k_tile[r][c] = valid ? to_float(k[static_cast<int64_t>(k0 + r) * p.k_row_stride + c]) : 0.0f;
      v_tile[r][c] = valid ? to_float(v[static_cast<int64_t>(k0 + r) * p.v_row_stride + c]) : 0.0f;
    }
    __syncthreads();
    // Thread `part` of a row scores key k0 + part (kSimpleKeys == kSimpleSplit), in eight
    // partial sums (shorter rounding chains). Scores stay unscaled (times the scale's sign):
    // the exponent is then (s - max)·|scale·log2(e)|, whose error is relative to s - max, small
    // for the keys that matter, instead of to the scaled score itself.
    float dot[8] = {};
    for (int c = 0; c < d; ++c) dot[c & 7] += q_tile[local_row][c] * k_tile[part][c];
    const float score = (((dot[0] + dot[1]) + (dot[2] + dot[3])) + ((dot[4] + dot[5]) + (dot[6] + dot[7]))) * direction;
    s_tile[local_row][part] = key_visible(p, row, k0 + part) ? score : -INFINITY;
    __syncthreads();
    // Every thread of the row runs the row's online softmax (8 values): no warp traffic.
    float tile_max = -INFINITY;
    for (int key = 0; key < kSimpleKeys; ++key) tile_max = fmaxf(tile_max, s_tile[local_row][key]);
    const float new_m = fmaxf(m, tile_max);
    const float base = new_m == -INFINITY ? 0.0f : new_m;
    const float rescale = exp2f((m - base) * exponent_scale);
    m = new_m;
    // The tile's sums first, then one update of the running ones: 8x shorter rounding chains.
    float tile_l = 0.0f;
    float tile_o[kOwned] = {};
    for (int key = 0; key < kSimpleKeys; ++key) {
      const float weight = exp2f((s_tile[local_row][key] - base) * exponent_scale);
      tile_l += weight;
#pragma unroll
      for (int i = 0; i < kOwned; ++i) {
        if (part + i * kSimpleSplit < d) tile_o[i] += weight * v_tile[key][part + i * kSimpleSplit];
      }
    }
    l = l * rescale + tile_l;
#pragma unroll
    for (int i = 0; i < kOwned; ++i) o[i] = o[i] * rescale + tile_o[i];
  }
  if (row >= p.sq) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  T* dst = out + static_cast<int64_t>(row) * p.o_row_stride;
#pragma unroll
  for (int i = 0; i < kOwned; ++i) {
    if (part + i * kSimpleSplit < d) dst[part + i * kSimpleSplit] = from_float<T>(o[i] * inv);
  }
}

}  // namespace blockscope::ops::cuda::kernels
