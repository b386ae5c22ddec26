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
inline const char* activation(Activation act) { return activation_info(act).kernel; }
// act(gate) * up in one kernel.
inline const char* gated_activation(Activation act) { return activation_info(act).gated_kernel; }
}  // namespace blockscope::ops::kernel_names
