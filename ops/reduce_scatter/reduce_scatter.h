// Sequence parallelism's first collective: each rank's partial sums of a whole tensor become
// the sum of one block of its rows on each rank (Megatron-LM's sequence parallelism: in place of
// the all-reduce after a row-parallel GEMM, the rows — tokens — are split over the ranks).
//
//   x   [R·n, ...] contiguous, this rank's partial sums (R = the ranks)
//   out [n, ...]   contiguous: rows [rank·n, (rank + 1)·n) of the sum of every rank's x
//
// Through a Communicator (runtime/communicator.h): its sum rules (MPI: f32, rounded once; NCCL:
// in the dtype), the same count and dtype on every rank or an error on every rank. On CUDA the
// NCCL engine reduces device memory on the stream; others stage through host memory.
// One "kernel" recorded: kernel_names::kReduceScatter ("reduce_scatter_sum").
//
// Recorded as op "reduce_scatter", family collective, with (N = x's elements, nccl-tests'
// definitions: algorithm bandwidth = N · element size / time, bus = algbw · (R − 1)/R)
//   FLOPs = (R − 1) · N / R      (the additions that make this rank's block)
//   bytes = reduce_scatter_bus_bytes(x.nbytes, R) = x.nbytes · (R − 1)/R
#pragma once

#include "runtime/communicator.h"
#include "runtime/context.h"

namespace blockscope::ops {

void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm);

// Bus bytes of a reduce-scatter or all-gather of a whole tensor of `bytes` over `ranks`:
// bytes · (R − 1)/R (0 on one rank).
double reduce_scatter_bus_bytes(double bytes, int ranks);

}  // namespace blockscope::ops
