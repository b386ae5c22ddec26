// Activations and gated activations: scalar definitions; validation, then run_op (ops/common/dispatch.h).
#include "ops/activation/activation.h"

#include "ops/activation/backends.h"
#include "ops/common/cpu_math.h"
#include "ops/common/rows.h"
#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "runtime/error.h"

namespace blockscope::ops {

float activation_value(Activation act, float x) { return activation_info(act).value(x); }

double activation_flops_per_element(Activation act) { return activation_info(act).flops_per_element; }

void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act) {
  check_on_context(ctx, "activation", "input x", x);
  check_on_context(ctx, "activation", "output y", y);
  BS_CHECK_INPUT(x.shape() == y.shape(), "activation (", activation_name(act), "): x ", x.str(), " and y ", y.str(),
                 " must have the same shape");
  BS_CHECK_INPUT(x.dtype() == y.dtype(), "activation (", activation_name(act), "): dtypes differ: x ", x.str(),
                 ", y ", y.str());
  BS_CHECK_INPUT(x.is_contiguous() && y.is_contiguous(), "activation (", activation_name(act),
                 "): x ", x.str(), " and y ", y.str(), " must be contiguous");
  run_op(ctx,
         {activation_name(act), "", profiler::Family::activation, {&x}, {&y},
          activation_flops_per_element(act) * static_cast<double>(x.numel()), x.numel() == 0},
         [&] { cpu::activation(ctx, x, y, act); }, [&] { cuda::activation(ctx, x, y, act); });
}

void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act) {
  check_on_context(ctx, "gated_activation", "gate", gate);
  check_on_context(ctx, "gated_activation", "up", up);
  check_on_context(ctx, "gated_activation", "output y", y);
  BS_CHECK_INPUT(gate.shape() == up.shape() && gate.shape() == y.shape(), "gated_activation (",
                 activation_name(act), "): gate ", gate.str(), ", up ", up.str(), " and y ", y.str(),
                 " must have the same shape");
  BS_CHECK_INPUT(gate.dtype() == up.dtype() && gate.dtype() == y.dtype(), "gated_activation: dtypes differ: gate ",
                 gate.str(), ", up ", up.str(), ", y ", y.str());
  BS_CHECK_INPUT(gate.dim() >= 1, "gated_activation: gate must be [rows, F], got ", gate.str());
  RowLayout layout;
  BS_CHECK_INPUT(row_layout(gate, &layout), "gated_activation: gate ", gate.str(),
                 " must have contiguous rows with one row stride (column slices are fine)");
  BS_CHECK_INPUT(row_layout(up, &layout), "gated_activation: up ", up.str(),
                 " must have contiguous rows with one row stride (column slices are fine)");
  BS_CHECK_INPUT(y.is_contiguous(), "gated_activation: output y ", y.str(), " must be contiguous");
  run_op(ctx,
         {"gated_activation", activation_name(act), profiler::Family::activation, {&gate, &up}, {&y},
          (activation_flops_per_element(act) + 1) * static_cast<double>(y.numel()), y.numel() == 0},
         [&] { cpu::gated_activation(ctx, gate, up, y, act); },
         [&] { cuda::gated_activation(ctx, gate, up, y, act); });
}

}  // namespace blockscope::ops
