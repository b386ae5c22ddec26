// Reading a workload config: the schema (ConfigParser), --set overrides applied first
// (model/config_overrides.cpp), a Hugging Face config.json imported on request
// (model/config_hf.cpp), all through the YAML reader of model/config_reader.h.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "model/config.h"
#include "model/config_reader.h"
#include "profiler/table.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace blockscope {

using namespace config_reader;

namespace {

const std::vector<std::string> kTopKeys = {"name",    "workload", "device", "dtype", "seed", "model",  "input",
                                           "shape",   "weights",  "paths",  "run",   "profile", "compare"};
const std::vector<std::string> kModelKeys = {"family",   "d_model",    "n_heads", "n_kv_heads", "head_dim",
                                             "d_ff",     "n_layers",   "norm_eps", "rope_theta", "norm",
                                             "activation", "gated",    "bias",    "rope",       "causal"};
const std::vector<std::string> kPathKeys = [] {
  std::vector<std::string> keys;
  for (ops::PathOp op : ops::path_ops()) keys.push_back(ops::path_op_name(op));
  return keys;
}();
const std::vector<std::string> kWorkloads = {"block", "stack", "matmul_add", "linear", "mlp", "attention", "softmax"};
const std::vector<std::string> kActivations = {"gelu", "gelu_tanh", "silu", "relu"};

WorkloadKind parse_workload(const std::string& text) {
  const WorkloadKind kinds[] = {WorkloadKind::block,  WorkloadKind::stack,     WorkloadKind::matmul_add,
                                WorkloadKind::linear, WorkloadKind::mlp,       WorkloadKind::attention,
                                WorkloadKind::softmax};
  for (WorkloadKind kind : kinds)
    if (text == workload_kind_name(kind)) return kind;
  return WorkloadKind::block;
}

// Reads a paths map (the `paths:` section or one `compare:` entry) over `base`; `set_ops`
// gets the ops it names.
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

// No tensor a workload makes may hold more than 2^50 elements (a petabyte and more: no device
// has it), so every size product below stays far inside int64 and the memory estimate, and an
// impossible size is refused here, naming its keys, instead of wrapping or exhausting memory.
constexpr long double kMaxTensorElements = 1125899906842624.0L;  // 2^50

struct SizeProduct {
  const char* keys;  // "input.batch x input.seq_len x model.d_model"
  long double elements;
};

class ConfigParser {
 public:
  ConfigParser(Reader& reader, YAML::Node root) : r_(reader), root_(std::move(root)) {}

  WorkloadConfig parse(const std::string& source) {
    WorkloadConfig config;
    config.source = source;
    if (!root_.IsDefined() || root_.IsNull()) r_.fail(root_, "", "the config is empty (expected a map with at least 'workload')");
    Section top(r_, root_, "", kTopKeys);

    config.name = top.get_string("name", "");
    top.require("workload", "one of " + join_list(kWorkloads));
    config.kind = parse_workload(top.get_choice("workload", "", kWorkloads, "workload"));
    config.device = read_device(top);
    const std::string dtype = top.get_choice("dtype", "f32", {"f32", "f16", "bf16"}, "dtype");
    parse_dtype(dtype, &config.dtype);
    config.seed = static_cast<uint64_t>(top.get_int("seed", 0, 0, std::numeric_limits<int64_t>::max()));

    config.weights = read_weights(top, config.kind);
    if (!config.weights.config.empty()) import_hf_config(r_, root_, config.weights.config, top.node_for("weights"));
    // Re-read the model section: the HF import may have created or extended it.
    Section model(r_, root_["model"], "model", kModelKeys);
    config.model = read_model(model, config.kind);
    read_input(top, config);
    read_shape(top, config);
    check_sizes(config);

    // Paths: defaults per workload, then the file's.
    PathConfig defaults;
    defaults.mlp = config.model.gated ? ops::MlpPath::fused : ops::MlpPath::epilogue;
    Section paths(r_, root_["paths"], "paths", kPathKeys);
    config.paths = read_paths(paths, config.kind, defaults, nullptr);
    if (config.kind == WorkloadKind::block || config.kind == WorkloadKind::stack || config.kind == WorkloadKind::mlp)
      check_mlp_path(paths, config.model, config.paths);

    read_run(top, config);
    read_profile(top, config);
    read_compare(top, config);
    return config;
  }

 private:
  // The largest tensors of the workload, from its dims (long double: no product overflows).
  void check_sizes(const WorkloadConfig& config) {
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
      }
      return {};
    };
    const std::vector<SizeProduct> products = largest_tensors();
    for (const SizeProduct& product : products) {
      if (product.elements <= kMaxTensorElements) continue;
      // The section of the product's first key ("input.batch x ..." -> input) locates the error.
      const std::string keys = product.keys;
      const std::string section = keys.substr(0, keys.find('.'));
      r_.fail(root_[section], section,
              "impossible size: " + std::string(product.keys) + " = " + format_elements(product.elements) +
                  " elements, more than any device holds (at most 2^50 per tensor)");
    }
  }

  static std::string format_elements(long double elements) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3Lg", elements);
    return text;
  }

  std::string read_device(const Section& top) {
    const std::string text = top.get_string("device", "auto");
    Device device;
    if (text != "auto" && !parse_device(text, &device)) {
      top.fail("device", "unknown device '" + text + "' (expected auto, cpu, cuda or cuda:N)");
    }
    return text;
  }

  WeightsConfig read_weights(const Section& top, WorkloadKind kind) {
    Section section(r_, top.value("weights"), "weights", {"init", "file", "layer", "config"});
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
    if (weights.init == WeightInit::file && !std::ifstream(weights.file).good()) {
      section.fail("file", "cannot open '" + weights.file + "' (relative paths are from the current directory)");
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

  ModelConfig read_model(const Section& s, WorkloadKind kind) {
    ModelConfig m;
    const std::string kind_name = workload_kind_name(kind);
    if (kind == WorkloadKind::matmul_add || kind == WorkloadKind::linear || kind == WorkloadKind::softmax) {
      if (s.node().IsDefined() && !s.node().IsNull()) {
        r_.fail(s.node(), "model", "does not apply to workload " + kind_name + " (it takes shape: {m, n, k})");
      }
      return m;
    }
    if (kind == WorkloadKind::mlp) {
      for (const char* key : {"family", "n_heads", "n_kv_heads", "head_dim", "n_layers", "norm_eps", "rope_theta", "norm",
                              "rope", "causal"})
        s.reject(key, "does not apply to workload mlp (it takes d_model, d_ff, activation, gated, bias)");
      s.require("d_model");
      s.require("d_ff");
      m.d_model = s.get_int("d_model", 0, 1);
      m.d_ff = s.get_int("d_ff", 0, 1);
      ops::parse_activation(s.get_choice("activation", "gelu_tanh", kActivations, "activation"), &m.activation);
      m.gated = s.get_bool("gated", false);
      m.bias = s.get_bool("bias", !m.gated);
      if (m.gated && m.bias) s.fail("bias", "gated MLPs have no biases here (set bias: false)");
      return m;
    }
    if (kind == WorkloadKind::attention) {
      for (const char* key : {"family", "d_ff", "n_layers", "norm_eps", "rope_theta", "norm", "activation", "gated",
                              "bias", "rope"})
        s.reject(key, "does not apply to workload attention (it takes n_heads, n_kv_heads, head_dim, d_model, causal)");
      read_heads(s, m);
      m.causal = s.get_bool("causal", true);
      return m;
    }

    // block / stack
    s.require("family", "gpt2, llama or custom");
    const std::string family = s.get_choice("family", "", {"gpt2", "llama", "custom"}, "model family");
    m.family = family == "gpt2" ? ModelFamily::gpt2 : family == "llama" ? ModelFamily::llama : ModelFamily::custom;
    s.require("d_model", "Hugging Face: hidden_size");
    m.d_model = s.get_int("d_model", 0, 1);
    read_heads(s, m);
    m.n_layers = s.get_int("n_layers", 1, 1);
    // Hugging Face's defaults: GPT2Config.layer_norm_epsilon 1e-5, LlamaConfig.rms_norm_eps 1e-6.
    m.norm_eps = s.get_double("norm_eps", m.family == ModelFamily::llama ? 1e-6 : 1e-5, true);
    m.rope_theta = s.get_double("rope_theta", 10000.0, true);

    const std::vector<std::string> knobs = {"norm", "activation", "gated", "bias", "rope", "causal"};
    if (m.family == ModelFamily::gpt2) {
      for (const std::string& key : knobs)
        s.reject(key, "is fixed by family gpt2 (layernorm, gelu_tanh, plain MLP, biases, no RoPE, causal); use "
                      "family: custom to change it");
      s.reject("rope_theta", "family gpt2 has no RoPE");
      m.norm = NormKind::layernorm;
      m.activation = ops::Activation::gelu_tanh;
      m.gated = false;
      m.bias = true;
      m.rope = false;
      m.causal = true;
      if (m.n_kv_heads != m.n_heads) {
        s.fail("n_kv_heads", "gpt2 has no grouped-query attention: must equal n_heads = " + std::to_string(m.n_heads) +
                                 " (use family: custom for GQA)");
      }
      if (m.head_dim * m.n_heads != m.d_model) {
        s.fail("head_dim", "gpt2's fused c_attn needs n_heads * head_dim = d_model; got " + std::to_string(m.n_heads) +
                               " * " + std::to_string(m.head_dim) + " != " + std::to_string(m.d_model));
      }
      m.d_ff = s.get_int("d_ff", 4 * m.d_model, 1);
    } else if (m.family == ModelFamily::llama) {
      for (const std::string& key : knobs)
        s.reject(key, "is fixed by family llama (rmsnorm, SwiGLU, no biases, RoPE, causal); use family: custom to "
                      "change it");
      m.norm = NormKind::rmsnorm;
      m.activation = ops::Activation::silu;
      m.gated = true;
      m.bias = false;
      m.rope = true;
      m.causal = true;
      s.require("d_ff", "Hugging Face: intermediate_size");
      m.d_ff = s.get_int("d_ff", 0, 1);
    } else {
      for (const std::string& key : knobs) s.require(key, "family custom sets every knob explicitly");
      s.require("d_ff", "Hugging Face: intermediate_size");
      m.d_ff = s.get_int("d_ff", 0, 1);
      m.norm = s.get_choice("norm", "", {"layernorm", "rmsnorm"}, "norm") == "layernorm" ? NormKind::layernorm
                                                                                        : NormKind::rmsnorm;
      ops::parse_activation(s.get_choice("activation", "", kActivations, "activation"), &m.activation);
      m.gated = s.get_bool("gated", false);
      m.bias = s.get_bool("bias", false);
      m.rope = s.get_bool("rope", false);
      m.causal = s.get_bool("causal", true);
      if (m.gated && m.bias) s.fail("bias", "gated MLPs have no biases here: with gated: true set bias: false");
      if (!m.rope) s.reject("rope_theta", "is set but rope is false");
    }
    if (m.rope && m.head_dim % 2 != 0) {
      s.fail(s.has("head_dim") ? "head_dim" : "n_heads",
             "head_dim = " + std::to_string(m.head_dim) + " is odd, but RoPE rotates pairs (needs an even head_dim)");
    }
    return m;
  }

  // n_heads, n_kv_heads, head_dim with their divisibility rules.
  void read_heads(const Section& s, ModelConfig& m) {
    s.require("n_heads", "Hugging Face: num_attention_heads");
    m.n_heads = s.get_int("n_heads", 0, 1);
    m.n_kv_heads = s.get_int("n_kv_heads", m.n_heads, 1);
    if (m.n_heads % m.n_kv_heads != 0) {
      s.fail("n_kv_heads", std::to_string(m.n_kv_heads) + " does not divide n_heads = " + std::to_string(m.n_heads));
    }
    if (s.has("head_dim")) {
      m.head_dim = s.get_int("head_dim", 0, 1);
      if (s.has("d_model")) m.d_model = s.get_int("d_model", 0, 1);
    } else {
      if (!s.has("d_model")) s.require("head_dim", "or d_model, from which head_dim = d_model / n_heads");
      m.d_model = s.get_int("d_model", 0, 1);
      if (m.d_model % m.n_heads != 0) {
        s.fail("n_heads", std::to_string(m.n_heads) + " does not divide d_model = " + std::to_string(m.d_model) +
                              " (set head_dim explicitly if that is intended)");
      }
      m.head_dim = m.d_model / m.n_heads;
    }
  }

  void read_input(const Section& top, WorkloadConfig& config) {
    const bool uses_input = is_block_workload(config.kind) || config.kind == WorkloadKind::mlp ||
                            config.kind == WorkloadKind::attention;
    if (!uses_input) {
      top.reject("input", std::string("does not apply to workload ") + workload_kind_name(config.kind) +
                              " (its sizes are shape: {m, n" + (config.kind == WorkloadKind::softmax ? "" : ", k") + "})");
      return;
    }
    top.require("input", "batch and seq_len");
    Section s(r_, top.value("input"), "input", {"batch", "seq_len", "file"});
    s.require("batch");
    s.require("seq_len");
    config.input.batch = s.get_int("batch", 0, 1);
    config.input.seq_len = s.get_int("seq_len", 0, 1);
    config.input.file = s.get_string("file", "");
    if (config.kind == WorkloadKind::attention) s.reject("file", "attention takes seeded q, k, v only");
    if (!config.input.file.empty() && !std::ifstream(config.input.file).good()) {
      s.fail("file", "cannot open '" + config.input.file + "' (relative paths are from the current directory)");
    }
  }

  void read_shape(const Section& top, WorkloadConfig& config) {
    const bool gemm = config.kind == WorkloadKind::matmul_add || config.kind == WorkloadKind::linear;
    if (!gemm && config.kind != WorkloadKind::softmax) {
      top.reject("shape", std::string("does not apply to workload ") + workload_kind_name(config.kind) +
                              " (its sizes come from model and input)");
      return;
    }
    top.require("shape", gemm ? "m, n, k" : "m rows of n");
    Section s(r_, top.value("shape"), "shape", {"m", "n", "k"});
    s.require("m");
    s.require("n");
    config.shape.m = s.get_int("m", 0, 1);
    config.shape.n = s.get_int("n", 0, 1);
    if (gemm) {
      s.require("k");
      config.shape.k = s.get_int("k", 0, 1);
    } else {
      s.reject("k", "softmax takes shape: {m, n} (m rows of n)");
    }
  }

  void read_run(const Section& top, WorkloadConfig& config) {
    Section s(r_, top.value("run"), "run", {"warmup", "iters", "cuda_graph", "allow_tf32", "check_finite"});
    config.run.warmup = static_cast<int>(s.get_int("warmup", 3, 0));
    config.run.iters = static_cast<int>(s.get_int("iters", 10, 1));
    config.run.cuda_graph = s.get_bool("cuda_graph", false);
    config.run.allow_tf32 = s.get_bool("allow_tf32", false);
    config.run.check_finite = s.get_bool("check_finite", false);
  }

  void read_profile(const Section& top, WorkloadConfig& config) {
    Section s(r_, top.value("profile"), "profile", {"schedule", "sort_by", "row_limit", "group_by_shape", "trace", "memory"});
    Section schedule(r_, s.value("schedule"), "profile.schedule", {"wait", "warmup", "active"});
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

  void read_compare(const Section& top, WorkloadConfig& config) {
    const YAML::Node list = top.value("compare");
    if (!list.IsDefined() || list.IsNull()) return;
    if (!list.IsSequence()) {
      r_.fail(list, "compare", "expected a list of path overrides, e.g. [{attention: naive}], got " + describe_node(list));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = "compare[" + std::to_string(i) + "]";
      const YAML::Node entry = list[i];
      if (!entry.IsMap() || entry.size() == 0) {
        r_.fail(entry, path, "expected a map of path overrides such as {attention: naive}, got " + describe_node(entry));
      }
      Section s(r_, entry, path, kPathKeys);
      Variant variant;
      std::vector<ops::PathOp> named;
      variant.paths = read_paths(s, config.kind, config.paths, &named);
      if (is_block_workload(config.kind) || config.kind == WorkloadKind::mlp) check_mlp_path(s, config.model, variant.paths);
      variant.label = paths_str(variant.paths, named);
      config.compare.push_back(variant);
    }
  }

  Reader& r_;
  YAML::Node root_;
};

// The 1-based line of a document start marker ("---" at the start of a line, alone or followed
// by a space) that begins a second document, 0 when there is none. A marker before any content
// only opens the first document.
int second_document_start(const std::string& text) {
  bool content = false;
  int line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string row = text.substr(start, end - start);
    const bool marker = row.rfind("---", 0) == 0 && (row.size() == 3 || row[3] == ' ' || row[3] == '\t' || row[3] == '\r');
    if (marker && content) return line;
    const size_t first = row.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && row[first] != '#' && row.rfind("%", 0) != 0) content = true;
    start = end + 1;
  }
  return 0;
}

WorkloadConfig parse_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  // YAML allows no NUL byte (and yaml-cpp's document loop can spin forever on one).
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    throw InputError(source + ": byte " + std::to_string(nul) + " is a NUL byte: a config is YAML text");
  }
  // One document: a second one would otherwise be dropped without a word.
  const int second_document_line = second_document_start(text);
  if (second_document_line > 0) {
    throw InputError(source + ":" + std::to_string(second_document_line) +
                     ": a second YAML document starts here; a config is one document (remove the '---' and what "
                     "follows, or split the file)");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(source + ": YAML error: " + e.msg);
  }
  Reader reader(source);
  if (!sets.empty() && (!root.IsDefined() || root.IsNull())) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& set : sets) apply_set(root, set, reader);
  try {
    ConfigParser parser(reader, root);
    return parser.parse(source);
  } catch (const YAML::Exception& e) {
    // yaml-cpp should not throw past our checks; if it does, keep the exit code an input error.
    throw InputError(source + ": YAML error: " + e.msg);
  }
}

}  // namespace

WorkloadConfig load_config_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  return parse_text(text, source, sets);
}

WorkloadConfig load_config_file(const std::string& path, const std::vector<std::string>& sets) {
  if (path == "-") {  // standard input
    std::stringstream buffer;
    buffer << std::cin.rdbuf();
    return parse_text(buffer.str(), "<stdin>", sets);
  }
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InputError("config '" + path + "' is a directory (give a .yaml file, e.g. " + path + "/default.yaml)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open config file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError("cannot read config file '" + path + "'");
  return parse_text(buffer.str(), path, sets);
}

WorkloadConfig load_default_config(const std::vector<std::string>& sets) {
  return parse_text(default_config_yaml(), "<default config>", sets);
}

}  // namespace blockscope
