// The device implementations behind the public attention op: ops/attention/cpu.cpp and ops/attention/flash.cu,
// called by run_op (ops/common/dispatch.h) after validation, with the same arguments. The
// CUDA ones are declared in every build and defined only where CUDA is built in.
#pragma once

#include "ops/attention/attention.h"

namespace blockscope::ops::cpu {
void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale);
}  // namespace blockscope::ops::cuda

// The names this op's kernels are recorded under (the profiler's kernel table, the tests'
// kernel checks), one list for both backends: the CPU records its work under the CUDA kernel's
// name, so the tables of the two devices line up.
namespace blockscope::ops::kernel_names {
// The materialising paths' two batched GEMMs.
inline constexpr char kGemmQk[] = "gemm_qk";
inline constexpr char kGemmPv[] = "gemm_pv";
inline constexpr char kFlashAttention[] = "flash_attention_kernel";
}  // namespace blockscope::ops::kernel_names
