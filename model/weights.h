// Block weights under their Hugging Face names and layouts, created by the seeded init or read
// from a safetensors file.
//
//   gpt2    h.N.ln_1.{weight,bias}  h.N.attn.c_attn.{weight [d, 3d], bias}  h.N.attn.c_proj.{weight [d, d], bias}
//           h.N.ln_2.{weight,bias}  h.N.mlp.c_fc.{weight [d, d_ff], bias}  h.N.mlp.c_proj.{weight [d_ff, d], bias}
//           (Conv1D: stored [in, out])
//   llama   model.layers.N.input_layernorm.weight  model.layers.N.self_attn.{q,k,v,o}_proj.weight [out, in]
//           model.layers.N.post_attention_layernorm.weight  model.layers.N.mlp.{gate,up,down}_proj.weight [out, in]
//   custom  Llama's names; with bias: true also .bias on every projection and on LayerNorms;
//           a plain (ungated) MLP is mlp.up_proj -> act -> mlp.down_proj.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "runtime/context.h"
#include "runtime/tensor.h"

namespace blockscope {

// How a parameter is initialised (Hugging Face's _init_weights).
enum class WeightFill {
  normal,  // N(0, std)
  ones,    // norm weights (perturbed init: 1 + N(0, 0.1))
  zeros,   // biases (perturbed init: N(0, 0.02))
};

struct WeightSpec {
  std::string name;  // full Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  Shape shape;
  WeightFill fill = WeightFill::normal;
  float std = 0.02f;
  int64_t fan_in = 0;  // normal: the input features of the linear layer (init: scaled)
};

// "h.3." or "model.layers.3." (custom uses Llama's names).
std::string layer_prefix(ModelFamily family, int64_t layer);
// Every parameter of layer `layer` of a block of `model`.
std::vector<WeightSpec> block_weight_specs(const ModelConfig& model, int64_t layer);
// Parameters of one layer: the elements of block_weight_specs.
double layer_parameters(const ModelConfig& model);

// Named tensors in a fixed order (the order of the specs).
class WeightSet {
 public:
  void add(const std::string& name, Tensor tensor);
  bool contains(const std::string& name) const;
  // Throws a runtime Error naming the missing tensor (a bug: specs and users disagree).
  const Tensor& at(const std::string& name) const;
  // An undefined tensor when absent (optional biases).
  Tensor get(const std::string& name) const;
  const std::vector<std::pair<std::string, Tensor>>& items() const { return items_; }
  size_t bytes() const;

 private:
  std::vector<std::pair<std::string, Tensor>> items_;
};

// Seeded init of every spec (init random, perturbed or scaled), in `dtype` on ctx's device.
void init_weights(Context& ctx, const std::vector<WeightSpec>& specs, DType dtype, uint64_t seed, WeightInit init,
                  WeightSet& out);

// Reads the specs from a safetensors file, or from the shards of a sharded checkpoint given by
// its index (model.safetensors.index.json) — only the tensors the specs name: the rest of a
// checkpoint costs its header. `layer_shift` is added to the layer index of each
// name when looking it up in the file (weights.layer: use file layer 5 as our layer 0). Also
// accepts names under "transformer." (GPT-2 LM checkpoints) or without "model." (Llama base).
// Shapes must match exactly; dtypes are converted to `dtype`. Errors name the file and tensor.
void load_weights(Context& ctx, const std::vector<WeightSpec>& specs, const ModelConfig& model, DType dtype,
                  const std::string& file, int64_t layer_shift, WeightSet& out);

}  // namespace blockscope
