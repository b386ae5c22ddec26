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
// The kernels are decode_kernels.cuh (device code); this file is the launch policy.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/row_kernels.cuh"
#include "ops/common/cuda/split_combine.cuh"
#include "ops/common/cuda/vector_io.cuh"
#include "ops/common/kernel_names.h"
#include "ops/decode_attention/backends.h"
#include "ops/decode_attention/decode_kernels.cuh"
#include "runtime/cuda/cuda_backend.h"

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
