// Scaled dot-product attention with GQA, on four paths (ops/common/paths.h).
#pragma once

#include "ops/common/paths.h"
#include "runtime/context.h"

namespace blockscope::ops {

// q: [B, H, Sq, D], k and v: [B, Hkv, Sk, D] with H % Hkv == 0 (query head h reads kv head
// h / (H / Hkv)), out: [B, H, Sq, D]. All contiguous, same dtype. causal masks key j > query i
// + (Sk - Sq). scale is usually 1/sqrt(D). A query that sees no key (causal with Sq > Sk:
// queries i < Sq - Sk) gets an all-zero output row, not NaN, on every path.
// naive and inplace materialise the [B, H, Sq, Sk] scores in the tensor dtype (as PyTorch
// eager does); fused_softmax too, with one softmax kernel; flash keeps only tiles.
void attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, AttentionPath path,
               bool causal, float scale);

// FLOPs: 4·B·H·Sq·Sk·D, halved when causal (the convention of ANCHORS.md).
double attention_flops(int64_t batch, int64_t heads, int64_t sq, int64_t sk, int64_t head_dim, bool causal);

// Bytes of the [B, H, Sq, Sk] score matrix the materialising paths need (memory estimate).
double attention_scores_bytes(int64_t batch, int64_t heads, int64_t sq, int64_t sk, DType dtype);

}  // namespace blockscope::ops
