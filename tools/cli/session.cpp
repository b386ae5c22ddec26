#include "tools/cli/session.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "model/safetensors.h"
#include "model/tensor_parallel.h"
#include "profiler/table.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "tools/cli/rank_agreement.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#endif

namespace blockscope::cli {

profiler::Format Session::format() const {
  profiler::Format format;
  if (!profiler::parse_format(options.format, &format)) {
    throw InputError("--format '" + options.format + "': expected table, csv or json");
  }
  return format;
}

WorkloadConfig Session::load_config() const {
  // The table flags are the profile keys they override, validated the same way.
  std::vector<std::string> sets = options.sets;
  // Checked here so the message names the flag the user typed, not the key it sets.
  if (!options.sort_by.empty() && profiler::sort_key_aliases().count(options.sort_by) == 0) {
    std::string known;
    for (const auto& [key, column] : profiler::sort_key_aliases()) known += (known.empty() ? "" : ", ") + key;
    throw InputError("--sort-by '" + options.sort_by + "': unknown sort column (expected one of " + known + ")");
  }
  if (!options.sort_by.empty()) sets.push_back("profile.sort_by=" + options.sort_by);
  if (options.row_limit >= 0) sets.push_back("profile.row_limit=" + std::to_string(options.row_limit));
  if (options.group_by_shape) sets.push_back("profile.group_by_shape=true");
  WorkloadConfig config = !options.config_text.empty() ? load_config_text(options.config_text, options.config_source, sets)
                          : options.config_path.empty() ? load_default_config(sets)
                                                        : load_config_file(options.config_path, sets);
  if (!options.device.empty()) {
    Device device;
    if (options.device != "auto" && !parse_device(options.device, &device)) {
      throw InputError("--device '" + options.device + "': expected auto, cpu, cuda or cuda:N");
    }
    config.device = options.device;
  }
  if (!options.dtype.empty() && (!parse_dtype(options.dtype, &config.dtype) || is_fp8(config.dtype))) {
    throw InputError("--dtype '" + options.dtype + "': expected f32, f16 or bf16" +
                     (is_fp8(config.dtype) ? " (FP8 is a storage type: docs/FP8.md)" : ""));
  }
  agree_across_ranks(*this, config);  // mpirun: the ranks compare their work before doing any
  if (rank != 0) config.profile.trace.clear();  // rank 0 writes the outputs (tensor parallelism)
  return config;
}

void Session::check_outputs(const WorkloadConfig& config, bool per_variant) const {
  const std::string trace = options.trace.empty() ? (per_variant ? config.profile.trace : "") : options.trace;
  std::vector<std::pair<std::string, std::string>> outputs = {
      {"--dump", rank == 0 ? options.dump : ""},  // every rank runs the dump's forward; rank 0 writes it
      {options.trace.empty() ? "profile.trace" : "--trace", trace},
      {"--save", options.save},
      {"--report", options.report}};
  // One trace holds every variant; --save writes a profile per variant.
  if (per_variant) {
    std::vector<std::pair<std::string, std::string>> saved = {{"the profile", options.save}};
    for (const Variant& variant : config.compare) {
      if (!options.save.empty()) {
        saved.push_back({"the profile of variant " + variant.label, variant_path(options.save, variant.label)});
        outputs.push_back(saved.back());
      }
    }
    // Tensor parallelism: rank 0 saves every other rank's profile beside each one (PATH.rankN.json),
    // and writes every other rank's trace beside rank 0's the same way.
    if (!options.save.empty()) {
      for (const auto& [what, path] : saved)
        for (int64_t r = 1; r < config.parallel.tensor; ++r)
          outputs.push_back({what + " of rank " + std::to_string(r), rank_path(path, r)});
    }
    if (!trace.empty()) {
      for (int64_t r = 1; r < config.parallel.tensor; ++r)
        outputs.push_back({"the trace of rank " + std::to_string(r), rank_path(trace, r)});
    }
  }
  blockscope::check_outputs(outputs, {{"config", options.config_path},
                                         {"input.file", config.input.file},
                                         {"weights.file", config.weights.file},
                                         {"weights.config", config.weights.config}},
                             options.force);
}

void Session::apply_run_settings(Context& ctx, const WorkloadConfig& config) const {
  ctx.set_sync_after_each_op(options.sync_each_op);
  ctx.set_check_finite_after_each_op(config.run.check_finite);
  // Process-wide, like the thread count.
  cpu::set_gemm_choice(config.cpu.gemm);
#ifdef BLOCKSCOPE_WITH_CUDA
  if (ctx.device().is_cuda()) ops::cuda::cublaslt::settings(ctx).allow_tf32 = config.run.allow_tf32;
#endif
}

std::vector<std::string> Session::remove_outputs() {
  std::vector<std::string> removed;
  for (const std::string& path : outputs_) {
    // Only files this command made: never a device such as /dev/null, nor a symlink.
    std::error_code error;
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path, error)) && std::remove(path.c_str()) == 0) {
      removed.push_back(path);
    }
  }
  outputs_.clear();
  return removed;
}

void Session::write_dump(Context& ctx, Workload& workload, const std::string& path, bool writes) {
  workload.set_paths(workload.config().paths);
  workload.forward();
  ctx.synchronize();
  if (!writes) return;
  write_safetensors(path, workload.dump_tensors(), workload.dump_metadata());
  wrote(path);
  std::cerr << "wrote " << path << " (input, output and " << workload.inputs_and_weights().size() - 1
            << " weights under their Hugging Face names)\n";
}

RankOutput::RankOutput(const Communicator* group) : reports(group == nullptr || group->rank() == 0) {}

std::string distributed_backend(const Communicator* group) {
  if (group == nullptr || group->size() <= 1) return "none";
  const std::string engine = group->engine();  // "NCCL 2.28.9 over MPI (...)", "MPI (Open MPI v4.1.4)"
  if (engine.rfind("NCCL", 0) == 0) return "nccl";
  if (engine.rfind("MPI", 0) == 0) return "mpi";
  std::string first_word = engine.substr(0, engine.find(' '));
  std::transform(first_word.begin(), first_word.end(), first_word.begin(), [](unsigned char c) { return std::tolower(c); });
  return first_word;
}

profiler::Schedule config_schedule(const WorkloadConfig& config) {
  profiler::Schedule schedule;
  schedule.wait = config.profile.wait;
  schedule.warmup = config.profile.warmup;
  schedule.active = config.profile.active;
  return schedule;
}

void announce_large_workload(const std::string& command, const WorkloadConfig& config) {
  constexpr size_t kLarge = size_t{256} << 20;
  const MemoryEstimate estimate = estimate_memory(config, all_variant_paths(config));
  if (estimate.weights < kLarge) return;
  std::cerr << command << ": building the workload: " << profiler::format_bytes(static_cast<double>(estimate.weights))
            << " of weights" << (config.weights.file.empty() ? " to initialise" : " to read") << ", "
            << profiler::format_bytes(static_cast<double>(estimate.total())) << " in all\n";
}

void for_each_local_rank(const WorkloadConfig& config, const Device& device,
                         const std::function<void(Context&, Communicator*)>& rank) {
  const int ranks = static_cast<int>(config.parallel.tensor);
  if (device.is_cuda() && ranks_are_local_gpus(config)) {
    BS_CHECK_INPUT(device == Device::cuda(0), "parallel.tensor = ", ranks, " on ", device.str(),
                   ": a GPU group is cuda:0 .. cuda:", ranks - 1,
                   " (--device cuda), or run one process per rank: mpirun -np ", ranks, " blockscope ...");
    run_on_gpus(ranks, [&](Context& ctx, Communicator& comm) { rank(ctx, &comm); });
    return;
  }
  Communicator* group = ranks > 1 ? &tensor_parallel_group(ranks) : nullptr;
  Context ctx(group != nullptr ? rank_device(device, *group) : device);  // mpirun: each rank its GPU
  const std::unique_ptr<Communicator> gpus = group != nullptr ? gpu_group_over(*group, ctx.device()) : nullptr;
  rank(ctx, gpus != nullptr ? gpus.get() : group);
}

bool ranks_are_local_gpus(const WorkloadConfig& config) {
  return config.parallel.tensor > 1 && world_communicator() == nullptr;
}

std::vector<PathConfig> all_variant_paths(const WorkloadConfig& config) {
  std::vector<PathConfig> paths{config.paths};
  for (const Variant& variant : config.compare) paths.push_back(variant.paths);
  return paths;
}

std::string workload_title(const WorkloadConfig& config, const Context& ctx) {
  std::ostringstream out;
  out << (config.name.empty() ? config.source : config.name) << ": " << workload_kind_name(config.kind);
  if (is_block_workload(config.kind)) {
    const ModelConfig& m = config.model;
    out << " " << family_name(m.family) << " d_model=" << m.d_model << " heads=" << m.n_heads << "/"
        << m.n_kv_heads << " head_dim=" << m.head_dim << " d_ff=" << m.d_ff;
    if (config.kind != WorkloadKind::block) out << " layers=" << m.n_layers;
  }
  const WorkloadSizes sizes = workload_traits(config.kind).sizes;
  if (sizes == WorkloadSizes::decode) {
    const DecodeConfig& d = config.decode;
    out << " batch=" << d.batch();
    if (d.ragged()) {
      out << " prompt_lens=[";
      for (size_t i = 0; i < d.prompt_lens.size(); ++i) out << (i ? "," : "") << d.prompt_lens[i];
      out << "]";
    } else {
      out << " prompt_len=" << d.prompt_lens.front();
    }
    out << " new_tokens=" << d.new_tokens << " kv_cache=" << ops::kv_layout_name(d.kv_cache.layout);
    if (d.kv_cache.layout == ops::KvLayout::paged) out << "/" << d.kv_cache.page_size;
    out << " max_len=" << d.kv_cache.max_len;
  } else if (sizes != WorkloadSizes::model_and_input) {
    out << " m=" << config.shape.m << " n=" << config.shape.n;
    if (sizes == WorkloadSizes::gemm_shape) out << " k=" << config.shape.k;
  } else {
    out << " batch=" << config.input.batch << " seq_len=" << config.input.seq_len;
  }
  out << " " << dtype_name(config.dtype);
  if (config.precision.fp8())
    out << " (GEMM " << dtype_name(config.precision.gemm) << ", " << fp8_recipe_name(config.precision.recipe)
        << " scaling)";
  if (config.precision.weight_only())
    out << " (weights " << dtype_name(config.precision.weights) << ", one scale per output row)";
  out << " on " << ctx.device().str();
  if (config.parallel.tensor > 1)
    out << ", tensor parallel over " << config.parallel.tensor << " ranks"
        << (config.parallel.sequence_parallel ? " with sequence parallelism" : "") << " (per rank)";
  return out.str();
}

namespace {

// "attention=naive,mlp=fused" -> "attention-naive_mlp-fused" (file-name safe).
std::string file_safe(const std::string& label) {
  std::string out;
  for (char c : label) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : (c == '=' ? '-' : '_');
  return out;
}

}  // namespace

std::string rank_path(const std::string& path, int64_t rank) {
  return rank == 0 ? path : variant_path(path, "rank" + std::to_string(rank));
}

std::string variant_path(const std::string& path, const std::string& label) {
  const size_t dot = path.find_last_of('.');
  const size_t slash = path.find_last_of('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_ext ? path.substr(0, dot) : path;
  const std::string ext = has_ext ? path.substr(dot) : std::string();
  return stem + "." + file_safe(label) + ext;
}

}  // namespace blockscope::cli
