#include "model/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "blockscope_default_config.h"  // generated from configs/default.yaml (CMakeLists.txt)
#include "runtime/context.h"
#include "runtime/error.h"

namespace blockscope {

const char* workload_kind_name(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::block: return "block";
    case WorkloadKind::stack: return "stack";
    case WorkloadKind::matmul_add: return "matmul_add";
    case WorkloadKind::linear: return "linear";
    case WorkloadKind::mlp: return "mlp";
    case WorkloadKind::attention: return "attention";
    case WorkloadKind::softmax: return "softmax";
  }
  return "?";
}

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::gpt2: return "gpt2";
    case ModelFamily::llama: return "llama";
    case ModelFamily::custom: return "custom";
  }
  return "?";
}

const char* norm_name(NormKind norm) { return norm == NormKind::layernorm ? "layernorm" : "rmsnorm"; }

const char* weight_init_name(WeightInit init) {
  switch (init) {
    case WeightInit::random: return "random";
    case WeightInit::perturbed: return "perturbed";
    case WeightInit::file: return "file";
  }
  return "?";
}

bool is_block_workload(WorkloadKind kind) { return kind == WorkloadKind::block || kind == WorkloadKind::stack; }

const char* PathConfig::name(ops::PathOp op) const {
  switch (op) {
    case ops::PathOp::attention: return ops::path_name(attention);
    case ops::PathOp::linear: return ops::path_name(linear);
    case ops::PathOp::mlp: return ops::path_name(mlp);
  }
  return "?";
}

bool PathConfig::set(ops::PathOp op, const std::string& name) {
  switch (op) {
    case ops::PathOp::attention: return ops::parse_path(name, &attention);
    case ops::PathOp::linear: return ops::parse_path(name, &linear);
    case ops::PathOp::mlp: return ops::parse_path(name, &mlp);
  }
  return false;
}

namespace {

std::string join_paths(const PathConfig& paths, const std::vector<ops::PathOp>& ops) {
  std::string text;
  for (ops::PathOp op : ops) text += (text.empty() ? "" : ",") + std::string(ops::path_op_name(op)) + "=" + paths.name(op);
  return text;
}

}  // namespace

std::string paths_str(const PathConfig& paths) { return join_paths(paths, ops::path_ops()); }
std::string paths_str(const PathConfig& paths, WorkloadKind kind) {
  const std::string text = join_paths(paths, path_ops_for(kind));
  return text.empty() ? workload_kind_name(kind) : text;  // softmax: one path, named by the workload
}

std::vector<ops::PathOp> path_ops_for(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::block:
    case WorkloadKind::stack: return ops::path_ops();
    case WorkloadKind::matmul_add:
    case WorkloadKind::linear: return {ops::PathOp::linear};
    case WorkloadKind::mlp: return {ops::PathOp::mlp};
    case WorkloadKind::attention: return {ops::PathOp::attention};
    case WorkloadKind::softmax: return {};
  }
  return {};
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

Device resolve_device(const std::string& text) {
  if (text == "auto") return cuda_available() ? Device::cuda(0) : Device::cpu();
  Device device;
  if (!parse_device(text, &device)) {
    throw InputError("unknown device '" + text + "' (expected auto, cpu, cuda or cuda:N)");
  }
  return device;
}

const char* default_config_yaml() { return kBlockscopeDefaultConfigYaml; }

namespace {

// Hugging Face names users may write out of habit: the error then names our key.
const std::map<std::string, std::string>& hf_key_hints() {
  static const std::map<std::string, std::string> hints = {
      {"hidden_size", "d_model"},        {"n_embd", "d_model"},
      {"num_attention_heads", "n_heads"}, {"n_head", "n_heads"},
      {"num_key_value_heads", "n_kv_heads"}, {"intermediate_size", "d_ff"},
      {"n_inner", "d_ff"},               {"num_hidden_layers", "n_layers"},
      {"n_layer", "n_layers"},           {"rms_norm_eps", "norm_eps"},
      {"layer_norm_epsilon", "norm_eps"}, {"hidden_act", "activation"},
      {"activation_function", "activation"}};
  return hints;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// Where a value came from when it is not the config file itself.
struct Origin {
  std::string label;   // "--set model.d_model=7" or a config.json path
  bool with_mark = false;  // add line:column from the node (a config.json node)
};

// Walks the YAML tree, turning every problem into "where: key.path: what".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  std::map<std::string, Origin>& origins() { return origins_; }

  std::string where(const YAML::Node& node, const std::string& path) const {
    // The longest key-path prefix that came from a --set or a config.json decides the origin.
    std::string prefix = path;
    while (!prefix.empty()) {
      auto it = origins_.find(prefix);
      if (it != origins_.end()) {
        return it->second.with_mark ? it->second.label + mark_suffix(node) : it->second.label;
      }
      const size_t cut = prefix.find_last_of(".[");
      if (cut == std::string::npos) break;
      prefix = prefix.substr(0, cut);
    }
    return source_ + mark_suffix(node);
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& what) const {
    throw InputError(where(node, path) + ": " + (path.empty() ? std::string("config") : path) + ": " + what);
  }

 private:
  static std::string mark_suffix(const YAML::Node& node) {
    if (!node.IsDefined()) return "";
    const YAML::Mark mark = node.Mark();
    if (mark.is_null() || mark.line < 0) return "";
    return ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }

  std::string source_;
  std::map<std::string, Origin> origins_;
};

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing (an empty value)";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  return "'" + node.Scalar() + "'";
}

// A map section of the config: checks its keys once, then hands out typed values.
class Section {
 public:
  // `known` are all keys this section may ever have (for "did you mean"); `node` may be
  // undefined or null (an absent section: every key then takes its default).
  Section(const Reader& reader, YAML::Node node, std::string path, std::vector<std::string> known)
      : reader_(reader), node_(std::move(node)), path_(std::move(path)), known_(std::move(known)) {
    if (!node_.IsDefined() || node_.IsNull()) return;
    if (!node_.IsMap()) reader_.fail(node_, path_, "expected a map of keys, got " + describe_node(node_));
    std::set<std::string> seen;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const YAML::Node key_node = it->first;
      if (!key_node.IsScalar()) reader_.fail(key_node, path_, "keys must be plain names");
      const std::string key = key_node.Scalar();
      const std::string key_path = child_path(path_, key);
      if (!seen.insert(key).second) reader_.fail(key_node, key_path, "duplicate key '" + key + "'");
      if (std::find(known_.begin(), known_.end(), key) == known_.end()) reader_.fail(key_node, key_path, unknown_key(key));
      present_[key] = it->second;
      key_nodes_[key] = key_node;
    }
  }

  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }
  std::string key_path(const std::string& key) const { return child_path(path_, key); }

  // Present and not null.
  bool has(const std::string& key) const {
    auto it = present_.find(key);
    return it != present_.end() && !it->second.IsNull();
  }
  YAML::Node value(const std::string& key) const {
    auto it = present_.find(key);
    return it == present_.end() ? YAML::Node() : it->second;
  }
  // The node to point at for an error about `key` (its value, or the section when absent).
  YAML::Node node_for(const std::string& key) const {
    auto it = present_.find(key);
    if (it != present_.end()) return it->second;
    return node_;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    reader_.fail(node_for(key), key_path(key), what);
  }

  // Keys that must not appear for this workload (they exist, but mean nothing here).
  void reject(const std::string& key, const std::string& why) const {
    auto it = present_.find(key);
    if (it != present_.end()) reader_.fail(key_nodes_.at(key), key_path(key), why);
  }

  void require(const std::string& key, const std::string& why = "") const {
    if (!has(key)) fail(key, "missing required key" + (why.empty() ? std::string() : " (" + why + ")"));
  }

  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value) const {
    if (!has(key)) {
      if (present_.count(key)) fail(key, "expected an integer, got nothing (an empty value)");
      return fallback;
    }
    const YAML::Node node = value(key);
    if (!node.IsScalar()) fail(key, "expected an integer, got " + describe_node(node));
    const std::string& text = node.Scalar();
    errno = 0;
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
      fail(key, "expected an integer, got '" + text + "'");
    }
    if (parsed < min_value) {
      fail(key, (min_value == 1 ? "must be positive" : "must be at least " + std::to_string(min_value)) +
                    ", got " + text);
    }
    return parsed;
  }

  double get_double(const std::string& key, double fallback, bool positive) const {
    if (!has(key)) {
      if (present_.count(key)) fail(key, "expected a number, got nothing (an empty value)");
      return fallback;
    }
    const YAML::Node node = value(key);
    if (!node.IsScalar()) fail(key, "expected a number, got " + describe_node(node));
    const std::string& text = node.Scalar();
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(parsed)) {
      fail(key, "expected a number, got '" + text + "'");
    }
    if (positive && !(parsed > 0)) fail(key, "must be positive, got " + text);
    return parsed;
  }

  bool get_bool(const std::string& key, bool fallback) const {
    if (!has(key)) {
      if (present_.count(key)) fail(key, "expected true or false, got nothing (an empty value)");
      return fallback;
    }
    const YAML::Node node = value(key);
    if (node.IsScalar()) {
      if (node.Scalar() == "true") return true;
      if (node.Scalar() == "false") return false;
    }
    fail(key, "expected true or false, got " + describe_node(node));
  }

  // A string; `key: null` (or an empty value) means "not set" and gives the fallback.
  std::string get_string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const YAML::Node node = value(key);
    if (!node.IsScalar()) fail(key, "expected a string, got " + describe_node(node));
    return node.Scalar();
  }

  // One of `choices`, with a "did you mean" when close to one.
  std::string get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices,
                         const std::string& what) const {
    if (!has(key)) {
      if (present_.count(key)) fail(key, "expected " + what + " (" + join_list(choices) + "), got nothing");
      return fallback;
    }
    const YAML::Node node = value(key);
    if (!node.IsScalar()) fail(key, "expected " + what + " (" + join_list(choices) + "), got " + describe_node(node));
    const std::string text = node.Scalar();
    if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
    fail(key, "unknown " + what + " '" + text + "'" + suggestion(text, choices) + " (expected one of " +
                  join_list(choices) + ")");
  }

  static std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    size_t best_distance = std::string::npos;
    for (const std::string& candidate : candidates) {
      const size_t d = edit_distance(word, candidate);
      if (d < best_distance) {
        best_distance = d;
        best = candidate;
      }
    }
    const size_t threshold = std::max<size_t>(2, word.size() / 3);
    if (best_distance <= threshold) return "; did you mean '" + best + "'?";
    return "";
  }

 private:
  std::string unknown_key(const std::string& key) const {
    std::string message = "unknown key '" + key + "'";
    auto hint = hf_key_hints().find(key);
    if (hint != hf_key_hints().end() &&
        std::find(known_.begin(), known_.end(), hint->second) != known_.end()) {
      message += "; Hugging Face's " + key + " is '" + hint->second + "' here";
    } else {
      message += suggestion(key, known_);
    }
    return message + " (" + (path_.empty() ? std::string("the top level") : path_) + " takes: " + join_list(known_) +
           ")";
  }

  const Reader& reader_;
  YAML::Node node_;
  std::string path_;
  std::vector<std::string> known_;
  std::map<std::string, YAML::Node> present_;
  std::map<std::string, YAML::Node> key_nodes_;
};

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
    config.seed = static_cast<uint64_t>(top.get_int("seed", 0, 0));

    config.weights = read_weights(top, config.kind);
    if (!config.weights.config.empty()) import_hf_config(config.weights.config, top.node_for("weights"));
    // Re-read the model section: the HF import may have created or extended it.
    Section model(r_, root_["model"], "model", kModelKeys);
    config.model = read_model(model, config.kind);
    read_input(top, config);
    read_shape(top, config);

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
    const std::string init = section.get_choice("init", fallback, {"random", "perturbed", "file"}, "weight init");
    weights.init = init == "file" ? WeightInit::file : init == "perturbed" ? WeightInit::perturbed : WeightInit::random;
    weights.layer = section.get_int("layer", 0, 0);
    if (weights.init == WeightInit::file && weights.file.empty()) {
      section.fail("file", "init: file needs weights.file (a safetensors file with Hugging Face names)");
    }
    if (weights.init == WeightInit::file && !std::ifstream(weights.file).good()) {
      section.fail("file", "cannot open '" + weights.file + "' (relative paths are from the current directory)");
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

  // Copies the dims of a Hugging Face config.json into the model section, for every key the
  // YAML does not set itself (the YAML wins). Errors in imported values name the JSON file.
  void import_hf_config(const std::string& path, const YAML::Node& weights_node) {
    YAML::Node json;
    {
      std::ifstream in(path);
      if (!in) r_.fail(weights_node, "weights.config", "cannot open Hugging Face config '" + path + "'");
      try {
        json = YAML::Load(in);  // JSON is YAML
      } catch (const YAML::ParserException& e) {
        throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                         ": weights.config: not valid JSON: " + e.msg);
      }
    }
    if (!json.IsMap()) r_.fail(weights_node, "weights.config", "'" + path + "' is not a JSON object");
    YAML::Node model = root_["model"];
    if (!model.IsDefined() || model.IsNull()) {
      root_["model"] = YAML::Node(YAML::NodeType::Map);
    } else if (!model.IsMap()) {
      r_.fail(model, "model", "expected a map of keys, got " + describe_node(model));
    }
    YAML::Node target = root_["model"];
    auto import = [&](const std::string& ours, std::initializer_list<const char*> theirs) {
      if (target[ours].IsDefined()) return;
      for (const char* name : theirs) {
        const YAML::Node value = json[name];
        if (value.IsDefined() && !value.IsNull()) {
          target[ours] = value;
          r_.origins()["model." + ours] = Origin{path, true};
          return;
        }
      }
    };
    if (!target["family"].IsDefined() && json["model_type"].IsDefined()) {
      const std::string type = json["model_type"].IsScalar() ? json["model_type"].Scalar() : "";
      std::string family;
      if (type == "gpt2") family = "gpt2";
      if (type == "llama" || type == "mistral" || type == "qwen2") family = "llama";
      if (family.empty()) {
        throw InputError(path + ": weights.config: model_type '" + type +
                         "' is not GPT-2 or Llama-like; set model.family: custom and its knobs in the YAML");
      }
      target["family"] = family;
      r_.origins()["model.family"] = Origin{path + " (model_type)", false};
    }
    import("d_model", {"hidden_size", "n_embd"});
    import("n_heads", {"num_attention_heads", "n_head"});
    import("n_kv_heads", {"num_key_value_heads"});
    import("head_dim", {"head_dim"});
    import("d_ff", {"intermediate_size", "n_inner"});
    import("n_layers", {"num_hidden_layers", "n_layer"});
    import("norm_eps", {"rms_norm_eps", "layer_norm_epsilon"});
    import("rope_theta", {"rope_theta"});
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
    m.norm_eps = s.get_double("norm_eps", 1e-5, true);
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
    Section s(r_, top.value("run"), "run", {"warmup", "iters", "cuda_graph", "allow_tf32"});
    config.run.warmup = static_cast<int>(s.get_int("warmup", 3, 0));
    config.run.iters = static_cast<int>(s.get_int("iters", 10, 1));
    config.run.cuda_graph = s.get_bool("cuda_graph", false);
    config.run.allow_tf32 = s.get_bool("allow_tf32", false);
  }

  void read_profile(const Section& top, WorkloadConfig& config) {
    Section s(r_, top.value("profile"), "profile", {"schedule", "sort_by", "row_limit", "trace", "memory"});
    Section schedule(r_, s.value("schedule"), "profile.schedule", {"wait", "warmup", "active"});
    config.profile.wait = static_cast<int>(schedule.get_int("wait", 1, 0));
    config.profile.warmup = static_cast<int>(schedule.get_int("warmup", 1, 0));
    config.profile.active = static_cast<int>(schedule.get_int("active", 3, 1));
    // The op table's column keys (profiler/table.cpp), and torch.profiler's names for them.
    static const std::map<std::string, std::string> sort_keys = {
        {"name", "name"},
        {"self_cpu", "self_cpu"},           {"self_cpu_time_total", "self_cpu"},
        {"cpu_total", "cpu_total"},         {"cpu_time_total", "cpu_total"},
        {"cpu_avg", "cpu_avg"},             {"cpu_time", "cpu_avg"},
        {"self_device", "self_device"},     {"self_gpu", "self_device"},
        {"self_cuda", "self_device"},       {"self_cuda_time_total", "self_device"},
        {"self_device_time_total", "self_device"},
        {"device_total", "device_total"},   {"gpu_total", "device_total"},
        {"cuda_total", "device_total"},     {"cuda_time_total", "device_total"},
        {"device_time_total", "device_total"},
        {"device_avg", "device_avg"},       {"gpu_avg", "device_avg"},
        {"cuda_time", "device_avg"},        {"device_time", "device_avg"},
        {"calls", "calls"},                 {"count", "calls"},
        {"flops", "flops"},                 {"bytes", "bytes"},
        {"tflops", "tflops"},               {"gbps", "gbps"},
        {"pct_peak", "pct_peak"},           {"memory", "memory"},
        {"bytes_allocated", "memory"},      {"cpu_memory_usage", "memory"},
        {"device_memory_usage", "memory"}};
    std::vector<std::string> names;
    for (const auto& entry : sort_keys) names.push_back(entry.first);
    config.profile.sort_by = sort_keys.at(s.get_choice("sort_by", "self_device", names, "sort column"));
    config.profile.row_limit = static_cast<int>(s.get_int("row_limit", 20, 0));
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
      variant.label = join_paths(variant.paths, named);
      config.compare.push_back(variant);
    }
  }

  Reader& r_;
  YAML::Node root_;
};

// Applies one --set key.sub=value to the tree (creating maps on the way).
void apply_set(YAML::Node& root, const std::string& text, Reader& reader) {
  const std::string label = "--set " + text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(label + ": expected key.sub=value, e.g. --set model.d_model=256");
  }
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream stream(key);
  for (std::string part; std::getline(stream, part, '.');) {
    if (part.empty()) throw InputError(label + ": empty name in key '" + key + "'");
    parts.push_back(part);
  }
  if (key.back() == '.') throw InputError(label + ": empty name in key '" + key + "'");
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw InputError(label + ": the value is not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) throw InputError(label + ": the config is not a map of keys");
  YAML::Node current(root);
  std::string walked;
  std::vector<std::string> created;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked = child_path(walked, parts[i]);
    if (current.IsSequence()) {
      char* end = nullptr;
      const long index = std::strtol(parts[i].c_str(), &end, 10);
      if (*end != '\0' || index < 0 || static_cast<size_t>(index) >= current.size()) {
        throw InputError(label + ": '" + walked + "' is not an index of the list (it has " +
                         std::to_string(current.size()) + " entries)");
      }
      YAML::Node next = current[static_cast<size_t>(index)];
      current.reset(next);
      continue;
    }
    if (!current.IsMap()) throw InputError(label + ": '" + walked + "' is inside a value that is not a map");
    YAML::Node next = current[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      current[parts[i]] = YAML::Node(YAML::NodeType::Map);
      created.push_back(walked);  // a map made by this --set: errors about it name the --set
    } else if (!next.IsMap() && !next.IsSequence()) {
      throw InputError(label + ": '" + walked + "' is a value (" + describe_node(next) + "), not a map of keys");
    }
    YAML::Node child = current[parts[i]];
    current.reset(child);
  }
  if (current.IsSequence()) throw InputError(label + ": cannot set a key inside a list; set the whole list instead");
  current[parts.back()] = value;
  // Later overrides of a parent replace earlier ones of its children.
  auto& origins = reader.origins();
  for (auto it = origins.begin(); it != origins.end();) {
    if (it->first.rfind(key + ".", 0) == 0) it = origins.erase(it);
    else ++it;
  }
  origins[key] = Origin{label, false};
  for (const std::string& path : created) origins[path] = Origin{label, false};
}

WorkloadConfig parse_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
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
