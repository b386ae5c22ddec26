// The CUDA implementations behind ops/decode_step (there is no CPU form: decode_step.h), called
// by run_op after validation. Declared in every build, defined only where CUDA is built in.
#pragma once

#include "ops/decode_step/decode_step.h"

namespace blockscope::ops::cuda {
void decode_step_reset(Context& ctx, IndexTable& step);
void decode_step_select(Context& ctx, const IndexTable& step, const IndexTable& all_positions,
                        const IndexTable& all_lengths, const Tensor& inputs, IndexTable& positions,
                        IndexTable& lengths, Tensor& x);
void decode_step_commit(Context& ctx, IndexTable& step, const Tensor& y, Tensor& outputs);
}  // namespace blockscope::ops::cuda

namespace blockscope::ops::kernel_names {
inline constexpr char kDecodeStepReset[] = "decode_step_reset_kernel";
inline constexpr char kDecodeStepSelect[] = "decode_step_select_kernel";
inline constexpr char kDecodeStepCommit[] = "decode_step_commit_kernel";
}  // namespace blockscope::ops::kernel_names
