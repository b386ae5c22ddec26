// CUDA attention. The naive, inplace and fused_softmax paths are composed in
// ops/attention/attention.cpp from public ops (batched_matmul, scale, masked_fill, softmax);
// only the flash path needs a kernel of its own, and it has none yet (a later issue writes
// it). Until then it is refused, never silently replaced by another path.
#include "ops/common/backends.h"
#include "runtime/error.h"

namespace blockscope::ops::cuda {

void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale) {
  throw InputError("attention: the flash attention path has no CUDA kernel yet; use fused_softmax (or naive, "
                   "inplace) on " + ctx.device().str() + ", or run flash on the CPU");
}

}  // namespace blockscope::ops::cuda
