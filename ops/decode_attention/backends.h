// The device implementations behind decode_attention: ops/decode_attention/cpu.cpp and
// ops/decode_attention/cuda.cu, called after validation. Each takes the path, so the naive
// path's three kernels and flash's one (or two) live beside each other per device.
#pragma once

#include "ops/decode_attention/decode_attention.h"

namespace blockscope::ops::cpu {
void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale);
}  // namespace blockscope::ops::cpu

namespace blockscope::ops::cuda {
void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
// naive: scores = QKᵀ · scale in the tensor dtype, softmax over each sequence's length, PV.
inline constexpr char kDecodeQk[] = "decode_qk_kernel";
inline constexpr char kDecodeSoftmax[] = "decode_softmax_kernel";
inline constexpr char kDecodePv[] = "decode_pv_kernel";
// flash: online softmax over the cache (split over key ranges on CUDA), then the split-key
// combine shared with flash attention (kernel_names::kSplitCombine, ops/common/kernel_names.h).
inline constexpr char kFlashDecode[] = "flash_decode_kernel";
}  // namespace blockscope::ops::kernel_names
