// The device-side plumbing of a decode step replayed from one CUDA graph (the decode runner with
// decode.cuda_graph: true, model/workload_kinds.cpp). Which step it is lives in device memory —
// `step`, one int32 — so the one captured step serves every token: it picks its own positions,
// lengths and input row, and advances the counter for the next replay. Nothing is re-captured
// and no index crosses from the host per token.
//
//   decode_step_reset   step = 0, before a forward's first step                          1 kernel
//   decode_step_select  t = step; positions, lengths = row t of all_positions,
//                       all_lengths ([T, B]); x = inputs[t]                               1 kernel
//   decode_step_commit  outputs[t] = y, then step = t + 1                                 1 kernel
//
// positions and lengths are bounded tables (runtime/index_table.h): their host copies hold each
// sequence's smallest and largest value over the T steps, which the ops of the step validate
// and size their launches by. CUDA only: on the CPU decode steps run eagerly (its kernels read
// the host's values), so these refuse a CPU context.
#pragma once

#include "runtime/context.h"
#include "runtime/index_table.h"

namespace blockscope::ops {

// step: [1, 1].
void decode_step_reset(Context& ctx, IndexTable& step);

// all_positions, all_lengths: [T, B]; positions, lengths: bounded [1, B] whose bounds hold every
// row of all_positions / all_lengths. inputs: [T, ...] contiguous; x: inputs[0]'s shape,
// contiguous, same dtype. A step t outside [0, T) copies nothing (decode_step_reset first).
void decode_step_select(Context& ctx, const IndexTable& step, const IndexTable& all_positions,
                        const IndexTable& all_lengths, const Tensor& inputs, IndexTable& positions,
                        IndexTable& lengths, Tensor& x);

// y: outputs[0]'s shape, contiguous; outputs: [T, ...] contiguous, same dtype.
void decode_step_commit(Context& ctx, IndexTable& step, const Tensor& y, Tensor& outputs);

}  // namespace blockscope::ops
