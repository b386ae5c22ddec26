// Tensor parallelism's collective: the all-reduce after each row-parallel GEMM (Megatron-style:
// one block split over ranks, each rank holding a partial sum of the output).
//
//   t [any shape, contiguous, on ctx's device] -> t = the sum of every rank's t (in place)
//
// Through a Communicator (runtime/communicator.h), the same bits on every rank; counts or dtypes
// that differ between ranks are an error on every rank. MPI sums in f32 whatever the dtype
// (f16/bf16 rounded once). On CUDA: NCCL's ncclAllReduce on the context's stream where the
// communicator reduces device memory (a GPU group in one process: f16/bf16 summed by NCCL in
// their own type), else the tensor is staged through host memory (copy out, MPI, copy back).
// One "kernel" recorded: kernel_names::kAllReduce ("all_reduce_sum"), the collective's time
// (when staged, the copies included).
//
// Recorded as op "all_reduce", family collective, with
//   FLOPs = (n − 1) · numel          (the additions)
//   bytes = all_reduce_bus_bytes(nbytes, n) = nbytes · 2(n − 1)/n
// so the op table's GB/s column is nccl-tests' bus bandwidth (algorithm bandwidth = nbytes /
// time; bus bandwidth scales it by 2(n − 1)/n, the traffic of a ring all-reduce per link, to be
// comparable across rank counts). Note: the table's % of peak bandwidth and roofline columns
// set those bytes against the device's memory bandwidth, not a link's. With one rank both are 0.
#pragma once

#include "runtime/communicator.h"
#include "runtime/context.h"

namespace blockscope::ops {

// t (contiguous, on ctx's device) becomes the sum of every rank's t. Every rank of `comm` must
// call it with the same numel and dtype, in the same order as its other collectives.
void all_reduce(Context& ctx, Tensor& t, Communicator& comm);

// nccl-tests' definitions: algorithm bandwidth = bytes / time; bus bandwidth = algbw · 2(n − 1)/n.
double all_reduce_bus_bytes(double bytes, int ranks);  // bytes · 2(n − 1)/n
// The additions of one all-reduce of `elements` over `ranks`: (n − 1) · elements.
double all_reduce_flops(double elements, int ranks);

}  // namespace blockscope::ops
