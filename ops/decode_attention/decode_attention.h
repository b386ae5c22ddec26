// Decode attention: one new query per sequence against that sequence's keys and values in a
// KV cache (ops/kv_cache/kv_cache.h), contiguous or paged, read through the block table — no
// gather copy. GQA as in ops/attention: query head h reads kv head h / (H / Hkv).
//
// Paths (the attention paths that have a decode form; ops/common/paths.h):
//   naive  the scores materialised in the tensor dtype, [B, H, max length], as PyTorch eager
//          does with a cache: QKᵀ (then the scale), softmax over each sequence's length, PV —
//          3 kernels.
//   flash  one pass with an online softmax in f32, no score buffer: flash-decoding. On CUDA the
//          keys of a sequence are split over several blocks when B · Hkv alone cannot fill
//          the GPU, and a second kernel combines the splits.
// The new token's key and value are already in the cache (kv_cache_write), so the query at
// position p attends to positions [0, lengths[b]) = [0, p] — causal by construction.
#pragma once

#include <cstdint>

#include "ops/common/paths.h"
#include "ops/kv_cache/kv_cache.h"
#include "runtime/context.h"

namespace blockscope::ops {

// q, out: [B, H, D] contiguous (a [B, H, 1, D] tensor viewed without its 1, which is also
// [B, H·D]: the heads side by side, ready for the output projection). lengths[b] in
// [1, capacity of sequence b]: the positions it attends to.
void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale);

// Whether `path` has a decode form (naive and flash; inplace and fused_softmax do not).
bool has_decode_form(AttentionPath path);

// FLOPs of one call: 4 · H · D · Σ lengths (QKᵀ and PV, 2 FLOPs per multiply-add).
double decode_attention_flops(int64_t heads, int64_t head_dim, int64_t total_length);
// Bytes at the least traffic: q and out once, each cached key and value row read once.
double decode_attention_bytes(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t total_length,
                              DType dtype);

// The flash path's grid on CUDA (ops/decode_attention/cuda.cu launches what this returns),
// computed on the host so that callers without a GPU — the op catalogue's users, the benchmark
// keys that tools/ci/bench_gate.py gates — know whether the keys are split (2 kernels) or not:
//   - a block owns one sequence, one kv head and a chunk of up to
//     min(16, 2048 / D) of that kv head's G = H / Hkv query heads (the outputs its threads hold
//     in registers): head_chunks = ⌈G / heads_per_block⌉, blocks = B · Hkv · head_chunks;
//   - key splits per block (the flash-decoding rule): `blocks` already fill every SM twice over
//     → 1 split (no combine kernel, no scratch); otherwise enough splits for ⌈2 · SMs / blocks⌉
//     (two blocks per SM, so one block's barriers and loads overlap another's), but each split
//     gets at least kFlashDecodeMinSplitKeys (256) keys of the longest sequence, so a split's
//     fixed costs (q load, partial write, its share of the combine) stay small next to its
//     keys: splits <= ⌈max length / 256⌉; and at most kFlashDecodeMaxSplits (64).
// Shorter sequences of the batch divide their own tiles over the same number of splits; a split
// past a sequence's end writes an empty partial (weight 0 in the combine).
inline constexpr int64_t kFlashDecodeMaxHeads = 16;       // query heads per block
inline constexpr int64_t kFlashDecodeMaxOutputs = 2048;   // (head, dim) outputs per block: 128 threads × 16
inline constexpr int64_t kFlashDecodeMinSplitKeys = 256;
inline constexpr int64_t kFlashDecodeMaxSplits = 64;

struct FlashDecodeGrid {
  int64_t heads_per_block = 1;  // query heads of one kv head per block (the last chunk may own fewer)
  int64_t head_chunks = 1;      // ⌈G / heads_per_block⌉
  int64_t blocks = 1;           // B · Hkv · head_chunks
  int64_t splits = 1;           // key ranges per block; > 1: split_combine_kernel follows
};

// All sizes >= 1, heads a multiple of kv_heads, head_dim <= kFlashDecodeMaxOutputs,
// max_length = the longest sequence's length, sm_count >= 1 (invalid_input otherwise).
FlashDecodeGrid flash_decode_grid(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                  int64_t max_length, int sm_count);
// flash_decode_grid(...).splits: > 1 is the catalogue's flag split_keys for decode_attention.
int64_t flash_decode_splits(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t max_length,
                            int sm_count);

}  // namespace blockscope::ops
