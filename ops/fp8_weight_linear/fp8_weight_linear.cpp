// fp8_weight_linear (ops/fp8_weight_linear/fp8_weight_linear.h): validation, then run_op. The
// record takes FP8 tensors (the storage rule, runtime/dtype.h): w only -- x, bias and y are of
// a compute dtype, checked here by name.
#include "ops/fp8_weight_linear/fp8_weight_linear.h"

#include <cstdint>
#include <limits>

#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/fp8_weight_linear/backends.h"
#include "ops/linear/linear.h"

namespace blockscope::ops {

namespace {
constexpr const char* kFp8WeightLinearOp = "fp8_weight_linear";
}  // namespace

void fp8_weight_linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& bias,
                       Tensor& y, bool gelu) {
  check_on_context(ctx, kFp8WeightLinearOp, "x", x);
  check_contiguous(kFp8WeightLinearOp, "x", x);
  BS_CHECK_INPUT(!is_fp8(x.dtype()), kFp8WeightLinearOp, ": x ", x.str(),
                 " is FP8: weight-only FP8 reads x in f32, f16 or bf16 (both operands FP8: fp8_linear)");
  check_fp8_operand(ctx, kFp8WeightLinearOp, "w", w);
  BS_CHECK_INPUT(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), kFp8WeightLinearOp, ": w ", w.str(),
                 " must be [N, K] with K the last dimension of x ", x.str());
  const int64_t k = w.size(1), n = w.size(0), m = k == 0 ? 0 : x.numel() / k;
  BS_CHECK_INPUT(k > 0, kFp8WeightLinearOp, ": x ", x.str(), " and w ", w.str(), " have K = 0 (an empty sum; no FP8 weight to read)");
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  BS_CHECK_INPUT(k <= kIntMax && n <= kIntMax && m <= kIntMax, kFp8WeightLinearOp, ": x ", x.str(), " and w ", w.str(),
                 " exceed the kernels' 32-bit sizes (M, K and N up to ", kIntMax, ")");
  // CUDA runs the rows in passes of 16, one grid row each (at most 65535).
  BS_CHECK_INPUT(!ctx.device().is_cuda() || (m + 15) / 16 <= 65535, kFp8WeightLinearOp, ": x ", x.str(), " has ", m,
                 " rows; the CUDA kernel takes up to 65535 passes of 16");
  check_on_context(ctx, kFp8WeightLinearOp, "w_scale", w_scale);
  check_contiguous(kFp8WeightLinearOp, "w_scale", w_scale);
  BS_CHECK_INPUT(w_scale.dtype() == DType::f32 && w_scale.dim() == 1 && w_scale.size(0) == n, kFp8WeightLinearOp, ": w_scale ",
                 w_scale.str(), " must be f32[", n, "]: one dequantisation factor per row of w ", w.str());
  check_on_context(ctx, kFp8WeightLinearOp, "y", y);
  check_contiguous(kFp8WeightLinearOp, "y", y);
  check_same_dtype(kFp8WeightLinearOp, "x", x, "y", y);
  Shape y_shape = x.shape();
  y_shape.back() = n;
  BS_CHECK_INPUT(y.shape() == y_shape, kFp8WeightLinearOp, ": y ", y.str(), " must be ", shape_str(y_shape), " for x ", x.str(),
                 " and w ", w.str());
  if (bias.defined()) {
    check_on_context(ctx, kFp8WeightLinearOp, "bias", bias);
    check_contiguous(kFp8WeightLinearOp, "bias", bias);
    check_same_dtype(kFp8WeightLinearOp, "bias", bias, "y", y);
    BS_CHECK_INPUT(bias.dim() == 1 && bias.size(0) == n, kFp8WeightLinearOp, ": bias ", bias.str(), " must be [", n, "] for w ",
                   w.str());
  }
  // y is written while x, w, w_scale and bias are read (no kernel orders the two).
  for (const Tensor* input : {&x, &w, &w_scale, &bias}) {
    if (!input->defined()) continue;
    BS_CHECK_INPUT(!may_overlap(y, *input), kFp8WeightLinearOp, ": y ", y.str(), " overlaps an input ", input->str());
  }

  run_op(ctx,
         OpRecord{kFp8WeightLinearOp, "", profiler::Family::linear, {&x, &w, &w_scale, &bias}, {&y}, linear_flops(m, k, n),
                  m == 0 || n == 0}
             .taking_fp8()
             .recorded_as(y.dtype()),
         [&] { cpu::fp8_weight_linear(ctx, x, w, w_scale, bias, y, gelu); },
         [&] { cuda::fp8_weight_linear(ctx, x, w, w_scale, bias, y, gelu); });
}

}  // namespace blockscope::ops
