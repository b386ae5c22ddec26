// The precision ops (ops/precision/precision.h): validation, then run_op. These are the ops
// that take FP8 tensors (their records say taking_fp8(): the storage rule, runtime/dtype.h);
// each checks which of its tensors is which type.
#include "ops/precision/precision.h"

#include <vector>

#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/precision/backends.h"

namespace blockscope::ops {

namespace {

void check_compute_tensor(const Context& ctx, const char* op, const char* role, const Tensor& t) {
  check_on_context(ctx, op, role, t);
  check_contiguous(op, role, t);
  BS_CHECK_INPUT(!is_fp8(t.dtype()), op, ": ", role, " ", t.str(), " is FP8, a storage type: ", op,
                 " takes f32, f16 or bf16 there");
}

double elements(const Tensor& t) { return static_cast<double>(t.numel()); }

}  // namespace

void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax) {
  check_compute_tensor(ctx, "quantize", "x", x);
  check_fp8_operand(ctx, "quantize", "y", y);
  check_same_shape("quantize", "x", x, "y", y);
  BS_CHECK_INPUT(!may_overlap(x, y), "quantize: y ", y.str(), " overlaps x ", x.str());
  check_f32_scalar(ctx, "quantize", "scale", scale);
  if (amax.defined()) {
    check_f32_scalar(ctx, "quantize", "amax", amax);
    BS_CHECK_INPUT(amax.storage() != scale.storage() || amax.offset() != scale.offset(),
                   "quantize: amax ", amax.str(), " is the scale itself");
  }
  const bool with_amax = amax.defined();
  const double flops = (kQuantizeFlopsPerElement + (with_amax ? kAmaxFlopsPerElement : 0.0)) * elements(x);
  // Bytes: x and the scale read, y written; the running amax read and written.
  run_op(ctx,
         OpRecord{"quantize", "", profiler::Family::precision, {&x, &scale}, {&y}, flops, x.numel() == 0}
             .with_bytes(static_cast<double>(x.nbytes() + scale.nbytes() + y.nbytes()) +
                         (with_amax ? 2.0 * static_cast<double>(amax.nbytes()) : 0.0))
             .taking_fp8(),
         [&] { cpu::quantize(ctx, x, scale, y, amax); }, [&] { cuda::quantize(ctx, x, scale, y, amax); });
}

void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y) {
  check_fp8_operand(ctx, "dequantize", "x", x);
  check_compute_tensor(ctx, "dequantize", "y", y);
  check_same_shape("dequantize", "x", x, "y", y);
  BS_CHECK_INPUT(!may_overlap(x, y), "dequantize: y ", y.str(), " overlaps x ", x.str());
  check_f32_scalar(ctx, "dequantize", "scale_inv", scale_inv);
  run_op(ctx,
         OpRecord{"dequantize", "", profiler::Family::precision, {&x, &scale_inv}, {&y},
                  kDequantizeFlopsPerElement * elements(x), x.numel() == 0}
             .taking_fp8()
             .recorded_as(y.dtype()),
         [&] { cpu::dequantize(ctx, x, scale_inv, y); }, [&] { cuda::dequantize(ctx, x, scale_inv, y); });
}

const char* amax_algo_name(AmaxAlgo algo) { return algo == AmaxAlgo::max ? "max" : "most_recent"; }

bool parse_amax_algo(const std::string& text, AmaxAlgo* out) {
  for (AmaxAlgo algo : {AmaxAlgo::max, AmaxAlgo::most_recent}) {
    if (text == amax_algo_name(algo)) {
      *out = algo;
      return true;
    }
  }
  return false;
}

void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation) {
  const char* op = "fp8_scale_update";
  check_on_context(ctx, op, "amax_history", amax_history);
  check_contiguous(op, "amax_history", amax_history);
  BS_CHECK_INPUT(amax_history.dtype() == DType::f32 && amax_history.dim() == 1 && amax_history.numel() >= 1 &&
                     amax_history.numel() <= kMaxAmaxHistory,
                 op, ": amax_history ", amax_history.str(), " must be f32 [H], 1 <= H <= ", kMaxAmaxHistory);
  check_f32_scalar(ctx, op, "scale", scale);
  check_f32_scalar(ctx, op, "scale_inv", scale_inv);
  BS_CHECK_INPUT(is_fp8(update.format), op, ": the format ", dtype_name(update.format), " is not an FP8 type");
  BS_CHECK_INPUT(update.margin >= 0 && update.margin <= 64, op, ": margin ", update.margin, " must be in [0, 64]");
  std::vector<const Tensor*> written = {&amax_history, &scale, &scale_inv};
  if (saturation.defined()) {
    check_on_context(ctx, op, "saturation", saturation);
    check_contiguous(op, "saturation", saturation);
    BS_CHECK_INPUT(saturation.dtype() == DType::f32 && saturation.dim() == 1 && saturation.numel() == 3, op,
                   ": saturation ", saturation.str(), " must be f32 [3]: updates, saturated updates, the largest ratio");
    written.push_back(&saturation);
  }
  for (size_t i = 0; i < written.size(); ++i)
    for (size_t j = i + 1; j < written.size(); ++j)
      BS_CHECK_INPUT(!may_overlap(*written[i], *written[j]), op, ": ", written[i]->str(), " and ", written[j]->str(),
                     " overlap");
  // Bytes: the history read (and, rolled, written), the scale read, the scale and inverse written;
  // the saturation counts read and written.
  const double history_bytes = static_cast<double>(amax_history.nbytes());
  const double saturation_bytes = saturation.defined() ? 2.0 * static_cast<double>(saturation.nbytes()) : 0.0;
  run_op(ctx,
         OpRecord{op, "", profiler::Family::precision, {&amax_history, &scale}, {&scale, &scale_inv, &saturation},
                  static_cast<double>(amax_history.numel()) + 2.0}
             .with_bytes(history_bytes * (update.roll ? 2.0 : 1.0) + 3.0 * static_cast<double>(scale.nbytes()) +
                         saturation_bytes),
         [&] { cpu::fp8_scale_update(ctx, amax_history, scale, scale_inv, update, saturation); },
         [&] { cuda::fp8_scale_update(ctx, amax_history, scale, scale_inv, update, saturation); });
}

void amax(Context& ctx, const Tensor& x, Tensor& amax) {
  check_compute_tensor(ctx, "amax", "x", x);
  check_f32_scalar(ctx, "amax", "amax", amax);
  // No elements still writes amax (0): the op runs, unlike ops whose output is empty.
  run_op(ctx, OpRecord{"amax", "", profiler::Family::precision, {&x}, {&amax}, kAmaxFlopsPerElement * elements(x)},
         [&] { cpu::amax(ctx, x, amax); }, [&] { cuda::amax(ctx, x, amax); });
}

}  // namespace blockscope::ops
