#include "model/workload.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "profiler/render.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"

namespace blockscope {

MemoryEstimate estimate_memory(const WorkloadConfig& config, const std::vector<PathConfig>& paths) {
  return make_workload_runner(config)->memory(paths);
}

namespace {

// Replaces the seeded input with the tensor "input" of a safetensors file (same shape).
void load_input(Tensor& input, const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  const SafetensorsEntry* entry = file.find("input");
  if (entry == nullptr) throw InputError(path + ": input.file has no tensor named 'input'");
  if (entry->shape != input.shape()) {
    throw InputError(path + ": tensor 'input' has shape " + shape_str(entry->shape) + ", but the workload's input is " +
                     shape_str(input.shape()) + " (check input.batch, input.seq_len and model.d_model)");
  }
  Context host(Device::cpu());
  const std::vector<float> values = to_floats(tensor_from_entry(host, *entry));
  check_finite(values, input.dtype(), path + ": tensor 'input'");
  from_floats(input, values);
}

}  // namespace

Workload::Workload(Context& ctx, const WorkloadConfig& config, const std::vector<PathConfig>& paths,
                   Communicator* group)
    : ctx_(ctx), config_(config), runner_(make_workload_runner(config)), paths_(config.paths) {
  runner_->set_tensor_parallel_group(group);
  std::vector<PathConfig> all = paths;
  if (all.empty()) all.push_back(config.paths);
  memory_ = runner_->memory(all);
  if (ctx.device().is_cpu() && cpu::packs_weights()) memory_.packed_weights = runner_->packable_weight_bytes(all);
  const size_t available = ctx.backend().memory_available();
  if (memory_.total() > available) {
    // The advice is about the largest part (issue 43: 42 KiB of scores were blamed beside
    // 23.7 GiB of weights).
    const bool decode = config.kind == WorkloadKind::decode;
    struct Part {
      const char* what;
      size_t bytes;
      std::string advice;
    };
    const std::vector<Part> parts = {
        {"weights", memory_.weights,
         "a smaller model (model.d_model, d_ff, n_layers)" +
             std::string(config.dtype == DType::f32 ? " or a 16-bit dtype (--dtype bf16: half the bytes)" : "")},
        {"activations", memory_.activations,
         decode ? "reduce decode.batch or the prompts" : "reduce input.batch / input.seq_len"},
        {"attention scores [B, H, S, S]", memory_.scores,
         "use paths.attention: flash (it keeps no S x S matrix) and drop naive variants from compare"},
        {"packed weight copies", memory_.packed_weights, "set cpu.gemm=builtin (or openblas): no packed copies"},
        {"KV cache", memory_.kv_cache, "reduce decode.batch, the prompts, new_tokens or decode.kv_cache.max_len"},
    };
    const Part& largest =
        *std::max_element(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.bytes < b.bytes; });
    const std::string advice = "; the " + std::string(largest.what) + " alone take " +
                               profiler::format_bytes(static_cast<double>(largest.bytes)) + " (the largest part): " +
                               largest.advice + ", or ";
    throw InputError("workload '" + (config.name.empty() ? config.source : config.name) + "' needs about " +
                     profiler::format_bytes(static_cast<double>(memory_.total())) + " (weights " +
                     profiler::format_bytes(static_cast<double>(memory_.weights)) + ", activations " +
                     profiler::format_bytes(static_cast<double>(memory_.activations)) + ", attention scores " +
                     profiler::format_bytes(static_cast<double>(memory_.scores)) +
                     (memory_.packed_weights > 0
                          ? ", packed weight copies up to " + profiler::format_bytes(static_cast<double>(memory_.packed_weights))
                          : std::string()) +
                     (memory_.kv_cache > 0 ? ", KV cache " + profiler::format_bytes(static_cast<double>(memory_.kv_cache))
                                           : std::string()) +
                     ") but " + ctx.device().str() + " has only " +
                     profiler::format_bytes(static_cast<double>(available)) + " available" + advice +
                     (decode
                          ? "reduce decode.batch, the prompts, new_tokens or decode.kv_cache.max_len (or the model size)"
                          : "reduce input.batch / input.seq_len (or the model size)"));
  }

  runner_->allocate(ctx, all);
  if (!config.input.file.empty()) load_input(runner_->mutable_input(), config.input.file);
}

void Workload::set_paths(const PathConfig& paths) {
  runner_->prepare(ctx_, paths);
  paths_ = paths;
}

std::vector<std::pair<std::string, Tensor>> Workload::dump_tensors() const {
  std::vector<std::pair<std::string, Tensor>> tensors = runner_->named();
  tensors.emplace_back("output", runner_->output());
  return tensors;
}

void Workload::reset_fp8_saturation() {
  for (auto& [name, counts] : runner_->fp8_saturation()) from_floats(counts, {0.0f, 0.0f, 0.0f});
}

std::map<std::string, std::string> Workload::dump_metadata() const {
  const ModelConfig& m = config_.model;
  nlohmann::json meta;
  meta["workload"] = workload_kind_name(config_.kind);
  meta["family"] = family_name(m.family);
  meta["d_model"] = m.d_model;
  meta["n_heads"] = m.n_heads;
  meta["n_kv_heads"] = m.n_kv_heads;
  meta["head_dim"] = m.head_dim;
  meta["d_ff"] = m.d_ff;
  // Layers actually run (a block runs one, whatever the model's depth).
  meta["n_layers"] = layers_run(config_);
  meta["norm_eps"] = m.norm_eps;
  meta["rope_theta"] = m.rope_theta;
  meta["norm"] = norm_name(m.norm);
  meta["activation"] = ops::activation_name(m.activation);
  meta["gated"] = m.gated;
  meta["bias"] = m.bias;
  meta["rope"] = m.rope;
  meta["causal"] = m.causal;
  meta["dtype"] = dtype_name(config_.dtype);
  meta["batch"] = config_.input.batch;
  meta["seq_len"] = config_.input.seq_len;
  meta["paths"] = paths_str(paths_);
  if (config_.precision.fp8()) {
    const PrecisionConfig& p = config_.precision;
    meta["precision"] = {{"gemm", dtype_name(p.gemm)}, {"recipe", fp8_recipe_name(p.recipe)},
                         {"amax_history", p.amax_history}, {"amax_algo", ops::amax_algo_name(p.amax_algo)},
                         {"margin", p.margin}, {"fast_accum", p.fast_accum}};
  }
  if (config_.precision.weight_only()) {
    meta["precision"] = {{"weights", dtype_name(config_.precision.weights)}, {"scales", "one per output row"}};
  }
  if (config_.kind == WorkloadKind::decode) {
    meta["prompt_lens"] = config_.decode.prompt_lens;
    meta["new_tokens"] = config_.decode.new_tokens;
    meta["kv_cache"] = {{"layout", ops::kv_layout_name(config_.decode.kv_cache.layout)},
                        {"page_size", config_.decode.kv_cache.page_size},
                        {"max_len", config_.decode.kv_cache.max_len}};
  }
  if (!is_block_workload(config_.kind)) {
    meta["m"] = config_.shape.m;
    meta["n"] = config_.shape.n;
    meta["k"] = config_.shape.k;
  }
  return {{"blockscope", meta.dump()}};
}

}  // namespace blockscope
