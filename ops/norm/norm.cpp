// LayerNorm and RMSNorm: validation, then run_op (ops/common/dispatch.h).
#include "ops/norm/norm.h"

#include "ops/norm/backends.h"
#include "ops/common/rows.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

// x [..., N] (rows may be strided, each row contiguous), y the same shape and contiguous (y
// may be x itself: each row is read whole before it is written), weight/bias [N].
void check_norm(const Context& ctx, const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                const Tensor& y, float eps) {
  BS_CHECK_INPUT(x.defined(), op, ": input x is undefined");
  BS_CHECK_INPUT(weight.defined(), op, ": weight is undefined");
  BS_CHECK_INPUT(y.defined(), op, ": output y is undefined");
  for (const Tensor* t : {&x, &weight, &bias, &y}) {
    if (!t->defined()) continue;
    BS_CHECK_INPUT(t->device() == ctx.device(), op, ": tensor ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t->dtype() == x.dtype(), op, ": dtypes differ: x ", x.str(), ", got ", t->str());
  }
  BS_CHECK_INPUT(x.dim() >= 1 && x.size(-1) > 0, op, ": x must be [..., N] with N > 0, got ", x.str());
  const int64_t n = x.size(-1);
  BS_CHECK_INPUT(weight.dim() == 1 && weight.size(0) == n && weight.is_contiguous(), op, ": weight ", weight.str(),
                 " must be a contiguous [", n, "] for x ", x.str());
  if (bias.defined()) {
    BS_CHECK_INPUT(bias.dim() == 1 && bias.size(0) == n && bias.is_contiguous(), op, ": bias ", bias.str(),
                   " must be a contiguous [", n, "] for x ", x.str());
  }
  BS_CHECK_INPUT(y.shape() == x.shape(), op, ": output y ", y.str(), " must have x's shape ", x.str());
  BS_CHECK_INPUT(y.is_contiguous(), op, ": output y ", y.str(), " must be contiguous");
  RowLayout rows;
  BS_CHECK_INPUT(row_layout(x, &rows), op, ": x ", x.str(), " must have contiguous rows with one row stride");
  BS_CHECK_INPUT(eps >= 0.0f, op, ": eps must be >= 0, got ", eps);
}

}  // namespace

void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) {
  check_norm(ctx, "layer_norm", x, weight, bias, y, eps);
  // Per element: mean and variance sums (3), normalise and scale/shift (4).
  run_op(ctx,
         {"layer_norm", "", profiler::Family::norm, {&x, &weight, &bias}, {&y}, kLayerNormFlopsPerElement * static_cast<double>(x.numel()),
          x.numel() == 0},
         [&] { cpu::layer_norm(ctx, x, weight, bias, eps, y); },
         [&] { cuda::layer_norm(ctx, x, weight, bias, eps, y); });
}

void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check_norm(ctx, "rms_norm", x, weight, Tensor(), y, eps);
  // Per element: square-and-sum (2), normalise (1), scale (1).
  run_op(ctx,
         {"rms_norm", "", profiler::Family::norm, {&x, &weight}, {&y}, kRmsNormFlopsPerElement * static_cast<double>(x.numel()),
          x.numel() == 0},
         [&] { cpu::rms_norm(ctx, x, weight, eps, y); }, [&] { cuda::rms_norm(ctx, x, weight, eps, y); });
}

}  // namespace blockscope::ops
