// Pointwise activations: every fact about one — its config name and aliases, its kernels'
// names, its FLOPs per element, its host definition and vectorised CPU row — in one row of one
// table (activations.cpp), in enum order; compile-time guards keep the table, the enum and
// kActivationCount the same length. Adding an activation: its enumerator and row here, its
// device functor (ops/activation/device_functions.cuh: the one switch left, where a functor
// type must be chosen) and its float64 definition in the reference (docs/ADDING_AN_OP.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace blockscope::ops {

enum class Activation { gelu_erf, gelu_tanh, silu, relu };
inline constexpr size_t kActivationCount = static_cast<size_t>(Activation::relu) + 1;  // the last enumerator

struct ActivationInfo {
  Activation act;
  const char* name;        // as configs spell it
  const char* aliases[2];  // other names configs and Hugging Face use (null: none)
  const char* kernel;      // the elementwise kernel, as both backends record it
  const char* gated_kernel;  // act(gate) * up in one kernel
  double flops_per_element;  // the profiler's rate columns and the catalogue; the gated form adds 1
  float (*value)(float);     // the host definition (CPU kernels, the CUDA tests' expectations)
  void (*row)(float* x, int64_t n);  // x[0, n) = act(x[0, n)) vectorised on the CPU, or null
};

const ActivationInfo& activation_info(Activation act);

const char* activation_name(Activation act);
// Every activation, in enum order, and their config names ("gelu", "gelu_tanh", "silu", "relu").
const std::vector<Activation>& activations();
std::vector<std::string> activation_names();
// From config text (a name or an alias); false when unknown.
bool parse_activation(const std::string& text, Activation* out);

}  // namespace blockscope::ops
