// The sections of a workload config other than model (model/config_model.cpp): device, weights,
// input, shape, run, profile, paths and compare, and the size check over all of them.
#include <cstdio>
#include <fstream>
#include <map>

#include "model/config_reader.h"
#include "ops/decode_attention/decode_attention.h"
#include "profiler/table.h"
#include "runtime/context.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::config_reader {
namespace {

// No tensor a workload makes may hold more than 2^50 elements (a petabyte and more: no device
// has it), so every size product below stays far inside int64 and the memory estimate, and an
// impossible size is refused here, naming its keys, instead of wrapping or exhausting memory.
constexpr long double kMaxTensorElements = 1125899906842624.0L;  // 2^50

struct SizeProduct {
  const char* keys;  // "input.batch x input.seq_len x model.d_model"
  long double elements;
};

std::string format_elements(long double elements) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3Lg", elements);
  return text;
}

}  // namespace

const std::vector<std::string>& path_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> names;
    for (ops::PathOp op : ops::path_ops()) names.push_back(ops::path_op_name(op));
    return names;
  }();
  return keys;
}

std::string read_device(const Section& top) {
  const std::string text = top.get_string("device", "auto");
  Device device;
  if (text != "auto" && !parse_device(text, &device)) {
    top.fail("device", "unknown device '" + text + "' (expected auto, cpu, cuda or cuda:N)");
  }
  return text;
}

WeightsConfig read_weights(const Reader& reader, const Section& top, WorkloadKind kind) {
  Section section(reader, top.value("weights"), "weights", {"init", "file", "layer", "config"});
  WeightsConfig weights;
  weights.file = section.get_string("file", "");
  weights.config = section.get_string("config", "");
  const std::string fallback = weights.file.empty() ? "random" : "file";
  const std::string init =
      section.get_choice("init", fallback, {"random", "perturbed", "scaled", "file"}, "weight init");
  weights.init = init == "file"        ? WeightInit::file
                 : init == "perturbed" ? WeightInit::perturbed
                 : init == "scaled"    ? WeightInit::scaled
                                       : WeightInit::random;
  weights.layer = section.get_int("layer", 0, 0);
  if (weights.init == WeightInit::file && weights.file.empty()) {
    section.fail("file", "init: file needs weights.file (a safetensors file with Hugging Face names)");
  }
  // Checked, not opened: opening a FIFO would block until something writes to it.
  if (const std::string problem = weights.init == WeightInit::file ? input_file_problem(weights.file) : "";
      !problem.empty()) {
    section.fail("file", "cannot read '" + weights.file + "': " + problem + " (relative paths are from the current directory)");
  }
  if (weights.init != WeightInit::file && section.has("layer")) {
    section.fail("layer", std::string("picks the first layer taken from weights.file, but init is ") +
                              weight_init_name(weights.init) + " (use init: file, or remove layer)");
  }
  if (weights.init != WeightInit::file && !weights.file.empty()) {
    section.fail("init", std::string("is ") + weight_init_name(weights.init) +
                             " but weights.file is set (use init: file, or remove file)");
  }
  if (!is_block_workload(kind)) {
    section.reject("file", std::string("weights from a file apply to block and stack workloads, not ") +
                               workload_kind_name(kind));
    section.reject("config", std::string("a Hugging Face config applies to block and stack workloads, not ") +
                                 workload_kind_name(kind));
    section.reject("layer", std::string("applies to block and stack workloads, not ") + workload_kind_name(kind));
  }
  return weights;
}

void read_input(const Reader& reader, const Section& top, WorkloadConfig& config) {
  const WorkloadSizes sizes = workload_traits(config.kind).sizes;
  if (sizes == WorkloadSizes::decode) {
    top.reject("input", "does not apply to workload decode (its sizes are decode: {batch, prompt_len or prompt_lens, "
                        "new_tokens}; its inputs are seeded)");
    return;
  }
  if (sizes != WorkloadSizes::model_and_input) {
    top.reject("input", std::string("does not apply to workload ") + workload_kind_name(config.kind) +
                            " (its sizes are shape: {m, n" + (sizes == WorkloadSizes::gemm_shape ? ", k" : "") + "})");
    return;
  }
  top.require("input", "batch and seq_len");
  Section s(reader, top.value("input"), "input", {"batch", "seq_len", "file"});
  s.require("batch");
  s.require("seq_len");
  config.input.batch = s.get_int("batch", 0, 1);
  config.input.seq_len = s.get_int("seq_len", 0, 1);
  config.input.file = s.get_string("file", "");
  if (config.kind == WorkloadKind::attention) s.reject("file", "attention takes seeded q, k, v only");
  if (const std::string problem = config.input.file.empty() ? "" : input_file_problem(config.input.file);
      !problem.empty()) {
    s.fail("file", "cannot read '" + config.input.file + "': " + problem + " (relative paths are from the current directory)");
  }
}

void read_shape(const Reader& reader, const Section& top, WorkloadConfig& config) {
  const WorkloadSizes sizes = workload_traits(config.kind).sizes;
  const bool gemm = sizes == WorkloadSizes::gemm_shape;
  if (sizes == WorkloadSizes::model_and_input || sizes == WorkloadSizes::decode) {
    top.reject("shape", std::string("does not apply to workload ") + workload_kind_name(config.kind) +
                            (sizes == WorkloadSizes::decode ? " (its sizes come from model and decode)"
                                                            : " (its sizes come from model and input)"));
    return;
  }
  top.require("shape", gemm ? "m, n, k" : "m rows of n");
  Section s(reader, top.value("shape"), "shape", {"m", "n", "k"});
  s.require("m");
  s.require("n");
  config.shape.m = s.get_int("m", 0, 1);
  config.shape.n = s.get_int("n", 0, 1);
  if (gemm) {
    s.require("k");
    config.shape.k = s.get_int("k", 0, 1);
  } else {
    s.reject("k", std::string(workload_kind_name(config.kind)) + " takes shape: {m, n} (m rows of n)");
  }
}

void read_decode(const Reader& reader, const Section& top, WorkloadConfig& config) {
  if (workload_traits(config.kind).sizes != WorkloadSizes::decode) {
    top.reject("decode", std::string("applies only to workload: decode, not ") + workload_kind_name(config.kind));
    return;
  }
  top.require("decode", "batch, prompt_len (or prompt_lens) and new_tokens");
  Section s(reader, top.value("decode"), "decode", {"batch", "prompt_len", "prompt_lens", "new_tokens", "kv_cache", "cuda_graph"});
  DecodeConfig& decode = config.decode;
  if (s.has("prompt_lens")) {
    s.reject("prompt_len", "give prompt_len (every sequence) or prompt_lens (one per sequence), not both");
    const YAML::Node list = s.value("prompt_lens");
    if (!list.IsSequence() || list.size() == 0) {
      s.fail("prompt_lens", "expected a non-empty list of prompt lengths, e.g. [512, 77, 1024], got " + describe_node(list));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = s.key_path("prompt_lens") + "[" + std::to_string(i) + "]";
      const YAML::Node item = list[i];
      char* end = nullptr;
      const std::string text = item.IsScalar() ? item.Scalar() : "";
      const long long value = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || end != text.c_str() + text.size() || value < 1 || value > (1 << 24)) {
        reader.fail(item, path, "expected a prompt length from 1 to 16777216, got " +
                                    (item.IsScalar() ? "'" + text + "'" : describe_node(item)));
      }
      decode.prompt_lens.push_back(value);
    }
    if (s.has("batch") && s.get_int("batch", 0, 1) != decode.batch()) {
      s.fail("batch", "is " + std::to_string(s.get_int("batch", 0, 1)) + " but prompt_lens lists " +
                          std::to_string(decode.batch()) + " prompts (one per sequence); drop batch or make them agree");
    }
  } else {
    s.require("prompt_len", "the prompt's tokens, prefilled into the cache; or prompt_lens: [...] for a ragged batch");
    const int64_t batch = s.get_int("batch", 1, 1, 4096);
    const int64_t prompt = s.get_int("prompt_len", 0, 1, 1 << 24);
    decode.prompt_lens.assign(static_cast<size_t>(batch), prompt);
  }
  s.require("new_tokens", "decode steps, one token per sequence each");
  decode.new_tokens = s.get_int("new_tokens", 0, 1, 1 << 20);
  decode.cuda_graph = s.get_bool("cuda_graph", false);
  const int64_t needed = decode.longest_prompt() + decode.new_tokens;

  Section cache(reader, s.value("kv_cache"), "decode.kv_cache", {"layout", "page_size", "max_len"});
  KvCacheConfig& kv = decode.kv_cache;
  ops::parse_kv_layout(cache.get_choice("layout", ops::kv_layout_name(ops::KvLayout::contiguous), ops::kv_layout_names(),
                                       "KV cache layout"), &kv.layout);
  kv.page_size = cache.get_int("page_size", 16, 1, 1 << 16);
  if ((kv.page_size & (kv.page_size - 1)) != 0) {
    cache.fail("page_size", "must be a power of two (positions per page), got " + std::to_string(kv.page_size));
  }
  // A contiguous cache is one page of max_len positions per sequence: a page_size would be
  // validated and then ignored, so it is refused.
  if (kv.layout == ops::KvLayout::contiguous && cache.has("page_size")) {
    cache.fail("page_size", "applies to the paged layout only (a contiguous cache is one page of max_len positions "
                            "per sequence): remove it or set decode.kv_cache.layout: paged");
  }
  kv.max_len_given = cache.has("max_len");
  kv.max_len = cache.get_int("max_len", 0, 1, 1 << 25);
  if (kv.max_len == 0) kv.max_len = needed;
  if (kv.max_len < needed) {
    cache.fail("max_len", "is " + std::to_string(kv.max_len) + " positions but the longest prompt (" +
                              std::to_string(decode.longest_prompt()) + ") and new_tokens (" +
                              std::to_string(decode.new_tokens) + ") need " + std::to_string(needed));
  }
  if (!config.model.causal) {
    reader.fail(top.node_for("model"), "model.causal",
                "decode attends over a KV cache of earlier positions, which is causal: set causal: true");
  }
  config.input.batch = decode.batch();
  config.input.seq_len = decode.longest_prompt();
}

void read_parallel(const Reader& reader, const Section& top, WorkloadConfig& config) {
  Section s(reader, top.value("parallel"), "parallel", {"tensor", "sequence_parallel"});
  config.parallel.tensor = s.get_int("tensor", 1, 1, 1024);
  config.parallel.sequence_parallel = s.get_bool("sequence_parallel", false);
  const int64_t n = config.parallel.tensor;
  if (n == 1) {
    if (config.parallel.sequence_parallel)
      s.fail("sequence_parallel", "splits the tokens over the ranks of tensor parallelism: set parallel.tensor > 1");
    return;
  }
  if (config.kind != WorkloadKind::block && config.kind != WorkloadKind::stack) {
    s.fail("tensor", std::string("tensor parallelism splits blocks and stacks; workload ") +
                         workload_kind_name(config.kind) + " runs on one rank (parallel.tensor: 1)");
  }
  // Each rank holds whole heads (and whole kv heads) and an equal share of d_ff.
  const ModelConfig& m = config.model;
  const std::pair<const char*, int64_t> divided[] = {
      {"model.n_heads", m.n_heads}, {"model.n_kv_heads", m.n_kv_heads}, {"model.d_ff", m.d_ff}};
  for (const auto& [key, value] : divided) {
    if (value % n != 0) {
      s.fail("tensor", std::to_string(n) + " ranks do not divide " + key + " = " + std::to_string(value) +
                           " (each rank holds 1/" + std::to_string(n) + " of the heads, the kv heads and d_ff)");
    }
  }
  const int64_t tokens = config.input.batch * config.input.seq_len;
  if (config.parallel.sequence_parallel && tokens % n != 0) {
    s.fail("sequence_parallel", std::to_string(n) + " ranks do not divide the " + std::to_string(tokens) +
                                    " tokens (input.batch x input.seq_len): each rank holds an equal block of them");
  }
}

// FP8 GEMMs (either form) have one path: the FP8 kernels with their epilogues (the config's
// default linear and MLP paths). A block's attention keeps its paths (it runs in the run's dtype).
void require_one_gemm_path(const Section& s, const WorkloadConfig& config, const char* key, const char* gemms) {
  for (ops::PathOp op : path_ops_for(config.kind)) {
    if (!config.precision.fixes_path(op)) continue;
    const std::string path = config.paths.name(op);
    const std::string want = op == ops::PathOp::linear ? "epilogue" : (config.model.gated ? "fused" : "epilogue");
    if (path != want) {
      s.fail(key, std::string(gemms) + " have one path; paths." + ops::path_op_name(op) + " is " + path +
                      ": leave it at " + want);
    }
  }
}

// precision.weights FP8 (weight-only): the other keys belong to FP8 GEMMs; the workloads whose
// GEMMs are block linears.
void read_weight_only(const Section& s, const WorkloadConfig& config) {
  if (config.precision.fp8()) {
    s.fail("weights", "and precision.gemm are two forms of FP8 weights (weight-only, or FP8 GEMMs); choose one");
  }
  for (const char* key : {"recipe", "amax_history", "amax_algo", "margin", "fast_accum"})
    if (s.has(key)) s.fail(key, "applies to FP8 GEMMs (precision.gemm); weight-only FP8 scales each weight row once");
  const bool block = config.kind == WorkloadKind::block || config.kind == WorkloadKind::stack ||
                     config.kind == WorkloadKind::decode;
  if (!block) {
    s.fail("weights", std::string("weight-only FP8 runs in block, stack and decode workloads so far; workload ") +
                          workload_kind_name(config.kind) + " keeps its weights in its dtype");
  }
  if (config.parallel.tensor > 1) {
    s.fail("weights",
           "weight-only FP8 runs on one rank so far; parallel.tensor is " + std::to_string(config.parallel.tensor));
  }
  require_one_gemm_path(s, config, "weights", "the weight-only FP8 GEMMs");
}

void read_precision(const Reader& reader, const Section& top, WorkloadConfig& config) {
  if (!top.has("precision")) return;
  Section s(reader, top.value("precision"), "precision",
            {"gemm", "weights", "recipe", "amax_history", "amax_algo", "margin", "fast_accum"});
  PrecisionConfig& p = config.precision;
  const std::string gemm = s.get_choice("gemm", dtype_name(config.dtype),
                                        {dtype_name(config.dtype), dtype_name(DType::fp8_e4m3)}, "GEMM dtype");
  p.gemm = gemm == dtype_name(DType::fp8_e4m3) ? DType::fp8_e4m3 : config.dtype;
  const std::string weights =
      s.get_choice("weights", dtype_name(config.dtype),
                   {dtype_name(config.dtype), dtype_name(DType::fp8_e4m3), dtype_name(DType::fp8_e5m2)}, "weight dtype");
  p.weights = config.dtype;
  if (weights != dtype_name(config.dtype)) parse_dtype(weights, &p.weights);
  if (p.weight_only()) {
    read_weight_only(s, config);
    return;
  }
  p.recipe = s.get_choice("recipe", "current", {"current", "delayed"}, "recipe") == "current" ? Fp8Recipe::current
                                                                                           : Fp8Recipe::delayed;
  p.amax_history = s.get_int("amax_history", 16, 1, ops::kMaxAmaxHistory);
  ops::parse_amax_algo(s.get_choice("amax_algo", "max", {"max", "most_recent"}, "amax algorithm"), &p.amax_algo);
  p.margin = static_cast<int>(s.get_int("margin", 0, 0, 64));
  p.fast_accum = s.get_bool("fast_accum", false);
  if (!p.fp8()) {
    for (const char* key : {"recipe", "amax_history", "amax_algo", "margin", "fast_accum"})
      if (s.has(key)) s.fail(key, "applies to FP8 GEMMs: set precision.gemm: fp8_e4m3");
    return;
  }
  const bool block = config.kind == WorkloadKind::block || config.kind == WorkloadKind::stack;
  if (config.kind != WorkloadKind::linear && config.kind != WorkloadKind::mlp && !block) {
    s.fail("gemm", std::string("FP8 GEMMs run in linear, mlp, block and stack workloads so far; workload ") +
                       workload_kind_name(config.kind) + " computes in its dtype");
  }
  if (config.parallel.tensor > 1) {
    s.fail("gemm", "FP8 blocks run on one rank so far; parallel.tensor is " + std::to_string(config.parallel.tensor));
  }
  if (config.dtype != DType::bf16 && config.dtype != DType::f16) {
    s.fail("gemm", std::string("the FP8 GEMM writes bf16 or f16 here; the workload's dtype is ") +
                       dtype_name(config.dtype) + " (set dtype: bf16)");
  }
  // Every GEMM's K and N (cuBLASLt's FP8 rule: 16-byte rows), by the key that sets it.
  const ModelConfig& m = config.model;
  std::vector<std::pair<std::string, int64_t>> sizes;
  if (config.kind == WorkloadKind::linear) {
    sizes = {{"shape.k", config.shape.k}, {"shape.n", config.shape.n}};
  } else {
    sizes = {{"model.d_model", m.d_model}, {"model.d_ff", m.d_ff}};
    if (block) sizes.push_back({"model.n_kv_heads x model.head_dim", m.n_kv_heads * m.head_dim});
    if (block) sizes.push_back({"model.n_heads x model.head_dim", m.n_heads * m.head_dim});
  }
  for (const auto& [key, value] : sizes) {
    if (value % 16 != 0) {
      s.fail("gemm", "cuBLASLt's FP8 GEMMs take K and N in multiples of 16; " + key + " is " + std::to_string(value));
    }
  }
  require_one_gemm_path(s, config, "gemm", "the FP8 GEMMs");
  if (p.recipe == Fp8Recipe::current) {
    for (const char* key : {"amax_history", "amax_algo"})
      if (s.has(key)) s.fail(key, "applies to the delayed recipe (current scaling uses this step's amax)");
  }
}

void read_run(const Reader& reader, const Section& top, WorkloadConfig& config) {
  Section s(reader, top.value("run"), "run", {"warmup", "iters", "cuda_graph", "allow_tf32", "check_finite"});
  config.run.warmup = static_cast<int>(s.get_int("warmup", 3, 0));
  config.run.iters = static_cast<int>(s.get_int("iters", 10, 1));
  config.run.cuda_graph = s.get_bool("cuda_graph", false);
  if (config.run.cuda_graph && config.decode.cuda_graph) {
    s.fail("cuda_graph", "and decode.cuda_graph are both on: run.cuda_graph captures the whole generation, "
                         "decode.cuda_graph one step replayed per token; choose one");
  }
  config.run.allow_tf32 = s.get_bool("allow_tf32", false);
  config.run.check_finite = s.get_bool("check_finite", false);
}

void read_cpu(const Reader& reader, const Section& top, WorkloadConfig& config) {
  Section s(reader, top.value("cpu"), "cpu", {"gemm"});
  std::vector<std::string> gemms = {"auto"};  // and the libraries this build links
  for (cpu::GemmLibrary library : cpu::linked_gemm_libraries()) gemms.push_back(cpu::gemm_library_name(library));
  config.cpu.gemm = s.get_choice("gemm", "auto", gemms, "GEMM library");
}

void read_profile(const Reader& reader, const Section& top, WorkloadConfig& config) {
  Section s(reader, top.value("profile"), "profile", {"schedule", "sort_by", "row_limit", "group_by_shape", "trace", "memory"});
  Section schedule(reader, s.value("schedule"), "profile.schedule", {"wait", "warmup", "active"});
  config.profile.wait = static_cast<int>(schedule.get_int("wait", 1, 0));
  config.profile.warmup = static_cast<int>(schedule.get_int("warmup", 1, 0));
  // Five kept steps by default: enough for a median and a spread (tables report both).
  config.profile.active = static_cast<int>(schedule.get_int("active", 5, 1));
  // The op table's sort keys and their aliases (torch.profiler's names): profiler/table.h.
  const std::map<std::string, std::string>& sort_keys = profiler::sort_key_aliases();
  std::vector<std::string> names;
  for (const auto& entry : sort_keys) names.push_back(entry.first);
  config.profile.sort_by = sort_keys.at(s.get_choice("sort_by", "self_device", names, "sort column"));
  config.profile.row_limit = static_cast<int>(s.get_int("row_limit", 20, 0));
  config.profile.group_by_shape = s.get_bool("group_by_shape", false);
  config.profile.trace = s.get_string("trace", "");
  config.profile.memory = s.get_bool("memory", true);
}

PathConfig read_paths(const Section& section, WorkloadKind kind, PathConfig base, std::vector<ops::PathOp>* set_ops) {
  const std::vector<ops::PathOp> applicable = path_ops_for(kind);
  std::vector<std::string> applicable_keys;
  for (ops::PathOp op : applicable) applicable_keys.push_back(ops::path_op_name(op));
  for (ops::PathOp op : ops::path_ops()) {
    const std::string key = ops::path_op_name(op);
    if (std::find(applicable.begin(), applicable.end(), op) == applicable.end()) {
      section.reject(key, "a " + key + " path does not apply to workload " + workload_kind_name(kind) +
                              (applicable.empty() ? " (it has no paths)" : " (it takes: " + join_list(applicable_keys) + ")"));
      continue;
    }
    if (!section.has(key)) continue;
    base.set(op, section.get_choice(key, "", ops::path_names(op), key + " path"));
    if (set_ops) set_ops->push_back(op);
  }
  return base;
}

void check_mlp_path(const Section& section, const ModelConfig& model, const PathConfig& paths) {
  if (!section.has("mlp")) return;
  if (model.gated && paths.mlp == ops::MlpPath::epilogue) {
    section.fail("mlp", "epilogue applies to plain MLPs; this MLP is gated (use naive or fused)");
  }
  if (!model.gated && paths.mlp == ops::MlpPath::fused) {
    section.fail("mlp", "fused applies to gated MLPs (GeGLU, SwiGLU); this MLP is plain (use naive or epilogue)");
  }
}

void check_decode_path(const Section& section, WorkloadKind kind, const PathConfig& paths) {
  if (kind != WorkloadKind::decode || ops::has_decode_form(paths.attention)) return;
  section.fail("attention", std::string("the ") + ops::path_name(paths.attention) +
                                " attention path has no decode form; decode runs naive or flash");
}

void read_compare(const Reader& reader, const Section& top, WorkloadConfig& config) {
  const YAML::Node list = top.value("compare");
  if (!list.IsDefined() || list.IsNull()) return;
  if (!list.IsSequence()) {
    reader.fail(list, "compare", "expected a list of path overrides, e.g. [{attention: naive}], got " + describe_node(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "compare[" + std::to_string(i) + "]";
    const YAML::Node entry = list[i];
    if (!entry.IsMap() || entry.size() == 0) {
      reader.fail(entry, path, "expected a map of path overrides such as {attention: naive}, got " + describe_node(entry));
    }
    Section s(reader, entry, path, path_keys());
    Variant variant;
    std::vector<ops::PathOp> named;
    variant.paths = read_paths(s, config.kind, config.paths, &named);
    for (ops::PathOp op : ops::path_ops()) {
      if (config.precision.fixes_path(op) && paths_str(variant.paths, {op}) != paths_str(config.paths, {op})) {
        s.fail(ops::path_op_name(op), std::string(ops::path_op_name(op)) +
                                          " paths apply to 16- and 32-bit GEMMs; with precision.gemm " +
                                          dtype_name(config.precision.gemm) +
                                          " the GEMMs are FP8 ones (compare precisions with two profiles and "
                                          "blockscope diff)");
      }
    }
    if (is_block_workload(config.kind) || config.kind == WorkloadKind::mlp) check_mlp_path(s, config.model, variant.paths);
    check_decode_path(s, config.kind, variant.paths);
    variant.label = paths_str(variant.paths, named);
    // The same paths twice would be profiled twice and write one another's outputs.
    for (size_t j = 0; j < config.compare.size(); ++j) {
      if (paths_str(config.compare[j].paths) == paths_str(variant.paths)) {
        reader.fail(entry, path, "duplicates compare[" + std::to_string(j) + "] (" + variant.label + "): remove one");
      }
    }
    config.compare.push_back(variant);
  }
}

// The largest tensors of the workload, from its dims (long double: no product overflows).
void check_sizes(const Reader& reader, const YAML::Node& root, const WorkloadConfig& config) {
  using L = long double;
  const ModelConfig& m = config.model;
  const L B = L(config.input.batch), S = L(config.input.seq_len), d = L(m.d_model), f = L(m.d_ff);
  const L H = L(m.n_heads), Hkv = L(m.n_kv_heads), D = L(m.head_dim);
  const L M = L(config.shape.m), N = L(config.shape.n), K = L(config.shape.k);
  // The kind's largest tensors (returned, not assigned: GCC 12 warns on the assignment).
  const auto largest_tensors = [&]() -> std::vector<SizeProduct> {
    switch (config.kind) {
      case WorkloadKind::block:
      case WorkloadKind::stack:
        return {{"input.batch x input.seq_len x model.d_model", B * S * d},
                {"input.batch x input.seq_len x model.d_ff (x 2 for a fused gated MLP)", B * S * f * 2},
                {"input.batch x model.n_heads x input.seq_len x model.head_dim", B * H * S * D},
                {"input.batch x model.n_heads x input.seq_len^2 (the attention scores)", B * H * S * S},
                {"model.d_model x model.d_ff (x 2 for a fused gated MLP)", d * f * 2},
                {"model.n_layers x the weights of a layer", L(m.n_layers) * (d * f * 3 + d * (H + 2 * Hkv) * D * 2)}};
      case WorkloadKind::mlp:
        return {{"input.batch x input.seq_len x model.d_model", B * S * d},
                {"input.batch x input.seq_len x model.d_ff (x 2 for a fused gated MLP)", B * S * f * 2},
                {"model.d_model x model.d_ff (x 2 for a fused gated MLP)", d * f * 2}};
      case WorkloadKind::attention:
        return {{"input.batch x model.n_heads x input.seq_len x model.head_dim", B * H * S * D},
                {"input.batch x model.n_heads x input.seq_len^2 (the attention scores)", B * H * S * S}};
      case WorkloadKind::matmul_add:
      case WorkloadKind::linear:
        return {{"shape.m x shape.k", M * K}, {"shape.k x shape.n", K * N}, {"shape.m x shape.n", M * N}};
      case WorkloadKind::softmax: return {{"shape.m x shape.n", M * N}};
      case WorkloadKind::decode: {
        const L max_len = L(config.decode.kv_cache.max_len);
        return {{"decode.batch x decode.prompt_len x model.d_model x 3 (the prefill)", B * S * d * 3},
                {"decode.batch x model.n_heads x decode.prompt_len^2 (the prefill's attention scores)", B * H * S * S},
                {"decode.batch x model.n_kv_heads x decode.kv_cache.max_len x model.head_dim (a layer's cache)",
                 B * Hkv * max_len * D},
                {"model.d_model x model.d_ff (x 2 for a fused gated MLP)", d * f * 2}};
      }
    }
    return {};
  };
  const std::vector<SizeProduct> products = largest_tensors();
  for (const SizeProduct& product : products) {
    if (product.elements <= kMaxTensorElements) continue;
    // The section of the product's first key ("input.batch x ..." -> input) locates the error.
    const std::string keys = product.keys;
    const std::string section = keys.substr(0, keys.find('.'));
    reader.fail(root[section], section,
            "impossible size: " + std::string(product.keys) + " = " + format_elements(product.elements) +
                " elements, more than any device holds (at most 2^50 per tensor)");
  }
}

}  // namespace blockscope::config_reader
