#include "model/weights.h"

#include <cmath>
#include <map>

#include "runtime/error.h"
#include "model/init.h"
#include "model/safetensors.h"

namespace blockscope {

std::string layer_prefix(ModelFamily family, int64_t layer) {
  if (family == ModelFamily::gpt2) return "h." + std::to_string(layer) + ".";
  return "model.layers." + std::to_string(layer) + ".";
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
    normal("attn.c_attn.weight", {d, 3 * d});
    zeros("attn.c_attn.bias", 3 * d);
    normal("attn.c_proj.weight", {d, d}, proj_std);
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

const SafetensorsEntry* find_entry(const SafetensorsFile& file, const std::string& name) {
  if (const SafetensorsEntry* entry = file.find(name)) return entry;
  if (const SafetensorsEntry* entry = file.find("transformer." + name)) return entry;  // GPT2LMHeadModel
  if (name.rfind("model.", 0) == 0) return file.find(name.substr(6));                 // LlamaModel saved bare
  return nullptr;
}

}  // namespace

void load_weights(Context& ctx, const std::vector<WeightSpec>& specs, const ModelConfig& model, DType dtype,
                  const std::string& path, int64_t layer_shift, WeightSet& out) {
  const SafetensorsFile file = read_safetensors(path);
  Context host(Device::cpu());
  for (const WeightSpec& spec : specs) {
    const std::string file_name = shift_layer(spec.name, model, layer_shift);
    const SafetensorsEntry* entry = find_entry(file, file_name);
    if (entry == nullptr) {
      std::string hint;
      size_t best = std::string::npos;
      for (const SafetensorsEntry& candidate : file.tensors) {
        const size_t distance = edit_distance(candidate.name, file_name);
        if (distance < best) {
          best = distance;
          hint = candidate.name;
        }
      }
      throw InputError(path + ": weights.file has no tensor '" + file_name + "' (needed by the " +
                       family_name(model.family) + " block" + (hint.empty() ? "" : "; closest: '" + hint + "'") + ")");
    }
    if (entry->shape != spec.shape) {
      throw InputError(path + ": tensor '" + entry->name + "' has shape " + shape_str(entry->shape) +
                       ", but the config's model needs " + shape_str(spec.shape) +
                       " (check d_model, n_heads, n_kv_heads, head_dim, d_ff)");
    }
    Tensor loaded = tensor_from_entry(host, *entry);
    const std::vector<float> values = to_floats(loaded);
    check_finite(values, dtype, path + ": tensor '" + file_name + "'");
    Tensor t = ctx.empty(spec.shape, dtype);
    from_floats(t, values);  // converts the file's dtype to the workload's
    out.add(spec.name, std::move(t));
  }
}

}  // namespace blockscope
