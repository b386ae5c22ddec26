// Sequence parallelism's second collective: every rank's block of rows, gathered in rank order
// on every rank (before a column-parallel GEMM, which needs every token).
//
//   x   [n, ...]   contiguous, this rank's rows
//   out [R·n, ...] contiguous: rank r's x at rows [r·n, (r + 1)·n), on every rank (R = the ranks)
//
// Through a Communicator (runtime/communicator.h), exact; the same count and dtype on every rank
// or an error on every rank. On CUDA the NCCL engine moves device memory on the stream; others
// stage through host memory. One "kernel" recorded: kernel_names::kAllGather ("all_gather").
//
// Recorded as op "all_gather", family collective, with (N = out's elements; nccl-tests: bus =
// algbw · (R − 1)/R)
//   FLOPs = 0
//   bytes = reduce_scatter_bus_bytes(out.nbytes, R) = out.nbytes · (R − 1)/R
#pragma once

#include "runtime/communicator.h"
#include "runtime/context.h"

namespace blockscope::ops {

void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);

}  // namespace blockscope::ops
