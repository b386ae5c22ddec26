// float64 references for the elementwise ops, softmax, batched matmul and attention.
// Plain loops over RefTensor, written from the definitions and sharing nothing with ops/.
// Conventions they pin down (the ops must match them):
//   - causal is bottom-right aligned: key j is visible to query i when j <= i + (Sk - Sq);
//   - a softmax row with no finite entry (all -inf / fully masked) is all zeros, not NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/reference_tensor.h"

namespace blockscope::reference {

// out = a + b, b either a's shape or the shape of a's last dimension(s) (row broadcast).
RefTensor elementwise_add(const RefTensor& a, const RefTensor& b);
// out = a · b, same shapes.
RefTensor elementwise_mul(const RefTensor& a, const RefTensor& b);
// out = x · factor.
RefTensor elementwise_scale(const RefTensor& x, double factor);
// scores [..., Sq, Sk] with every (i, j), j > i + Sk - Sq, set to value.
RefTensor causal_masked_fill(const RefTensor& scores, double value);

// Softmax over the last dimension.
RefTensor softmax_rows(const RefTensor& x);
// softmax(scale · x + causal mask) over scores [..., Sq, Sk].
RefTensor softmax_scale_causal(const RefTensor& x, double scale, bool causal);

// C[b] = alpha · A[b] · op(B[b / b_group]); a [batch..., m, k], b [batch'..., k, n] or
// [batch'..., n, k] when trans_b; result [batch..., m, n].
RefTensor batched_matmul(const RefTensor& a, const RefTensor& b, bool trans_b, double alpha, int64_t b_group);

// softmax(scale · q kᵀ + mask) v per head; q [B, H, Sq, D], k and v [B, Hkv, Sk, D],
// query head h reads kv head h / (H / Hkv). Result [B, H, Sq, D].
RefTensor attention(const RefTensor& q, const RefTensor& k, const RefTensor& v, bool causal, double scale);

// Decode attention: one query per sequence over its first lengths[b] keys; q [B, H, D], k and v
// [B, Hkv, S, D] (the cache's rows in position order), result [B, H, D].
RefTensor decode_attention(const RefTensor& q, const RefTensor& k, const RefTensor& v,
                           const std::vector<int64_t>& lengths, double scale);

}  // namespace blockscope::reference
