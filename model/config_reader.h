// The YAML reading the config parser is written with (model/config_*.cpp; not a public
// header): Reader knows where every value came from (the file, a --set, a config.json) and
// turns each problem into "where: key.path: what"; Section reads one map, refusing unknown
// keys with a "did you mean" and checking each value's type and range.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/config.h"
#include "runtime/error.h"
#include "runtime/input_file.h"

namespace blockscope::config_reader {

// The most a config file (YAML, or a Hugging Face config.json) may hold: real ones are a few KB.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

// Hugging Face names users may write out of habit: the error then names our key.
inline const std::map<std::string, std::string>& hf_key_hints() {
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

inline std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

inline std::string child_path(const std::string& parent, const std::string& key) {
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

inline std::string describe_node(const YAML::Node& node) {
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

  // An integer in [min_value, max_value]; the default maximum, 2^31 - 1, keeps every size and
  // count within what an int holds, so no caller narrows a value that does not fit.
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value,
                  int64_t max_value = std::numeric_limits<int32_t>::max()) const {
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
    if (text.empty() || end != text.c_str() + text.size()) fail(key, "expected an integer, got '" + text + "'");
    if (errno == ERANGE || parsed > max_value) {
      fail(key, "must be at most " + std::to_string(max_value) + ", got " + text);
    }
    if (parsed < min_value) {
      fail(key, (min_value == 1 ? "must be positive" : "must be at least " + std::to_string(min_value)) +
                    ", got " + text);
    }
    return parsed;
  }

  // A finite number; positive when `positive`, and within [min_value, max_value] — a range
  // that says what the key can mean (rope_theta 1e-40 is a typo, not a model).
  double get_double(const std::string& key, double fallback, bool positive,
                    double min_value = -std::numeric_limits<double>::max(),
                    double max_value = std::numeric_limits<double>::max()) const {
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
    if (parsed < min_value || parsed > max_value) {
      std::ostringstream range;
      range << "must be from " << min_value << " to " << max_value << ", got " << text;
      fail(key, range.str());
    }
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

// Copies the dims of a Hugging Face config.json into root's model section, for every key the
// YAML does not set itself (the YAML wins). Errors in imported values name the JSON file.
// model/config_hf.cpp.
void import_hf_config(Reader& reader, YAML::Node& root, const std::string& path, const YAML::Node& weights_node);

// Applies one --set key.sub=value to the tree (creating maps on the way). model/config_overrides.cpp.
void apply_set(YAML::Node& root, const std::string& text, Reader& reader);

// ---- The sections of the schema (model/config_sections.cpp; the model section:
// model/config_model.cpp), read by model/config_parser.cpp in the order their rules need ----
std::string read_device(const Section& top);
WeightsConfig read_weights(const Reader& reader, const Section& top, WorkloadKind kind);
ModelConfig read_model(const Reader& reader, const Section& model, WorkloadKind kind);
void read_input(const Reader& reader, const Section& top, WorkloadConfig& config);
void read_shape(const Reader& reader, const Section& top, WorkloadConfig& config);
// `decode:` (workload: decode only); sets input.batch and input.seq_len to its batch and
// longest prompt, which the size check and the title read.
void read_decode(const Reader& reader, const Section& top, WorkloadConfig& config);
// `parallel:` (block and stack workloads): tensor must divide the heads, kv heads and d_ff.
void read_parallel(const Reader& reader, const Section& top, WorkloadConfig& config);
// Refuses a workload whose largest tensors could not exist (more than 2^50 elements), naming
// the keys whose product it is.
void check_sizes(const Reader& reader, const YAML::Node& root, const WorkloadConfig& config);
// `precision:` (linear workloads): the FP8 GEMM and its recipe; reads paths.linear (set first).
void read_precision(const Reader& reader, const Section& top, WorkloadConfig& config);
void read_run(const Reader& reader, const Section& top, WorkloadConfig& config);
void read_cpu(const Reader& reader, const Section& top, WorkloadConfig& config);
void read_profile(const Reader& reader, const Section& top, WorkloadConfig& config);
// The keys of a paths map: one per op with paths (ops::path_ops()).
const std::vector<std::string>& path_keys();
// Reads a paths map (the `paths:` section or one `compare:` entry) over `base`; `set_ops`
// gets the ops it names.
PathConfig read_paths(const Section& section, WorkloadKind kind, PathConfig base, std::vector<ops::PathOp>* set_ops);
// The MLP path must suit the MLP: epilogue for plain ones, fused for gated ones.
void check_mlp_path(const Section& section, const ModelConfig& model, const PathConfig& paths);
// decode: the attention path must have a decode form (ops/decode_attention).
void check_decode_path(const Section& section, WorkloadKind kind, const PathConfig& paths);
void read_compare(const Reader& reader, const Section& top, WorkloadConfig& config);

}  // namespace blockscope::config_reader
