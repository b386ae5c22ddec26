// The device implementations behind the precision ops (ops/precision/precision.h):
// ops/precision/cpu.cpp and ops/precision/cuda.cu, called by run_op after validation with the
// same arguments. The CUDA ones are declared in every build and defined only where CUDA is
// built in.
#pragma once

#include "ops/precision/precision.h"

namespace blockscope::ops::cpu {
void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax);
void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y);
void amax(Context& ctx, const Tensor& x, Tensor& amax);
void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void quantize(Context& ctx, const Tensor& x, const Tensor& scale, Tensor& y, const Tensor& amax);
void dequantize(Context& ctx, const Tensor& x, const Tensor& scale_inv, Tensor& y);
void amax(Context& ctx, const Tensor& x, Tensor& amax);
void fp8_scale_update(Context& ctx, Tensor& amax_history, Tensor& scale, Tensor& scale_inv, const ScaleUpdate& update,
                      const Tensor& saturation);
}  // namespace blockscope::ops::cuda

// The names the precision ops' kernels are recorded under, one list for both backends (the CPU
// records its work under the CUDA kernel's name).
namespace blockscope::ops::kernel_names {
inline constexpr char kQuantize[] = "fp8_quantize_kernel";
inline constexpr char kQuantizeAmax[] = "fp8_quantize_amax_kernel";
inline constexpr char kDequantize[] = "fp8_dequantize_kernel";
inline constexpr char kAmax[] = "amax_kernel";
inline constexpr char kScaleUpdate[] = "fp8_scale_update_kernel";
}  // namespace blockscope::ops::kernel_names
