#include "tools/cli/decode_summary.h"

#include <fmt/format.h>

#include "model/weights.h"
#include "model/workload.h"
#include "profiler/render.h"
#include "profiler/summary.h"

namespace blockscope::cli {

DecodeSummary decode_summary(const WorkloadConfig& config, const profiler::Profile& profile) {
  const ModelConfig& m = config.model;
  const DecodeConfig& d = config.decode;
  const double es = static_cast<double>(dtype_size(config.dtype)), layers = static_cast<double>(m.n_layers);
  DecodeSummary s;
  s.ttft_us = profiler::spread_of(profiler::region_times_us(profile, kPrefillRegion)).median;
  const std::vector<double> steps = profiler::region_times_us(profile, kDecodeStepRegion);
  const profiler::Spread tokens = profiler::spread_of(steps);
  s.token_us = tokens.median, s.token_min_us = tokens.min, s.token_max_us = tokens.max;
  s.token_samples = tokens.samples;
  // Steps are recorded in order, new_tokens per profiled step: the first and the last token
  // of each.
  std::vector<double> first, last;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i % static_cast<size_t>(d.new_tokens) == 0) first.push_back(steps[i]);
    if (i % static_cast<size_t>(d.new_tokens) == static_cast<size_t>(d.new_tokens - 1)) last.push_back(steps[i]);
  }
  s.first_token_us = profiler::spread_of(first).median;
  s.last_token_us = profiler::spread_of(last).median;
  if (s.token_us > 0) s.tokens_per_s = static_cast<double>(d.batch()) / (s.token_us * 1e-6);
  s.weight_bytes = layer_parameters(m) * layers * es;
  s.kv_bytes_per_token = 2.0 * static_cast<double>(m.n_kv_heads * m.head_dim) * es * layers;
  double rows = 0;
  for (int64_t t = 0; t < d.new_tokens; ++t) rows += static_cast<double>(d.attended(t));
  s.kv_read_bytes = rows / static_cast<double>(d.new_tokens) * s.kv_bytes_per_token;
  if (s.token_us > 0) s.step_gbps = (s.weight_bytes + s.kv_read_bytes) / (s.token_us * 1e3);
  const ops::KvCacheShape shape = decode_cache_shape(config);
  s.kv_allocated_bytes = shape.bytes(config.dtype) * layers;
  s.pages = shape.layout == ops::KvLayout::paged ? shape.pages() : 0;
  return s;
}

std::string decode_graph_note(const std::string& device) {
  if (device.rfind("cuda", 0) == 0) {
    return "Decode steps: each replayed from one CUDA graph captured on the first step (decode.cuda_graph), so the "
           "decode tables show one cuda_graph_launch per step instead of the step's kernels; profile without "
           "decode.cuda_graph for those, and `blockscope diff` the two for the launch overhead";
  }
  return "Note: decode.cuda_graph applies to CUDA devices; on " + device + " the decode steps ran eagerly";
}

std::string decode_summary_text(const WorkloadConfig& config, const profiler::Profile& profile) {
  const DecodeSummary s = decode_summary(config, profile);
  const DecodeConfig& d = config.decode;
  using profiler::format_bytes;
  using profiler::format_time_us;
  std::string out;
  out += fmt::format("Time to first token (the prefill of {} prompt{}, {} tokens padded): median {}\n", d.batch(),
                     d.batch() == 1 ? "" : "s", d.batch() * d.longest_prompt(), format_time_us(s.ttft_us));
  out += fmt::format("Per token (one decode step of {} sequence{}): median {} (min {}, max {}) over {} steps; "
                     "first step {}, last step {} (cache {} -> {} positions); {:.4g} tokens/s\n",
                     d.batch(), d.batch() == 1 ? "" : "s", format_time_us(s.token_us), format_time_us(s.token_min_us),
                     format_time_us(s.token_max_us), s.token_samples, format_time_us(s.first_token_us),
                     format_time_us(s.last_token_us), d.longest_prompt() + 1, d.longest_prompt() + d.new_tokens,
                     s.tokens_per_s);
  std::string bandwidth = fmt::format("Decode step traffic: weights {} + KV cache {} (mean) read once = {:.3g} GB/s at the "
                                      "median per-token time",
                                      format_bytes(s.weight_bytes), format_bytes(s.kv_read_bytes), s.step_gbps);
  if (profile.simulated) {
    bandwidth += " (simulated GPU: not a GPU's bandwidth)";
  } else if (profile.peaks.gbps > 0) {
    bandwidth += fmt::format(", {:.0f}% of the {:.3g} GB/s peak", 100.0 * s.step_gbps / profile.peaks.gbps,
                             profile.peaks.gbps);
  }
  out += bandwidth + "\n";
  out += fmt::format("KV cache: {} per token ({} layer{}), {} allocated ({})\n", format_bytes(s.kv_bytes_per_token),
                     config.model.n_layers, config.model.n_layers == 1 ? "" : "s", format_bytes(s.kv_allocated_bytes),
                     d.kv_cache.layout == ops::KvLayout::paged
                         ? fmt::format("paged: {} pages of {} positions per layer", s.pages, d.kv_cache.page_size)
                         : fmt::format("contiguous: {} positions per sequence", d.kv_cache.max_len));
  if (d.cuda_graph) out += decode_graph_note(profile.device) + "\n";
  return out;
}

nlohmann::json decode_summary_json(const WorkloadConfig& config, const profiler::Profile& profile) {
  const DecodeSummary s = decode_summary(config, profile);
  return {{"ttft_us", s.ttft_us},
          {"per_token_us", {{"median", s.token_us}, {"min", s.token_min_us}, {"max", s.token_max_us},
                            {"samples", s.token_samples}, {"first_step", s.first_token_us},
                            {"last_step", s.last_token_us}}},
          {"tokens_per_s", s.tokens_per_s},
          {"step_bytes", {{"weights", s.weight_bytes}, {"kv_cache_mean", s.kv_read_bytes}}},
          {"step_gbps", s.step_gbps},
          {"kv_cache", {{"bytes_per_token", s.kv_bytes_per_token}, {"allocated_bytes", s.kv_allocated_bytes},
                        {"layout", ops::kv_layout_name(config.decode.kv_cache.layout)}, {"pages_per_layer", s.pages}}}};
}

}  // namespace blockscope::cli
