// What a decode workload's profile adds under its phase tables: time to first token, the
// per-token time and its growth with the cache, tokens/s, the bytes a step must move (weights
// and the KV cache, read once) against the measured bandwidth, and the cache's memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"
#include "profiler/session.h"

namespace blockscope::cli {

struct DecodeSummary {
  double ttft_us = 0;               // the prefill's median over the kept steps
  double token_us = 0, token_min_us = 0, token_max_us = 0;  // one decode step, over every step kept
  int token_samples = 0;
  double first_token_us = 0, last_token_us = 0;  // medians of the first and the last decode step
  double tokens_per_s = 0;          // batch / per-token time
  double weight_bytes = 0;          // every layer's parameters, read once per step
  double kv_read_bytes = 0;         // the cache rows a step reads, averaged over the steps
  double step_gbps = 0;             // (weights + KV) / per-token time
  double kv_bytes_per_token = 0;    // one position of every layer's keys and values
  double kv_allocated_bytes = 0;
  int64_t pages = 0;                // paged: pages per layer
};

DecodeSummary decode_summary(const WorkloadConfig& config, const profiler::Profile& profile);
// Text lines for the profile's tables; the JSON object for --format json.
std::string decode_summary_text(const WorkloadConfig& config, const profiler::Profile& profile);
// What decode.cuda_graph did on `device` ("cuda:0": steps replayed from a graph; otherwise a
// note that it is a no-op there): the summary's last line, and `run`'s.
std::string decode_graph_note(const std::string& device);
nlohmann::json decode_summary_json(const WorkloadConfig& config, const profiler::Profile& profile);

}  // namespace blockscope::cli
