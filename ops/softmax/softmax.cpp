// Public softmax ops: validation once for every device, then run_op (ops/common/dispatch.h).
#include "ops/softmax/softmax.h"

#include "ops/softmax/backends.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

void check_pair(const Context& ctx, const char* op, const Tensor& x, const Tensor& y, int64_t min_dims,
                const char* layout) {
  BS_CHECK_INPUT(x.defined() && y.defined(), op, ": x and y must both be defined tensors");
  for (const Tensor* t : {&x, &y}) {
    const char* role = t == &x ? "x" : "y";
    BS_CHECK_INPUT(t->device() == ctx.device(), op, ": ", role, " ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t->dim() >= min_dims, op, ": ", role, " ", t->str(), " must be ", layout);
    BS_CHECK_INPUT(t->is_contiguous(), op, ": ", role, " ", t->str(), " must be contiguous");
  }
  BS_CHECK_INPUT(x.dtype() == y.dtype(), op, ": x ", x.str(), " and y ", y.str(), " have different dtypes");
  BS_CHECK_INPUT(x.shape() == y.shape(), op, ": x ", x.str(), " and y ", y.str(), " must have the same shape");
}

}  // namespace

void softmax(Context& ctx, const Tensor& x, Tensor& y) {
  check_pair(ctx, "softmax", x, y, 1, "[..., N] (at least 1-D)");
  run_op(ctx,
         {"softmax", "", profiler::Family::softmax, {&x}, {&y}, kSoftmaxFlopsPerElement * static_cast<double>(x.numel()),
          x.numel() == 0},
         [&] { cpu::softmax(ctx, x, y); }, [&] { cuda::softmax(ctx, x, y); });
}

void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y) {
  check_pair(ctx, "softmax_scale_causal", x, y, 2, "scores [..., Sq, Sk] (at least 2-D)");
  run_op(ctx,
         {"softmax_scale_causal", "", profiler::Family::softmax, {&x}, {&y},
          kSoftmaxScaleFlopsPerElement * static_cast<double>(x.numel()), x.numel() == 0},
         [&] { cpu::softmax_scale_causal(ctx, x, scale, causal, y); },
         [&] { cuda::softmax_scale_causal(ctx, x, scale, causal, y); });
}

}  // namespace blockscope::ops
