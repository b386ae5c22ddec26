// Argument checks shared by the public ops: each throws InputError naming the op, the role of
// the tensor ("x", "weight", "out") and its shape, dtype and device (Tensor::str()).
#pragma once

#include "ops/common/rows.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace blockscope::ops {

// Defined and on the context's device.
inline void check_on_context(const Context& ctx, const char* op, const char* role, const Tensor& t) {
  BS_CHECK_INPUT(t.defined(), op, ": ", role, " is an undefined tensor");
  BS_CHECK_INPUT(t.device() == ctx.device(), op, ": ", role, " ", t.str(), " is on ", t.device().str(),
                 " but the context runs on ", ctx.device().str());
}

inline void check_contiguous(const char* op, const char* role, const Tensor& t) {
  BS_CHECK_INPUT(t.is_contiguous(), op, ": ", role, " ", t.str(), " must be contiguous");
}

// The ops that take FP8 tensors (the storage rule, runtime/dtype.h): an FP8 operand, contiguous.
inline void check_fp8_operand(const Context& ctx, const char* op, const char* role, const Tensor& t) {
  check_on_context(ctx, op, role, t);
  check_contiguous(op, role, t);
  BS_CHECK_INPUT(is_fp8(t.dtype()), op, ": ", role, " ", t.str(), " must be fp8_e4m3 or fp8_e5m2");
}

// A scale, its inverse or an amax: one f32 element on the context's device.
inline void check_f32_scalar(const Context& ctx, const char* op, const char* role, const Tensor& t) {
  check_on_context(ctx, op, role, t);
  BS_CHECK_INPUT(t.dtype() == DType::f32 && t.numel() == 1, op, ": ", role, " ", t.str(),
                 " must be an f32 tensor of one element");
}

inline void check_same_dtype(const char* op, const char* role_a, const Tensor& a, const char* role_b,
                             const Tensor& b) {
  BS_CHECK_INPUT(a.dtype() == b.dtype(), op, ": ", role_a, " ", a.str(), " and ", role_b, " ", b.str(),
                 " have different dtypes");
}

inline void check_same_shape(const char* op, const char* role_a, const Tensor& a, const char* role_b,
                             const Tensor& b) {
  BS_CHECK_INPUT(a.shape() == b.shape(), op, ": ", role_a, " ", a.str(), " and ", role_b, " ", b.str(),
                 " must have the same shape");
}

// The tensors of a collective that splits rows over ranks or joins them (reduce_scatter,
// all_gather): both defined on the context's device, contiguous, of one dtype, not overlapping,
// `whole` = `blocks` of `part` stacked along dim 0: [blocks·n, ...] and [n, ...].
inline void check_row_blocks(const Context& ctx, const char* op, const char* whole_role, const Tensor& whole,
                             const char* part_role, const Tensor& part, int blocks) {
  check_on_context(ctx, op, whole_role, whole);
  check_on_context(ctx, op, part_role, part);
  check_contiguous(op, whole_role, whole);
  check_contiguous(op, part_role, part);
  check_same_dtype(op, whole_role, whole, part_role, part);
  bool ok = whole.dim() >= 1 && whole.dim() == part.dim() && whole.size(0) == blocks * part.size(0);
  for (int64_t i = 1; ok && i < whole.dim(); ++i) ok = whole.size(i) == part.size(i);
  BS_CHECK_INPUT(ok, op, ": ", whole_role, " ", whole.str(), " must be ", blocks, " blocks of ", part_role, " ",
                 part.str(), " stacked along dim 0 (one per rank)");
  BS_CHECK_INPUT(!may_overlap(whole, part), op, ": ", part_role, " ", part.str(), " overlaps ", whole_role, " ",
                 whole.str());
}

}  // namespace blockscope::ops
