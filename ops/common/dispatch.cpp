#include "ops/common/dispatch.h"

#include <cmath>
#include <string>
#include <vector>

#include "runtime/interrupt.h"

namespace blockscope::ops {

void check_storage_rule(const OpRecord& record) {
  if (record.takes_fp8) return;
  for (const auto* list : {&record.inputs, &record.outputs}) {
    for (const Tensor* t : *list) {
      BS_CHECK_INPUT(t == nullptr || !t->defined() || !is_fp8(t->dtype()), record.name, ": ",
                     list == &record.inputs ? "input " : "output ", t->str(),
                     " is FP8, a storage type: this op computes in f32, f16 or bf16 -- dequantize it first, "
                     "or quantize what it gives (docs/FP8.md)");
    }
  }
}

void finish_op(Context& ctx, const OpRecord& record) {
  // Ctrl-C inside a long forward (a 3000-token decode, a block of gigabytes on the CPU): answered
  // between ops, not at the end of the step. CPU only: on a GPU the ops are queued, not run, here.
  if (interrupt_signal() != 0 && ctx.device().is_cpu()) check_interrupted(("after op '" + std::string(record.name) + "'").c_str());
  if (!ctx.sync_after_each_op() && !ctx.check_finite_after_each_op()) return;
  try {
    ctx.synchronize();
  } catch (const Error& error) {
    throw Error(error.kind(), std::string("op '") + record.name + "' failed: " + error.what());
  }
  if (!ctx.check_finite_after_each_op() || record.empty) return;
  for (const Tensor* output : record.outputs) {
    if (output == nullptr || !output->defined()) continue;
    const std::vector<float> values = to_floats(*output);
    // A causal fill's masked elements: (row, key) of each [Sq, Sk] matrix with key > row + Sk - Sq.
    const int64_t sq = output->dim() >= 2 ? output->size(-2) : 1, sk = output->dim() >= 1 ? output->size(-1) : 1;
    const auto masked = [&](size_t i) {
      const int64_t index = static_cast<int64_t>(i), key = index % sk, row = (index / sk) % sq;
      return record.causal_fill && key > row + sk - sq;
    };
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i]) || masked(i)) continue;
      const std::string where = ctx.scope_path().empty() ? std::string() : " (in " + ctx.scope_path() + ")";
      throw Error(ErrorKind::runtime, std::string("run.check_finite: op '") + record.name + "'" + where +
                                          " wrote " + std::to_string(values[i]) + " at element " + std::to_string(i) +
                                          " of its output " + output->str() + ": the first non-finite value");
    }
  }
}

}  // namespace blockscope::ops
