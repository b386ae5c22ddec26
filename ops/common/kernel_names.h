// Kernel names that belong to no single op: the device-to-device copy and memset (a copy of a contiguous
// tensor, and the copy half of an out-of-place masked_fill), the GEMM label of the cuBLASLt
// wrapper and the CPU GEMMs, and the split-key combine of the attention ops. The names of an
// op's own kernels are in ops/<op>/backends.h.
#pragma once

namespace blockscope::ops::kernel_names {
inline constexpr char kMemcpyDtoD[] = "Memcpy DtoD";  // as Nsight and torch.profiler name it
inline constexpr char kGemm[] = "gemm";
// cudaMemsetAsync: CUDA's result of an empty sum (a GEMM with k = 0).
inline constexpr char kMemset[] = "Memset";
// The split-key combine of flash attention and flash decode (ops/common/cuda/split_combine.cuh):
// one kernel merges either op's key splits.
inline constexpr char kSplitCombine[] = "split_combine_kernel";
}  // namespace blockscope::ops::kernel_names
