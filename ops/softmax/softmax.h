// Softmax over the last dimension, plain and fused with scale and causal mask.
// A row whose every element is -inf (fully masked) gives zeros, not NaN: defined behaviour.
// Internals run in f32 with the row max subtracted, so large logits never overflow.
#pragma once

#include "runtime/context.h"

namespace blockscope::ops {

// FLOPs per element (the profiler's and the catalogue's): subtract the max, exp, add to the
// sum, divide (the max pass is a compare); the scaled form multiplies once more.
inline constexpr double kSoftmaxFlopsPerElement = 4.0;
inline constexpr double kSoftmaxScaleFlopsPerElement = kSoftmaxFlopsPerElement + 1.0;

// y = softmax(x, dim = -1). x, y: [..., N] contiguous, same dtype; y may alias x. 1 kernel.
void softmax(Context& ctx, const Tensor& x, Tensor& y);

// y = softmax(scale · x + causal mask) over scores [..., Sq, Sk] (mask as masked_fill_causal).
// One kernel: `softmax_causal_scale_kernel`. causal = false gives softmax(scale · x).
void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y);

}  // namespace blockscope::ops
