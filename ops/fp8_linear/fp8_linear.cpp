// fp8_linear (ops/fp8_linear/fp8_linear.h): validation -- cuBLASLt's FP8 rules, on every device
// -- then run_op. The record takes FP8 tensors (the storage rule, runtime/dtype.h).
#include "ops/fp8_linear/fp8_linear.h"

#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/fp8_linear/backends.h"
#include "ops/linear/linear.h"

namespace blockscope::ops {

namespace {
constexpr const char* kOp = "fp8_linear";
}  // namespace

void fp8_linear(Context& ctx, const Tensor& x, const Tensor& scale_x_inv, const Tensor& w, const Tensor& scale_w_inv,
                const Tensor& bias, Tensor& y, const Fp8LinearOptions& options) {
  check_fp8_operand(ctx, kOp, "x", x);
  check_fp8_operand(ctx, kOp, "w", w);
  check_f32_scalar(ctx, kOp, "scale_x_inv", scale_x_inv);
  check_f32_scalar(ctx, kOp, "scale_w_inv", scale_w_inv);
  BS_CHECK_INPUT(!(x.dtype() == DType::fp8_e5m2 && w.dtype() == DType::fp8_e5m2), kOp, ": x ", x.str(), " and w ",
                 w.str(), " are both fp8_e5m2: cuBLASLt multiplies e4m3 by e4m3 or e5m2, not e5m2 by e5m2");
  BS_CHECK_INPUT(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), kOp, ": w ", w.str(),
                 " must be [N, K] with K the last dimension of x ", x.str());
  const int64_t k = w.size(1), n = w.size(0), m = k == 0 ? 0 : x.numel() / k;
  BS_CHECK_INPUT(k > 0 && k % 16 == 0 && n % 16 == 0, kOp, ": K = ", k, " and N = ", n, " (x ", x.str(), ", w ",
                 w.str(), ") must be multiples of 16, K at least 16: cuBLASLt's FP8 GEMMs take 16-byte rows");

  check_on_context(ctx, kOp, "y", y);
  check_contiguous(kOp, "y", y);
  Shape y_shape = x.shape();
  y_shape.back() = n;
  BS_CHECK_INPUT(y.shape() == y_shape, kOp, ": y ", y.str(), " must be ", shape_str(y_shape), " for x ", x.str(),
                 " and w ", w.str());
  const bool fp8_out = is_fp8(y.dtype());
  BS_CHECK_INPUT(y.dtype() != DType::fp8_e5m2 || x.dtype() == DType::fp8_e5m2 || w.dtype() == DType::fp8_e5m2, kOp,
                 ": y ", y.str(), " is fp8_e5m2 but x and w are e4m3: cuBLASLt writes e5m2 only from an e5m2 operand");
  if (fp8_out) {
    BS_CHECK_INPUT(options.out_scale.defined(), kOp, ": y ", y.str(), " is FP8 and needs options.out_scale");
    check_f32_scalar(ctx, kOp, "out_scale", options.out_scale);
  } else {
    BS_CHECK_INPUT(!options.out_scale.defined(), kOp, ": options.out_scale applies to an FP8 y only; y is ", y.str());
  }
  if (options.out_amax.defined()) check_f32_scalar(ctx, kOp, "out_amax", options.out_amax);
  if (bias.defined()) {
    check_on_context(ctx, kOp, "bias", bias);
    const DType want = y.dtype() == DType::f16 ? DType::f16 : DType::bf16;
    BS_CHECK_INPUT(bias.dim() == 1 && bias.size(0) == n && bias.dtype() == want, kOp, ": bias ", bias.str(),
                   " must be ", dtype_name(want), "[", n, "] for y ", y.str(),
                   " (cuBLASLt's FP8 rule: f16 for an f16 y, bf16 otherwise)");
  }
  if (ctx.device().is_cuda()) {
    for (const Tensor* t : {&x, &w, static_cast<const Tensor*>(&y)}) {
      BS_CHECK_INPUT(reinterpret_cast<uintptr_t>(t->data()) % 16 == 0, kOp, ": ", t->str(),
                     " must start 16-byte aligned (cuBLASLt's FP8 rule); this view starts at element ", t->offset());
    }
  }

  run_op(ctx,
         OpRecord{kOp,
                  "",
                  profiler::Family::linear,
                  {&x, &scale_x_inv, &w, &scale_w_inv, &bias, &options.out_scale},
                  {&y, &options.out_amax},
                  linear_flops(m, k, n),
                  m == 0 || n == 0}
             .taking_fp8()
             .recorded_as(y.dtype()),
         [&] { cpu::fp8_linear(ctx, x, scale_x_inv, w, scale_w_inv, bias, y, options); },
         [&] { cuda::fp8_linear(ctx, x, scale_x_inv, w, scale_w_inv, bias, y, options); });
}

}  // namespace blockscope::ops
