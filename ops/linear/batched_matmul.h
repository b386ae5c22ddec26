// Batched GEMM used by the attention paths (QKᵀ and PV).
#pragma once

#include "ops/common/kernel_names.h"
#include "runtime/context.h"

namespace blockscope::ops {

// C[b] = alpha · A[b] · op(B[b / b_group]) for every batch entry b.
// a: [batch..., m, k], b: [batch'..., k, n] (or [batch'..., n, k] when trans_b), c: [batch..., m, n],
// all contiguous, same dtype. The flattened batch of A is b_group times that of B: with GQA,
// b_group consecutive query heads share one kv head. Because those heads are consecutive and
// contiguous, A can be read as [batch / b_group, b_group·m, k]: one strided-batched GEMM with
// m' = b_group·m covers GQA with no copy (CPU and CUDA both do this).
// kernel_name labels the work in the kernel table ("gemm_qk", "gemm_pv").
void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,
                    int64_t b_group = 1, const char* kernel_name = kernel_names::kGemm);

}  // namespace blockscope::ops
