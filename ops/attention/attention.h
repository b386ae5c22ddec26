// Scaled dot-product attention with GQA, on four paths (ops/common/paths.h).
#pragma once

#include "ops/common/paths.h"
#include "runtime/context.h"

namespace blockscope::ops {

// q: [B, H, Sq, D], k and v: [B, Hkv, Sk, D] with H % Hkv == 0 (query head h reads kv head
// h / (H / Hkv)), out: [B, H, Sq, D]. Same dtype; contiguous, except on the flash path, which
// takes any strides with a contiguous head dim (e.g. q, k, v as [B, S, H, D] views permuted to
// [B, H, S, D], straight from a fused QKV projection, and out as a view into [B, S, H·D]). causal masks key j > query i
// + (Sk - Sq). scale is usually 1/sqrt(D). A query that sees no key (causal with Sq > Sk:
// queries i < Sq - Sk) gets an all-zero output row, not NaN, on every path.
// naive and inplace materialise the [B, H, Sq, Sk] scores in the tensor dtype (as PyTorch
// eager does); fused_softmax too, with one softmax kernel; flash keeps only tiles.
// Order of the scale: naive and inplace follow the series (and PyTorch eager's
// `q @ k.transpose(-2, -1) * scale`): QKᵀ is stored in the tensor dtype, then multiplied by
// scale. In f16 a raw logit above 65504 is therefore inf before the scale, and its row's
// softmax NaN, exactly as in PyTorch eager. fused_softmax (scale as the QKᵀ GEMM's alpha, in
// f32 before rounding) and flash (f32 tiles) never store a raw logit and stay finite there.
// Masking and empty rows differ from PyTorch: causal is bottom-right aligned (PyTorch SDPA's
// is_causal is top-left when Sq != Sk), and a fully masked row is zeros (torch.softmax: NaN).
void attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, AttentionPath path,
               bool causal, float scale);

// FLOPs: 4·B·H·D per (query, key) pair computed: Sq·Sk pairs, or with causal the pairs the
// bottom-right-aligned mask keeps (causal_visible_pairs, ops/common/flops.h: Sq·(Sq + 1)/2 when
// Sq = Sk, all Sk keys for Sq = 1). FlashAttention's benchmarks halve 4·B·H·S²·D instead; the
// GPU model's validation keeps that convention (profiler/gpu_model.h), nothing else does.
double attention_flops(int64_t batch, int64_t heads, int64_t sq, int64_t sk, int64_t head_dim, bool causal);

// Bytes of the [B, H, Sq, Sk] score matrix the materialising paths need (memory estimate).
double attention_scores_bytes(int64_t batch, int64_t heads, int64_t sq, int64_t sk, DType dtype);

}  // namespace blockscope::ops
