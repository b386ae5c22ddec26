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

}  // namespace blockscope::ops
