// Elementwise ops: residual add, multiply, scale, copy, and masked_fill (the causal mask used
// by the naive attention paths: out of place = copy + fill, in place = fill).
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

// out = a + b. b may have the shape of a's last dimension(s) (broadcast over rows: bias add).
// out may alias a. 1 kernel.
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
// out = a · b (same shapes). out may alias a. 1 kernel.
void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
// out = x · factor. out may alias x. 1 kernel.
void scale(Context& ctx, const Tensor& x, float factor, Tensor& out);
// dst = src (any strides, same shape and dtype; dst contiguous). A device-to-device copy when
// both are contiguous, a gather kernel otherwise. 1 kernel.
void copy(Context& ctx, const Tensor& src, Tensor& dst);

// Causal masked_fill on scores [..., Sq, Sk]: element (i, j) with j > i + (Sk - Sq) gets
// `value` (bottom-right aligned, as FlashAttention defines causal for Sq != Sk).
// Out of place: out = scores.masked_fill(mask, value) — a copy kernel then a fill kernel (2).
void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out);
// In place: scores.masked_fill_(mask, value) — 1 kernel.
void masked_fill_causal_(Context& ctx, Tensor& scores, float value);

// Elements the causal mask covers in `matrices` score matrices [Sq, Sk]: the bytes the fill
// writes (the profiler's and the catalogue's).
double causal_masked_elements(int64_t matrices, int64_t sq, int64_t sk);

}  // namespace blockscope::ops
