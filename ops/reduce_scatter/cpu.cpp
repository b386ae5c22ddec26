// CPU reduce_scatter: the communicator's reduce_scatter_sum on the tensors' memory, one work item.
#include "ops/reduce_scatter/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  if (out.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    comm.reduce_scatter_sum(x.data(), out.data(), 0, out.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kReduceScatter);
  comm.reduce_scatter_sum(x.data(), out.data(), out.numel(), out.dtype());
}

}  // namespace blockscope::ops::cpu
