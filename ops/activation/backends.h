// The device implementations behind the public activation ops: ops/activation/cpu.cpp and ops/activation/cuda.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/activation/activation.h"

namespace blockscope::ops::cpu {
void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);
void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);
void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
inline const char* activation(Activation act) {
  switch (act) {
    case Activation::gelu_erf: return "gelu_kernel";
    case Activation::gelu_tanh: return "gelu_tanh_kernel";
    case Activation::silu: return "silu_kernel";
    case Activation::relu: return "relu_kernel";
  }
  return "activation_kernel";
}
// act(gate) * up in one kernel.
inline const char* gated_activation(Activation act) {
  switch (act) {
    case Activation::gelu_erf: return "gated_gelu_mul_kernel";
    case Activation::gelu_tanh: return "gated_gelu_tanh_mul_kernel";
    case Activation::silu: return "gated_silu_mul_kernel";
    case Activation::relu: return "gated_relu_mul_kernel";
  }
  return "gated_activation_mul_kernel";
}
}  // namespace blockscope::ops::kernel_names
