// Argument checks shared by the public ops: each throws InputError naming the op, the role of
// the tensor ("x", "weight", "out") and its shape, dtype and device (Tensor::str()).
#pragma once

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

}  // namespace blockscope::ops
