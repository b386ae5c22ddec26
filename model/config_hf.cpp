// Importing a Hugging Face config.json into a workload config (weights.config).
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "model/config_reader.h"
#include "runtime/error.h"

namespace blockscope::config_reader {

void import_hf_config(Reader& r_, YAML::Node& root_, const std::string& path, const YAML::Node& weights_node) {
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

}  // namespace blockscope::config_reader
