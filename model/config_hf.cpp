// Importing a Hugging Face config.json into a workload config (weights.config).
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "model/config_reader.h"
#include "runtime/error.h"

namespace blockscope::config_reader {

namespace {

// Python's json and Hugging Face take the last of a key given twice, yaml-cpp (which reads the
// file below) the first: the two would run different models, so a repeated key is refused.
// Also the JSON check: what is not JSON is said so here, with the parser's position.
void refuse_duplicate_keys(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> objects;  // the keys seen in each open object
  std::string repeated;
  const nlohmann::json::parser_callback_t callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::object_start) objects.emplace_back();
    if (event == nlohmann::json::parse_event_t::object_end && !objects.empty()) objects.pop_back();
    if (event == nlohmann::json::parse_event_t::key && !objects.empty() && repeated.empty() &&
        !objects.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text, callback);
    (void)parsed;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(path + ": weights.config: not valid JSON: " + error.what());
  }
  if (!repeated.empty()) {
    throw InputError(path + ": weights.config: key '" + repeated +
                     "' appears twice in one object (Hugging Face would take the last, this reader the first): "
                     "remove one");
  }
}

}  // namespace

void import_hf_config(Reader& r_, YAML::Node& root_, const std::string& path, const YAML::Node& weights_node) {
  YAML::Node json;
  {
    if (const std::string problem = input_file_problem(path); !problem.empty()) {
      r_.fail(weights_node, "weights.config", "cannot read Hugging Face config '" + path + "': " + problem);
    }
    const std::string text = read_input_file(path, "Hugging Face config (weights.config)", kMaxConfigBytes);
    refuse_duplicate_keys(text, path);
    try {
      json = YAML::Load(text);  // JSON is YAML
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
  const auto scalar = [&](const char* key) {
    const YAML::Node value = json[key];
    return value.IsDefined() && value.IsScalar() ? value.Scalar() : std::string();
  };
  const auto refuse = [&](const std::string& field, const std::string& why) {
    throw InputError(path + ": weights.config: " + field + ": " + why +
                     "; blockscope would run another model than this config describes");
  };
  // The architectures whose blocks are ours: anything else (Qwen2's q/k/v biases, Gemma's
  // soft-capping, ...) is another model, not a Llama with other numbers.
  const std::string type = scalar("model_type");
  if (json["model_type"].IsDefined() && type != "gpt2" && type != "llama" && type != "mistral") {
    refuse("model_type", "'" + type + "' is not implemented (gpt2, llama and mistral are)");
  }
  // Features of those architectures that change the math, which the blocks do not implement.
  for (const char* field : {"rope_scaling", "sliding_window", "partial_rotary_factor", "attn_logit_softcapping"}) {
    const YAML::Node value = json[field];
    if (value.IsDefined() && !value.IsNull() && !(std::string(field) == "partial_rotary_factor" && scalar(field) == "1.0")) {
      refuse(field, "set to " + describe_node(value) + ", which is not implemented");
    }
  }
  for (const char* field : {"attention_bias", "mlp_bias", "scale_attn_by_inverse_layer_idx"}) {
    if (scalar(field) == "true") refuse(field, "true is not implemented");
  }
  if (scalar("scale_attn_weights") == "false") {
    refuse("scale_attn_weights", "false is not implemented (the blocks scale the scores by 1/sqrt(head_dim))");
  }
  // transformers v5 keeps RoPE's settings in one object: its theta is the model's, and any
  // scaling (rope_type llama3, yarn, ...) is another model.
  const YAML::Node rope_parameters = json["rope_parameters"];
  std::string rope_parameters_theta;
  if (rope_parameters.IsDefined() && !rope_parameters.IsNull()) {
    if (!rope_parameters.IsMap()) refuse("rope_parameters", "expected an object, got " + describe_node(rope_parameters));
    for (const auto& entry : rope_parameters) {
      const std::string key = entry.first.Scalar();
      const std::string value = entry.second.IsScalar() ? entry.second.Scalar() : describe_node(entry.second);
      if (key == "rope_theta") rope_parameters_theta = value;
      else if (key == "rope_type" && value != "default") refuse("rope_parameters.rope_type", "'" + value + "' (RoPE scaling) is not implemented");
      else if (key != "rope_type") refuse("rope_parameters." + key, "set to " + value + ", which is not implemented");
    }
    if (!rope_parameters_theta.empty() && !scalar("rope_theta").empty() && scalar("rope_theta") != rope_parameters_theta) {
      refuse("rope_parameters.rope_theta", rope_parameters_theta + " differs from rope_theta " + scalar("rope_theta"));
    }
  }
  const bool family_from_json = !target["family"].IsDefined() && !type.empty();
  if (family_from_json) {
    target["family"] = type == "gpt2" ? "gpt2" : "llama";
    r_.origins()["model.family"] = Origin{path + " (model_type)", false};
    // The family's activation is fixed (GPT-2 tanh-GELU, Llama SiLU): another one is another model.
    const char* act_key = type == "gpt2" ? "activation_function" : "hidden_act";
    const std::string act = scalar(act_key);
    const bool expected = type == "gpt2" ? (act.empty() || act == "gelu_new" || act == "gelu_pytorch_tanh")
                                         : (act.empty() || act == "silu");
    if (!expected) {
      refuse(act_key, "'" + act + "', but the " + type + " block uses " + (type == "gpt2" ? "tanh-GELU" : "SiLU") +
                          " (set model.family: custom and model.activation in the YAML to run it)");
    }
  }
  import("d_model", {"hidden_size", "n_embd"});
  import("n_heads", {"num_attention_heads", "n_head"});
  import("n_kv_heads", {"num_key_value_heads"});
  import("head_dim", {"head_dim"});
  import("d_ff", {"intermediate_size", "n_inner"});
  import("n_layers", {"num_hidden_layers", "n_layer"});
  import("norm_eps", {"rms_norm_eps", "layer_norm_epsilon"});
  import("rope_theta", {"rope_theta"});
  if (!target["rope_theta"].IsDefined() && !rope_parameters_theta.empty()) {
    target["rope_theta"] = rope_parameters["rope_theta"];
    r_.origins()["model.rope_theta"] = Origin{path, true};
  }
}

}  // namespace blockscope::config_reader
