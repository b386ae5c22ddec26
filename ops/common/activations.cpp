#include "ops/common/activations.h"

#include <cmath>
#include <iterator>

#include "ops/common/cpu_math.h"
#include "runtime/error.h"

namespace blockscope::ops {
namespace {

float gelu_erf_value(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }  // x / sqrt(2)
float relu_value(float x) { return x < 0.0f ? 0.0f : x; }  // NaN stays NaN, as torch.relu

// GELU (tanh) and SiLU — GPT-2's "gelu_new" and Llama's — use the CPU row kernels' own
// definitions (ops/common/cpu_math.h) and their vectorised rows (a scalar std::tanh or std::exp
// per element cost ~23 ns, a third of a naive Llama MLP's time); erf-GELU and ReLU go per element.
constexpr ActivationInfo kTable[] = {
    {Activation::gelu_erf, "gelu", {"gelu_erf", nullptr}, "gelu_kernel", "gated_gelu_mul_kernel", 8, gelu_erf_value,
     nullptr},
    {Activation::gelu_tanh, "gelu_tanh", {"gelu_new", "gelu_pytorch_tanh"}, "gelu_tanh_kernel",
     "gated_gelu_tanh_mul_kernel", 10, cpu::gelu_tanh_f32, cpu::gelu_tanh_row},
    {Activation::silu, "silu", {"swish", nullptr}, "silu_kernel", "gated_silu_mul_kernel", 4, cpu::silu_f32,
     cpu::silu_row},
    {Activation::relu, "relu", {nullptr, nullptr}, "relu_kernel", "gated_relu_mul_kernel", 1, relu_value, nullptr},
};
static_assert(std::size(kTable) == kActivationCount, "one row per Activation enumerator");

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < kActivationCount; ++i)
    if (static_cast<size_t>(kTable[i].act) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "row i of the activation table is enumerator i");

}  // namespace

const ActivationInfo& activation_info(Activation act) {
  const auto index = static_cast<size_t>(act);
  BS_CHECK(index < kActivationCount, "activation enumerator ", index, " has no row in the activation table");
  return kTable[index];
}

const char* activation_name(Activation act) { return activation_info(act).name; }

const std::vector<Activation>& activations() {
  static const std::vector<Activation> all = [] {
    std::vector<Activation> acts;
    for (const ActivationInfo& row : kTable) acts.push_back(row.act);
    return acts;
  }();
  return all;
}

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (const ActivationInfo& row : kTable) names.push_back(row.name);
  return names;
}

bool parse_activation(const std::string& text, Activation* out) {
  for (const ActivationInfo& row : kTable) {
    bool match = text == row.name;
    for (const char* alias : row.aliases) match = match || (alias != nullptr && text == alias);
    if (match) {
      *out = row.act;
      return true;
    }
  }
  return false;
}

}  // namespace blockscope::ops
