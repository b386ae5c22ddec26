// CPU all_reduce: the communicator's all_reduce_sum on the tensor's own memory, one work item.
#include "ops/all_reduce/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

void all_reduce(Context& ctx, Tensor& t, Communicator& comm) {
  if (t.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    comm.all_reduce_sum(t.data(), 0, t.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kAllReduce);
  comm.all_reduce_sum(t.data(), t.numel(), t.dtype());
}

}  // namespace blockscope::ops::cpu
