// linear / matmul_add: validation, then run_op (ops/common/dispatch.h).
#include "ops/linear/linear.h"

#include "ops/linear/backends.h"
#include "ops/common/flops.h"
#include "ops/common/rows.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {

double linear_flops(int64_t rows, int64_t in, int64_t out) { return gemm_flops(rows, out, in); }

namespace {

const char* layout_name(WeightLayout layout) { return layout == WeightLayout::out_in ? "out_in" : "in_out"; }

// Checks every argument once for all devices; returns {rows, in, out}.
RowLayout check_linear(const Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                       WeightLayout layout) {
  BS_CHECK_INPUT(x.defined(), "linear: input x is undefined");
  BS_CHECK_INPUT(w.defined(), "linear: weight is undefined");
  BS_CHECK_INPUT(y.defined(), "linear: output y is undefined (allocate it, e.g. ctx.empty)");
  for (const Tensor* t : {&x, &w, &bias, &y}) {
    if (!t->defined()) continue;
    BS_CHECK_INPUT(t->device() == ctx.device(), "linear: tensor ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t->dtype() == x.dtype(), "linear: dtypes differ: x ", x.str(), ", got ", t->str());
  }
  BS_CHECK_INPUT(x.dim() >= 1, "linear: x must be [..., in], got ", x.str());
  BS_CHECK_INPUT(w.dim() == 2, "linear: weight must be 2-D (", layout_name(layout), "), got ", w.str());
  BS_CHECK_INPUT(w.is_contiguous(), "linear: weight ", w.str(), " must be contiguous (the layout flag, ",
                 "not a view, says whether it is [out, in] or [in, out])");
  const int64_t in = x.size(-1);
  const int64_t w_in = layout == WeightLayout::out_in ? w.size(1) : w.size(0);
  const int64_t out = layout == WeightLayout::out_in ? w.size(0) : w.size(1);
  BS_CHECK_INPUT(w_in == in, "linear: weight ", w.str(), " with layout ", layout_name(layout),
                 (layout == WeightLayout::out_in ? " ([out, in])" : " ([in, out])"), " does not match x ", x.str(),
                 ": in = ", in, " but the weight's in = ", w_in);
  if (bias.defined()) {
    BS_CHECK_INPUT(bias.dim() == 1 && bias.size(0) == out, "linear: bias ", bias.str(), " must be [", out,
                   "] for weight ", w.str());
    BS_CHECK_INPUT(bias.is_contiguous(), "linear: bias ", bias.str(), " must be contiguous");
  }
  Shape y_shape = x.shape();
  y_shape.back() = out;
  BS_CHECK_INPUT(y.shape() == y_shape, "linear: output y ", y.str(), " must be ", shape_str(y_shape), " for x ",
                 x.str(), " and weight ", w.str());
  BS_CHECK_INPUT(y.is_contiguous(), "linear: output y ", y.str(), " must be contiguous");
  for (const Tensor* t : {&x, &w, &bias}) {
    BS_CHECK_INPUT(!may_overlap(y, *t), "linear: output y ", y.str(), " overlaps input ", t->str(),
                   " (the GEMM reads its inputs while it writes y; use a separate output)");
  }
  RowLayout rows;
  BS_CHECK_INPUT(row_layout(x, &rows), "linear: x ", x.str(),
                 " must have contiguous rows with one row stride (a transposed view would need a copy)");
  return rows;
}

}  // namespace

void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path,
            WeightLayout layout, LinearActivation act) {
  const RowLayout rows = check_linear(ctx, x, w, bias, y, layout);
  const int64_t out = y.size(-1);
  run_op(ctx,
         {"linear", path_name(path), profiler::Family::linear, {&x, &w, &bias}, {&y}, linear_flops(rows.rows, rows.cols, out),
          y.numel() == 0},
         [&] { cpu::linear(ctx, x, w, bias, y, path, layout, act); },
         [&] { cuda::linear(ctx, x, w, bias, y, path, layout, act); });
}

}  // namespace blockscope::ops
