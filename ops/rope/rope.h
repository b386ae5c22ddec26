// Rotary position embedding, Hugging Face Llama convention ("rotate_half"): for a head vector
// of size D, pairs (d, d + D/2) rotate by angle pos · theta^(-2d/D), d < D/2.
#pragma once

#include "runtime/context.h"
#include "runtime/index_table.h"

namespace blockscope::ops {

// FLOPs per element: two products and a sum (the profiler's and the catalogue's).
inline constexpr double kRopeFlopsPerElement = 3.0;

// x, y: [B, H, S, D] (x may be a strided view; y contiguous or the same view as x for in
// place). Position of row s is position_offset + s. D must be even. 1 kernel.
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset = 0);
// As above, but each sequence at its own position: row s of sequence b is at positions[b] + s
// (a decode step of a ragged batch). positions: B entries, each >= 0. 1 kernel.
void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, IndexView positions);

}  // namespace blockscope::ops
