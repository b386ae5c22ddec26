// info --predict: an op call's kernels onto the GPU performance model (cost_prediction.h).
#include "tools/cli/cost_prediction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/attention/backends.h"
#include "ops/common/kernel_names.h"
#include "ops/decode_attention/backends.h"
#include "ops/elementwise/backends.h"
#include "ops/elementwise/elementwise.h"
#include "ops/fp8_linear/backends.h"
#include "ops/linear/backends.h"
#include "profiler/gpu_model.h"
#include "runtime/dtype.h"

namespace blockscope::cli {

namespace {

namespace predict = profiler::predict;
namespace names = ops::kernel_names;
using profiler::ComputeUnit;

struct PredictedKernel {
  PredictedKernel(std::string kernel, const predict::KernelPrediction& prediction, std::string gemm_tile = "")
      : name(std::move(kernel)), p(prediction), tile(std::move(gemm_tile)) {}
  std::string name;
  predict::KernelPrediction p;
  std::string tile;  // GEMMs only
};

// One GEMM of the call: batch × (m × k) · (k × n).
struct GemmSize {
  int64_t m, n, k, batch = 1;
};

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }
double d(int64_t v) { return static_cast<double>(v); }

// f32 GEMMs run full fp32 on the CUDA cores (GemmSettings::allow_tf32 is off by default).
ComputeUnit gemm_unit(DType dtype) { return dtype == DType::f32 ? ComputeUnit::cuda_fp32 : ComputeUnit::tensor_bf16; }

// A kernel that streams `bytes` and does `flops` on the CUDA cores.
predict::KernelPrediction stream(const profiler::GpuSpec& gpu, double flops, double bytes) {
  predict::KernelWork work;
  work.flops = flops;
  work.unit = ComputeUnit::cuda_fp32;
  work.dram_bytes = bytes;
  return predict::predict_kernel(gpu, work);
}

// The GEMMs of an op call, in launch order (the catalogue's kernel lists, ops/catalogue).
std::vector<GemmSize> gemms_of(const ops::OpSpec& op, const ops::OpCall& c) {
  const std::string name = op.name;
  if (name == "linear" || name == "fp8_linear") return {{c.size("M"), c.size("N"), c.size("K")}};
  if (name == "batched_matmul") return {{c.size("M"), c.size("N"), c.size("K"), c.size("batch")}};
  if (name == "attention") {
    const int64_t bh = c.size("B") * c.size("H");
    return {{c.size("Sq"), c.size("Sk"), c.size("D"), bh}, {c.size("Sq"), c.size("D"), c.size("Sk"), bh}};
  }
  if (name == "mlp") {
    const int64_t t = c.size("T"), dm = c.size("D"), f = c.size("F");
    if (!c.flag("gated")) return {{t, f, dm}, {t, dm, f}};
    if (c.path == "naive") return {{t, f, dm}, {t, f, dm}, {t, dm, f}};
    return {{t, 2 * f, dm}, {t, dm, f}};
  }
  return {};
}

bool is_gemm(const std::string& k) {
  return k == names::kGemm || k == names::kGemmBias || k == names::kGemmGelu || k == names::kGemmBiasGelu ||
         k == names::kGemmQk || k == names::kGemmPv || starts_with(k, names::kWeightStreaming) ||
         starts_with(k, names::kFp8Gemm);
}

predict::Epilogue epilogue_of(const std::string& kernel, const ops::OpCall& c) {
  if (kernel == names::kGemmBias || kernel == names::kFp8GemmBias) return predict::Epilogue::bias;
  if (kernel == names::kGemmGelu || kernel == names::kFp8GemmGelu) return predict::Epilogue::gelu;
  if (kernel == names::kGemmBiasGelu || kernel == names::kFp8GemmBiasGelu) return predict::Epilogue::bias_gelu;
  return c.path == "addmm" ? predict::Epilogue::accumulate : predict::Epilogue::none;
}

PredictedKernel gemm_kernel(const profiler::GpuSpec& gpu, const std::string& kernel, const GemmSize& g,
                            const ops::OpCall& c) {
  const double elem = static_cast<double>(dtype_size(c.dtype));
  if (starts_with(kernel, names::kWeightStreaming)) {
    // The weight-streaming kernel (ops/linear/skinny_gemm.h): FMAs on the CUDA cores while the
    // weights stream once from DRAM.
    const double bytes = (d(g.m) * d(g.k) + d(g.k) * d(g.n) + d(g.m) * d(g.n)) * elem;
    return {kernel, stream(gpu, 2 * d(g.m) * d(g.n) * d(g.k), bytes)};
  }
  // FP8 GEMMs on the FP8 tensor cores (a GPU without them, the A100, is named in the error).
  const ComputeUnit unit = starts_with(kernel, names::kFp8Gemm) ? ComputeUnit::tensor_fp8 : gemm_unit(c.dtype);
  const predict::GemmPrediction p = predict::predict_gemm(gpu, g.m, g.n, g.k, g.batch, unit, epilogue_of(kernel, c));
  return {kernel, p, p.tile};
}

// The elementwise kernels around an op's GEMMs: `elements` of the tensor they work on.
std::optional<PredictedKernel> elementwise_kernel(const profiler::GpuSpec& gpu, const std::string& kernel,
                                                  double elements, double row_length, const ops::OpCall& c) {
  const double elem = static_cast<double>(dtype_size(c.dtype));
  if (kernel == names::kBiasAdd) return PredictedKernel{kernel, stream(gpu, elements, (2 * elements + row_length) * elem)};
  if (kernel == names::kBiasBroadcastCopy) return PredictedKernel{kernel, stream(gpu, 0, (elements + row_length) * elem)};
  if (kernel == names::kMemset) return PredictedKernel{kernel, stream(gpu, 0, elements * elem)};
  if (kernel == names::kMul) return PredictedKernel{kernel, stream(gpu, elements, 3 * elements * elem)};
  if (kernel == names::kScale || kernel == names::kMemcpyDtoD)
    return PredictedKernel{kernel, stream(gpu, kernel == names::kScale ? elements : 0, 2 * elements * elem)};
  return std::nullopt;
}

// Kernels of the GEMM-built ops (linear, batched_matmul, attention's unfused paths, mlp).
std::vector<PredictedKernel> gemm_op_kernels(const profiler::GpuSpec& gpu, const ops::OpSpec& op, const ops::OpCall& c,
                                             const std::vector<std::string>& kernels) {
  const std::vector<GemmSize> gemms = gemms_of(op, c);
  const double elem = static_cast<double>(dtype_size(c.dtype));
  std::vector<PredictedKernel> out;
  size_t next = 0;
  // The tensor the elementwise kernels work on: the last GEMM's output (the first's before it).
  double elements = d(gemms.front().m) * d(gemms.front().n) * d(gemms.front().batch), row = d(gemms.front().n);
  for (const std::string& kernel : kernels) {
    if (is_gemm(kernel) && next < gemms.size()) {
      const GemmSize& g = gemms[next++];
      out.push_back(gemm_kernel(gpu, kernel, g, c));
      elements = d(g.m) * d(g.n) * d(g.batch);
      row = d(g.n);
    } else if (auto e = elementwise_kernel(gpu, kernel, elements, row, c)) {
      out.push_back(*e);
    } else if (kernel == names::kMaskedFillCausal) {
      const double masked = ops::causal_masked_elements(c.size("B") * c.size("H"), c.size("Sq"), c.size("Sk"));
      out.push_back({kernel, stream(gpu, 0, masked * elem)});
    } else {
      // Activations (one element in, one out; a gated one reads two), softmax: rows of `row`.
      const bool gated = starts_with(kernel, "gated_");
      const double produced = gated ? elements / 2 : elements;
      double flops = 8 * produced;
      if (!c.activation.empty()) {
        ops::Activation act{};
        if (ops::parse_activation(c.activation, &act)) flops = ops::activation_flops_per_element(act) * produced;
      }
      out.push_back({kernel, stream(gpu, flops, (elements + produced) * elem)});
      elements = produced;
      if (gated) row /= 2;
    }
  }
  return out;
}

std::vector<PredictedKernel> op_kernels(const profiler::GpuSpec& gpu, const ops::OpSpec& op, const ops::OpCall& c) {
  const std::vector<std::string> kernels = ops::launched_kernels(op, c, DeviceType::cuda);
  if (kernels.empty()) return {};  // no output elements: nothing launches, nothing to predict
  const std::string name = op.name;
  const ops::OpCost cost = op.cost(c);
  const double elem = static_cast<double>(dtype_size(c.dtype));
  if (name == "attention" && c.path == "flash") {
    predict::AttentionShape s;
    s.batch = c.size("B");
    s.heads = c.size("H");
    s.kv_heads = c.size("Hkv");
    s.seq_q = c.size("Sq");
    s.seq_k = c.size("Sk");
    s.head_dim = c.size("D");
    s.causal = c.flag("causal");
    std::vector<PredictedKernel> out{{kernels.front(), predict::predict_attention_flash(gpu, s)}};
    // The split-keys combine reads each split's partial output and writes O (two splits or more).
    if (kernels.size() > 1) out.push_back({kernels[1], stream(gpu, 0, 3.0 * d(s.batch * s.heads * s.seq_q * s.head_dim) * 4)});
    return out;
  }
  if (!gemms_of(op, c).empty() && !(name == "linear" && c.size("K") == 0) && !(name == "batched_matmul" && c.size("K") == 0))
    return gemm_op_kernels(gpu, op, c, kernels);
  if (op.family == profiler::Family::collective) {
    const predict::Collective coll = name == "all_reduce"       ? predict::Collective::all_reduce
                                     : name == "reduce_scatter" ? predict::Collective::reduce_scatter
                                                                : predict::Collective::all_gather;
    return {{kernels.front(), predict::predict_collective(gpu, coll, d(c.size("N")) * elem, static_cast<int>(c.size("ranks")))}};
  }
  if (name == "masked_fill") {  // out of place: the copy, then the fill of the masked elements
    const double all = d(c.size("B")) * d(c.size("Sq")) * d(c.size("Sk"));
    return {{kernels[0], stream(gpu, 0, 2 * all * elem)}, {kernels[1], stream(gpu, 0, cost.bytes - 2 * all * elem)}};
  }
  if (name == "fp8_weight_linear") {
    // The weight-streaming kernel on FP8 codes (ops/fp8_weight_linear): FMAs on the CUDA cores,
    // the codes streamed once per pass of 16 rows of x.
    const double passes = std::ceil(d(c.size("M")) / 16.0), weight = d(c.size("N")) * d(c.size("K"));
    return {{kernels.front(), stream(gpu, cost.flops, cost.bytes + (passes - 1) * weight)}};
  }
  // One kernel: the catalogue's cost; several (decode attention): the cost shared evenly.
  std::vector<PredictedKernel> out;
  const double share = 1.0 / std::max<size_t>(kernels.size(), 1);
  for (const std::string& kernel : kernels) out.push_back({kernel, stream(gpu, cost.flops * share, cost.bytes * share)});
  return out;
}

nlohmann::json kernel_json(const PredictedKernel& k) {
  nlohmann::json j{{"name", k.name},         {"predicted_us", k.p.predicted_us}, {"compute_us", k.p.compute_us},
                   {"memory_us", k.p.memory_us}, {"launch_us", k.p.launch_us},   {"waves", k.p.waves},
                   {"bound", k.p.bound}};
  if (!k.tile.empty()) j["tile"] = k.tile;
  return j;
}

}  // namespace

nlohmann::json predict_op_cost(const profiler::GpuSpec& gpu, const ops::OpSpec& op, const ops::OpCall& call) {
  const std::vector<PredictedKernel> kernels = op_kernels(gpu, op, call);
  nlohmann::json out{{"target", gpu.name}, {"model_version", predict::kModelVersion}, {"predicted_kernels", nlohmann::json::array()}};
  double predicted = 0, compute = 0, memory = 0, launch = 0, waves = 0, longest = -1;
  for (const PredictedKernel& k : kernels) {
    predicted += k.p.predicted_us;
    compute += k.p.compute_us;
    memory += k.p.memory_us;
    launch += k.p.launch_us;
    if (k.p.predicted_us > longest) {
      longest = k.p.predicted_us;
      waves = k.p.waves;
    }
    out["predicted_kernels"].push_back(kernel_json(k));
  }
  out["predicted_us"] = predicted;
  out["compute_us"] = compute;
  out["memory_us"] = memory;
  out["launch_us"] = launch;
  out["waves"] = waves;
  return out;
}

}  // namespace blockscope::cli
