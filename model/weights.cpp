#include "model/weights.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model/init.h"
#include "model/safetensors.h"
#include "runtime/error.h"
#include "runtime/input_file.h"

namespace blockscope {

std::string layer_prefix(ModelFamily family, int64_t layer) {
  if (family == ModelFamily::gpt2) return "h." + std::to_string(layer) + ".";
  return "model.layers." + std::to_string(layer) + ".";
}

double layer_parameters(const ModelConfig& model) {
  double total = 0;
  for (const WeightSpec& spec : block_weight_specs(model, 0)) total += static_cast<double>(shape_numel(spec.shape));
  return total;
}

std::vector<WeightSpec> block_weight_specs(const ModelConfig& m, int64_t layer) {
  const std::string p = layer_prefix(m.family, layer);
  const int64_t d = m.d_model, f = m.d_ff;
  const int64_t q_width = m.n_heads * m.head_dim, kv_width = m.n_kv_heads * m.head_dim;
  std::vector<WeightSpec> specs;
  // GPT-2's Conv1D weights are [in, out], Llama's Linear weights [out, in].
  const bool in_out = m.family == ModelFamily::gpt2;
  auto normal = [&](const std::string& name, Shape shape, float std = 0.02f) {
    const int64_t fan_in = in_out ? shape[0] : shape[1];
    specs.push_back({p + name, std::move(shape), WeightFill::normal, std, fan_in});
  };
  auto ones = [&](const std::string& name, int64_t n) { specs.push_back({p + name, {n}, WeightFill::ones, 0, 0}); };
  auto zeros = [&](const std::string& name, int64_t n) { specs.push_back({p + name, {n}, WeightFill::zeros, 0, 0}); };

  if (m.family == ModelFamily::gpt2) {
    // Hugging Face scales the residual projections by 1/sqrt(2 · n_layer) (GPT-2 paper, 2.3).
    const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.n_layers));
    ones("ln_1.weight", d);
    zeros("ln_1.bias", d);
    // q | k | v, each H · D = d wide (H / N heads on a tensor-parallel shard: shard_model).
    normal("attn.c_attn.weight", {d, 3 * q_width});
    zeros("attn.c_attn.bias", 3 * q_width);
    normal("attn.c_proj.weight", {q_width, d}, proj_std);
    zeros("attn.c_proj.bias", d);
    ones("ln_2.weight", d);
    zeros("ln_2.bias", d);
    normal("mlp.c_fc.weight", {d, f});
    zeros("mlp.c_fc.bias", f);
    normal("mlp.c_proj.weight", {f, d}, proj_std);
    zeros("mlp.c_proj.bias", d);
    return specs;
  }
  const bool norm_bias = m.bias && m.norm == NormKind::layernorm;
  ones("input_layernorm.weight", d);
  if (norm_bias) zeros("input_layernorm.bias", d);
  for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
    const int64_t width = proj[0] == 'q' ? q_width : kv_width;
    normal(std::string("self_attn.") + proj + ".weight", {width, d});
    if (m.bias) zeros(std::string("self_attn.") + proj + ".bias", width);
  }
  normal("self_attn.o_proj.weight", {d, q_width});
  if (m.bias) zeros("self_attn.o_proj.bias", d);
  ones("post_attention_layernorm.weight", d);
  if (norm_bias) zeros("post_attention_layernorm.bias", d);
  if (m.gated) {
    normal("mlp.gate_proj.weight", {f, d});
    normal("mlp.up_proj.weight", {f, d});
    normal("mlp.down_proj.weight", {d, f});
  } else {
    normal("mlp.up_proj.weight", {f, d});
    if (m.bias) zeros("mlp.up_proj.bias", f);
    normal("mlp.down_proj.weight", {d, f});
    if (m.bias) zeros("mlp.down_proj.bias", d);
  }
  return specs;
}

void WeightSet::add(const std::string& name, Tensor tensor) {
  BS_CHECK(!contains(name), "weight '", name, "' added twice");
  items_.emplace_back(name, std::move(tensor));
}

bool WeightSet::contains(const std::string& name) const {
  for (const auto& item : items_)
    if (item.first == name) return true;
  return false;
}

const Tensor& WeightSet::at(const std::string& name) const {
  for (const auto& item : items_)
    if (item.first == name) return item.second;
  throw Error(ErrorKind::runtime, "weight '" + name + "' is missing from the weight set");
}

Tensor WeightSet::get(const std::string& name) const {
  for (const auto& item : items_)
    if (item.first == name) return item.second;
  return Tensor();
}

size_t WeightSet::bytes() const {
  size_t total = 0;
  for (const auto& item : items_) total += item.second.nbytes();
  return total;
}

void init_weights(Context& ctx, const std::vector<WeightSpec>& specs, DType dtype, uint64_t seed, WeightInit init,
                  WeightSet& out) {
  const bool perturbed = init == WeightInit::perturbed || init == WeightInit::scaled;
  for (const WeightSpec& spec : specs) {
    Tensor t;
    switch (spec.fill) {
      case WeightFill::normal: {
        const float std = init == WeightInit::scaled ? 1.0f / std::sqrt(static_cast<float>(spec.fan_in)) : spec.std;
        t = init::normal_tensor(ctx, spec.name, spec.shape, dtype, seed, 0.0f, std);
        break;
      }
      case WeightFill::ones:
        t = perturbed ? init::normal_tensor(ctx, spec.name, spec.shape, dtype, seed, 1.0f, 0.1f)
                      : init::constant_tensor(ctx, spec.shape, dtype, 1.0f);
        break;
      case WeightFill::zeros:
        t = perturbed ? init::normal_tensor(ctx, spec.name, spec.shape, dtype, seed, 0.0f, 0.02f)
                      : init::constant_tensor(ctx, spec.shape, dtype, 0.0f);
        break;
    }
    out.add(spec.name, std::move(t));
  }
}

namespace {

// "h.3.attn.c_attn.weight" with layer 3 -> layer 3 + shift, keeping the rest.
std::string shift_layer(const std::string& name, const ModelConfig& model, int64_t shift) {
  if (shift == 0) return name;
  const std::string head = model.family == ModelFamily::gpt2 ? "h." : "model.layers.";
  const size_t start = head.size();
  const size_t end = name.find('.', start);
  const int64_t layer = std::stoll(name.substr(start, end - start));
  return head + std::to_string(layer + shift) + name.substr(end);
}

// Where each tensor of a checkpoint lives: one .safetensors file, or a sharded checkpoint's
// index (model.safetensors.index.json: {"weight_map": {tensor name: shard file, ...}}, shards
// named relative to the index) as Hugging Face saves models over a few GB.
std::map<std::string, std::string> checkpoint_tensors(const std::string& path) {
  std::map<std::string, std::string> file_of;
  const bool index = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!index) {
    const std::set<std::string> header_only;
    for (const SafetensorsEntry& entry : read_safetensors(path, &header_only).tensors) file_of[entry.name] = path;
    return file_of;
  }
  constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;
  const nlohmann::json json = nlohmann::json::parse(read_input_file(path, "sharded checkpoint index", kMaxIndexBytes),
                                                    nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw InputError(path + ": weights.file: not valid JSON (a sharded checkpoint's index)");
  const auto map = json.find("weight_map");
  if (!json.is_object() || map == json.end() || !map->is_object()) {
    throw InputError(path + ": weights.file: a .json weights file is a sharded checkpoint's index, with a \"weight_map\" "
                            "object of tensor name -> shard file");
  }
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string() || shard.get<std::string>().empty()) {
      throw InputError(path + ": weight_map." + name + ": expected the shard's file name");
    }
    file_of[name] = (directory / shard.get<std::string>()).string();
  }
  return file_of;
}

// The checkpoint name a spec's tensor is stored under: the name, or with GPT2LMHeadModel's
// "transformer." prefix, or without LlamaModel's "model."; empty when none is there.
std::string stored_name(const std::map<std::string, std::string>& file_of, const std::string& name) {
  for (const std::string& candidate : {name, "transformer." + name, name.rfind("model.", 0) == 0 ? name.substr(6) : name}) {
    if (file_of.count(candidate) > 0) return candidate;
  }
  return "";
}

}  // namespace

void load_weights(Context& ctx, const std::vector<WeightSpec>& specs, const ModelConfig& model, DType dtype,
                  const std::string& path, int64_t layer_shift, WeightSet& out) {
  // The header(s) first: which tensors the block needs, and where; then only those are read.
  const std::map<std::string, std::string> file_of = checkpoint_tensors(path);
  std::vector<std::string> stored(specs.size());
  std::map<std::string, std::set<std::string>> wanted;  // shard file -> the names read from it
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string file_name = shift_layer(specs[i].name, model, layer_shift);
    stored[i] = stored_name(file_of, file_name);
    if (stored[i].empty()) {
      std::string hint;
      size_t best = std::string::npos;
      for (const auto& [candidate, shard] : file_of) {
        const size_t distance = edit_distance(candidate, file_name);
        if (distance < best) {
          best = distance;
          hint = candidate;
        }
      }
      throw InputError(path + ": weights.file has no tensor '" + file_name + "' (needed by the " +
                       family_name(model.family) + " block" + (hint.empty() ? "" : "; closest: '" + hint + "'") + ")");
    }
    wanted[file_of.at(stored[i])].insert(stored[i]);
  }
  std::map<std::string, SafetensorsFile> shards;
  for (const auto& [shard, names] : wanted) shards.emplace(shard, read_safetensors(shard, &names));

  Context host(Device::cpu());
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& spec = specs[i];
    const std::string& shard = file_of.at(stored[i]);
    const SafetensorsEntry* entry = shards.at(shard).find(stored[i]);
    if (entry == nullptr) {  // an index naming a shard that lacks the tensor
      throw InputError(path + ": weight_map puts '" + stored[i] + "' in '" + shard + "', which does not hold it");
    }
    if (entry->shape != spec.shape) {
      throw InputError(shard + ": tensor '" + entry->name + "' has shape " + shape_str(entry->shape) +
                       ", but the config's model needs " + shape_str(spec.shape) +
                       " (check d_model, n_heads, n_kv_heads, head_dim, d_ff)");
    }
    // An FP8 checkpoint's weights are codes that a separate tensor scales (weight_scale, per
    // tensor or per channel); read as values they would be silently wrong.
    if (is_fp8(entry->dtype)) {
      throw InputError(shard + ": tensor '" + entry->name + "' is " + dtype_name(entry->dtype) +
                       ": an FP8 checkpoint's weights are scaled by separate tensors (weight_scale) that blockscope "
                       "does not apply yet; load a bf16, f16 or f32 checkpoint (docs/FP8.md)");
    }
    Tensor loaded = tensor_from_entry(host, *entry);
    const std::vector<float> values = to_floats(loaded);
    check_finite(values, dtype, shard + ": tensor '" + entry->name + "'");
    Tensor t = ctx.empty(spec.shape, dtype);
    from_floats(t, values);  // converts the file's dtype to the workload's
    out.add(spec.name, std::move(t));
  }
}

}  // namespace blockscope
